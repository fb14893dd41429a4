"""The methodology page's "Last selftest" block: per store and device, the last `attnbench selftest --db STORE`."""
from __future__ import annotations

from pathlib import Path

from ...store.selftests import last_per_device
from .markup import Col, e, note, table

HINT = ("Run `attnbench selftest --db STORE` on the device before a sweep: it runs attnbench's own misbehaving "
        "kernels through the same gates and stores which gate caught each.")


def block(paths: dict[str, Path], table_id) -> str:
    """The section: one summary line per store × device, then each selftest's classes; a note when none is stored.
    `paths`: label -> the file read; `table_id`: the page's table numbering."""
    found = [(label, r) for label, p in paths.items() for r in last_per_device(p)]
    out = "<section>\n<h2>Last selftest</h2>\n"
    if not found:
        return out + note("No selftest is stored with these results. " + HINT) + "</section>\n"
    for label, r in found:
        verdict = "passed" if r["passed"] else "FAILED"
        out += (f"<p><b>{e(label)}</b>: {e(r['device_name'])} ({e(r['device'])}), {e(r['started_at'])}: "
                f"<b>{e(verdict)}</b>, {e(r['caught'])}/{e(r['classes'])} classes caught in {e(r['wall_s'])} s; "
                f"honest control {e(r['control'])}; fresh inputs {'on' if r['fresh_inputs'] else 'off'}; "
                f"{e(', '.join(f'{k} {v}' for k, v in (r['versions'] or {}).items()))}</p>\n")
        rows = [{"class": v.get("class"), "verdict": v.get("verdict"), "detail": v.get("detail")}
                for v in r["verdicts"] or []]
        rows += [{"class": g.get("class"), "verdict": "GPU only", "detail": g.get("why")} for g in r["gpu_only"] or []]
        out += table(table_id(), [Col("class", "class"), Col("verdict", "caught as"),
                                  Col("detail", "detail", wrap=True)], rows,
                     f"{label}: each class of misbehaving kernel and the gate that caught it (MISSED: none did)")
    return out + "</section>\n"
