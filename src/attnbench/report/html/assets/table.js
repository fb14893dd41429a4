// attnbench report: sort a table on a click of its header, filter its rows on typed text. No library.
"use strict";
(function () {
  function cellKey(row, index) {
    var cell = row.cells[index];
    if (!cell || cell.classList.contains("blank") || cell.textContent.trim() === "") {
      return null; // empty cells sort last either way
    }
    var v = cell.getAttribute("data-v");
    if (v !== null && v !== "" && isFinite(Number(v))) {
      return Number(v);
    }
    return cell.textContent.trim().toLowerCase();
  }

  function compare(a, b) {
    if (typeof a === "number" && typeof b === "number") {
      return a - b;
    }
    return String(a).localeCompare(String(b), undefined, { numeric: true });
  }

  function sortBy(table, index, th) {
    var body = table.tBodies[0];
    var ascending = th.getAttribute("aria-sort") !== "ascending";
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (r1, r2) {
      var a = cellKey(r1, index), b = cellKey(r2, index);
      if (a === null || b === null) {
        return (a === null) - (b === null);
      }
      return ascending ? compare(a, b) : compare(b, a);
    });
    rows.forEach(function (r) { body.appendChild(r); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (c) { c.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
  }

  function filter(table, text) {
    var q = text.trim().toLowerCase();
    Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
      r.hidden = q !== "" && r.textContent.toLowerCase().indexOf(q) < 0;
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("table.sortable").forEach(function (table) {
      if (!table.tHead) { return; }
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, index) {
        th.title = (th.title ? th.title + " · " : "") + "click to sort";
        th.addEventListener("click", function () { sortBy(table, index, th); });
      });
    });
    document.querySelectorAll("input[data-filter-for]").forEach(function (input) {
      var table = document.getElementById(input.getAttribute("data-filter-for"));
      if (table) {
        input.addEventListener("input", function () { filter(table, input.value); });
      }
    });
  });
})();
