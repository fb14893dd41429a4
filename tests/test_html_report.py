"""`attnbench report`: the offline site escapes plugin text, shows failed cells blank with a legend, refuses bad
input with nothing written, and (in a real headless Chromium) loads with no console error, no request off the
machine, every figure and link resolving, and tables that sort and filter."""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from attnbench.store import io
from attnbench.store.db import Store
from attnbench.workloads import Workload
from attnbench.workloads.cost import flops, io_bytes
from conftest import make_row

pytest.importorskip("matplotlib", reason="attnbench report needs matplotlib (pip install -e '.[report]')")

EVIL = "<script>alert(1)</script>"
EVIL_REASON = '<img src=x onerror=alert(2)> needs "D=256" & more'
DEVICE = "GPU-T"


def row(backend: str, mode: str, batch: int, n: int, repeat: int, median: float | None, label: str, **over) -> dict:
    """An attempts row of one workload (prefill N×N, or decode 1×N) with raw samples around `median`."""
    w = Workload(mode=mode, batch=batch, q_len=1 if mode == "decode" else n, kv_len=n, q_heads=4, kv_heads=2,
                 head_dim=32, head_dim_v=32, dtype="bf16", causal=False)
    ok = median is not None
    samples = [median * (1 + 0.002 * (j - 5)) for j in range(12)] if ok else None
    base = make_row(0, backend=backend, attempt_key=f"{label}-{backend}-{w.key()}-{repeat}", workload_key=w.key(),
                    **w.to_dict(), repeat=repeat, flops=float(flops(w)), bytes=float(io_bytes(w)), device_name=DEVICE,
                    run_id=f"run-{label}", median_us=median, p95_us=max(samples) if ok else None, samples_us=samples,
                    peak_mem_bytes=2 ** 20 * n if ok else None)
    base["causal"] = 0
    base.update(over)
    return base


def times(label: str) -> dict:
    """(backend, mode, batch, n) -> median µs; None: UNSUPPORTED. The second store swaps one winner."""
    t = {}
    for mode, lengths in (("prefill", (64, 128, 256)), ("decode", (128, 512))):
        for b in (1, 4):
            for n in lengths:
                t[("sdpa-flash", mode, b, n)] = 10.0 * b * n / 64
                t[("fast", mode, b, n)] = 6.0 * b * n / 64 * (1.8 if label == "beta" and n == 128 else 1.0)
                t[(EVIL, mode, b, n)] = 20.0 * b * n / 64 if n != 128 else None
                t[("ref", mode, b, n)] = 90.0 * b * n / 64
    return t


def make_store(path: Path, label: str) -> Path:
    s = Store(path)
    s.start_run(f"run-{label}", "default", "tiny", "attnbench run", DEVICE,
                {"device": {"name": DEVICE, "capability": [9, 0], "sm_count": 8, "total_memory": 2 ** 34},
                 "torch": "2.13.0", "ceilings": {"copy_gbps": 50.0, "matmul_tflops_bf16": 0.5}})
    rows = []
    for (backend, mode, b, n), m in times(label).items():
        for r in range(3):
            extra = {"role": "accuracy_reference"} if backend == "ref" else {}
            if m is None:
                extra.update(status="UNSUPPORTED", reason=EVIL_REASON)
            elif backend == "ref" and mode == "decode" and n == 512:
                m, extra = None, {**extra, "status": "OOM_PREDICTED", "reason": "predicted 9 GiB > 8 GiB"}
            elif backend == "fast" and (mode, b, n, r) == ("prefill", 4, 256, 2):
                m, extra = None, {"status": "CRASH", "reason": "worker killed by SIGABRT"}
            elif backend == "fast" and mode == "decode" and r == 1:
                extra["late_samples"] = 2  # graph samples the host was late for (dropped, counted)
            rows.append(row(backend, mode, b, n, r, m, label, **extra))
    s.insert_many(rows)
    s.finish_run(f"run-{label}")
    s.close()
    return path


def build(tmp: Path, *specs, out: str = "site", expect: int = 0) -> Path:
    from attnbench.cli.main import main

    rc = main(["report", *map(str, specs), "--out", str(tmp / out)])
    assert rc == expect
    return tmp / out


@pytest.fixture(scope="module")
def one_site(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("one")
    return build(tmp, make_store(tmp / "alpha.sqlite", "alpha"), "--pdf")  # PDFs on request (issue 43)


def html_of(site: Path) -> dict[str, str]:
    return {str(p.relative_to(site)): p.read_text() for p in site.rglob("*.html")}


def test_plugin_text_is_escaped_everywhere(one_site):
    pages = html_of(one_site)
    assert {"index.html", "prefill.html", "decode.html", "portability.html", "tables.html",
            "methodology.html"} <= set(pages)
    for name, text in pages.items():
        assert "<script>alert" not in text and "<img src=x" not in text, name
        assert len(re.findall(r"<script\b", text)) == 1, name  # only the site's own table.js
    tables = pages["tables.html"]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in tables
    assert "&lt;img src=x onerror=alert(2)&gt; needs &quot;D=256&quot; &amp; more" in tables
    assert all(re.fullmatch(r"[a-z0-9.-]+", p.name) for p in (one_site / "figures").iterdir())


def test_unsupported_cells_are_blank_with_a_legend(one_site):
    prefill = (one_site / "prefill.html").read_text()
    header = re.search(r"<thead><tr>(.*?)</tr></thead>", prefill).group(1)
    assert "&lt;script&gt;alert(1)&lt;/script&gt; µs" in header  # its column is kept, never hidden
    blank = re.findall(r'<td class="blank st-unsupported" data-status="UNSUPPORTED" title="([^"]*)"></td>', prefill)
    assert len(blank) == 2 and all("UNSUPPORTED: &lt;img" in t for t in blank)  # B=1 and B=4 at N=128
    assert "Blank cell: no OK row, never a hidden one" in prefill and "UNSUPPORTED: the backend declined" in prefill
    # the rows of those workloads are there, with the other backends' times
    assert len(re.findall(r'<tr><td class="num" data-v="\d+">\d+</td><td class="num" data-v="128">', prefill)) == 2
    # the speedup heatmap's data says why its cells are blank
    (csv,) = [p for p in (one_site / "figures").glob("*prefill-speedup.csv")]
    assert csv.read_text().count(",UNSUPPORTED") == 2


def test_every_figure_has_svg_pdf_and_data(one_site):
    figs = one_site / "figures"
    svgs = sorted(figs.glob("*.svg"))
    assert len(svgs) >= 5
    for svg in svgs:
        for ext in ("pdf", "csv", "json"):
            assert svg.with_suffix(f".{ext}").stat().st_size > 0
        assert svg.read_text().lstrip().startswith("<?xml")
    pages = "".join(html_of(one_site).values())
    for svg in svgs:
        assert f'src="figures/{svg.name}"' in pages and f'href="figures/{svg.stem}.pdf"' in pages
    assert "Slice: store alpha, GPU-T; prefill, no mask, bf16" in (one_site / "prefill.html").read_text()


def test_one_store_says_portability_needs_two(one_site):
    assert "Only one store was given (alpha, GPU-T)" in (one_site / "portability.html").read_text()


@pytest.mark.slow
def test_exports_are_read_with_their_runs_and_the_site_is_replaced_whole(tmp_path):
    from test_model_rows_io import model_store

    a, b = model_store(make_store(tmp_path / "a.sqlite", "alpha")), make_store(tmp_path / "b.sqlite", "beta")
    for db, name in ((a, "alpha-x"), (b, "beta-x")):
        s = Store(db, readonly=True)
        io.export(s, None, tmp_path / f"{name}.jsonl.gz")
        io.export(s, None, tmp_path / f"{name}.runs.jsonl", table="runs")
        s.close()
    s = Store(a, readonly=True)
    io.export(s, None, tmp_path / "alpha-x.model_rows.jsonl", table="model_rows")  # read beside its export
    s.close()
    site = build(tmp_path, tmp_path / "alpha-x.jsonl.gz", tmp_path / "beta-x.jsonl.gz")
    assert "(store alpha-x, GPU-T)" in (site / "model.html").read_text()
    index, port = (site / "index.html").read_text(), (site / "portability.html").read_text()
    assert ">alpha-x<" in index and ">beta-x<" in index  # labels: the names before their first dot
    assert 'data-v="50.0">50<' in index  # the copy ceiling, from the runs export beside each
    assert "Every store measured one GPU model (GPU-T)" in port and "alpha-x vs beta-x" in port
    assert (site / ".attnbench-report").is_file()
    (site / "stale.txt").write_text("from an older build")
    build(tmp_path, a)  # a second build replaces the whole directory
    assert not (site / "stale.txt").exists() and "Only one store" in (site / "portability.html").read_text()
    assert [p.name for p in tmp_path.iterdir() if ".partial" in p.name or ".old" in p.name] == []


@pytest.mark.parametrize("case, text", [
    ("missing", "store not found"), ("garbage", "cannot read"), ("out-file", "is a file"),
    ("out-foreign", "holds other files"), ("baseline", "--baseline nope"), ("out-parent", "does not exist"),
    ("unknown-kind", "neither an attnbench store nor an export"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(cli, tmp_path, case, text):
    store = make_store(tmp_path / "s.sqlite", "alpha")
    (tmp_path / "junk.jsonl").write_text("{not json\n")
    (tmp_path / "afile").write_text("x")
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "notes.txt").write_text("keep me")
    args = {"missing": [tmp_path / "absent.sqlite", "--out", tmp_path / "o"],
            "garbage": [tmp_path / "junk.jsonl", "--out", tmp_path / "o"],
            "out-file": [store, "--out", tmp_path / "afile"],
            "out-foreign": [store, "--out", tmp_path / "theirs"],
            "baseline": [store, "--out", tmp_path / "o", "--baseline", "nope"],
            "out-parent": [store, "--out", tmp_path / "no" / "such" / "o"],
            "unknown-kind": [tmp_path / "afile", "--out", tmp_path / "o"]}[case]
    before = sorted(p.name for p in tmp_path.rglob("*"))
    res = cli("report", *args)
    assert res.rc == 2 and text in res.err and len(res.err.strip().splitlines()) == 1, res.err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    assert (tmp_path / "theirs" / "notes.txt").read_text() == "keep me"


# ---- in a real browser ---------------------------------------------------------------------------------------

def chromium() -> str | None:
    for name in (os.environ.get("ATTNBENCH_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        found = name and shutil.which(name)
        if found:
            return found
    return None


def local_target(page_url: str, href: str) -> Path | None:
    """The file a relative link of a page names (None for an in-page anchor)."""
    if href.startswith("#"):
        return None
    assert not re.match(r"^[a-z][a-z0-9+.-]*:", href) or href.startswith("file:"), f"non-local link {href}"
    base = Path(unquote(urlparse(page_url).path)).parent
    return (base / unquote(href.split("#")[0])).resolve()


def cancelled(request) -> bool:
    """A fetch of a file that is there, aborted because the crawl went on to the next page before it ended (the
    favicon, on a loaded host): not a broken link; a missing file fails with another error."""
    return (request.failure == "net::ERR_ABORTED" and request.url.startswith("file:")
            and Path(unquote(urlparse(request.url).path)).is_file())


@pytest.mark.slow
@pytest.mark.skipif(chromium() is None, reason="no chromium binary (Debian: apt-get install chromium)")
def test_site_in_headless_chromium(tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (the browser is Debian's)")
    from test_model_rows_io import model_store

    site = build(tmp_path, model_store(make_store(tmp_path / "alpha.sqlite", "alpha")),
                 make_store(tmp_path / "beta.sqlite", "beta"))
    errors, requests, off_machine = [], [], []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        context.route(lambda url: not url.startswith("file:"), lambda route: (off_machine.append(route.request.url),
                                                                             route.abort()))
        page = context.new_page()
        page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
        page.on("requestfailed", lambda r: None if cancelled(r) else errors.append(f"failed request: {r.url}"))
        page.on("request", lambda r: requests.append(r.url))
        todo, seen = [site / "index.html"], set()
        while todo:
            path = todo.pop()
            if path in seen:
                continue
            seen.add(path)
            page.goto(path.as_uri())
            page.wait_for_load_state("load")
            imgs = page.eval_on_selector_all("img, object", "els => els.map(e => [e.getAttribute('src') || "
                                                            "e.getAttribute('data'), e.complete, e.naturalWidth])")
            for src, complete, width in imgs:
                assert local_target(page.url, src).is_file() and complete and width > 0, (path.name, src)
            for href in page.eval_on_selector_all("a[href]", "els => els.map(e => e.getAttribute('href'))"):
                target = local_target(page.url, href)
                if target is not None:
                    assert target.is_file(), (path.name, href)
                    if target.suffix == ".html":
                        todo.append(target)
        assert {"index.html", "prefill.html", "decode.html", "portability.html", "tables.html",
                "methodology.html", "model.html"} <= {p.name for p in seen}
        assert len(seen) >= 7 and any("figures/" in u and u.endswith(".svg") for u in requests)

        page.goto((site / "tables.html").as_uri())
        table = page.locator("table.sortable").filter(has=page.locator("td", has_text="UNSUPPORTED")).first
        col = [t.strip() for t in table.locator("thead th").all_inner_texts()].index("status")
        before = table.locator(f"tbody tr td:nth-child({col + 1})").all_inner_texts()
        assert before != sorted(before), "the test needs a column not already in order"
        table.locator("thead th").nth(col).click()
        after = table.locator(f"tbody tr td:nth-child({col + 1})").all_inner_texts()
        assert after == sorted(before, key=str.lower) and after != before
        assert table.locator("thead th").nth(col).get_attribute("aria-sort") == "ascending"
        table.locator("thead th").nth(col).click()
        assert table.locator(f"tbody tr td:nth-child({col + 1})").all_inner_texts() == after[::-1]

        box = page.locator(f"input[data-filter-for='{table.get_attribute('id')}']")
        box.fill("UNSUPPORTED")
        rows = table.locator("tbody tr")
        shown = [rows.nth(i).is_visible() for i in range(rows.count())]
        texts = rows.all_inner_texts()
        assert any(shown) and not all(shown)
        assert all(v == ("UNSUPPORTED" in t) for v, t in zip(shown, texts))
        box.fill("")
        assert all(rows.nth(i).is_visible() for i in range(rows.count()))
        browser.close()
    assert errors == [] and off_machine == []
    assert all(u.startswith("file://") for u in requests), [u for u in requests if not u.startswith("file://")]


# ---- the whole-workload page (model rows) --------------------------------------------------------------------

@pytest.fixture(scope="module")
def model_site(tmp_path_factory) -> Path:
    from test_model_rows_io import model_store

    tmp = tmp_path_factory.mktemp("model")
    return build(tmp, model_store(make_store(tmp / "alpha.sqlite", "alpha")), "--pdf")


def test_model_rows_get_a_page_with_its_figure(model_site):
    from test_model_rows_io import EVIL_BACKEND

    page = (model_site / "model.html").read_text()
    for name, text in html_of(model_site).items():
        depth = name.count("/")  # docs/NAME.html, docs/method/NAME.html link up to the site's root
        assert f'href="{"../" * depth}model.html"' in text, name  # in every page's nav
        assert "<b>evil</b>" not in text and "<i>attend</i>" not in text, name
    assert "&lt;b&gt;evil&lt;/b&gt;" in page and "no &lt;i&gt;attend&lt;/i&gt; &amp; &quot;more&quot;" in page
    assert "TTFT (ms)" in page and "time per output token (ms)" in page and "predicted 1/((1−f)+f/s)" in page
    (svg,) = (model_site / "figures").glob("*model-predicted-vs-measured.svg")
    assert f'src="figures/{svg.name}"' in page
    for ext in ("pdf", "csv", "json"):
        assert svg.with_suffix(f".{ext}").stat().st_size > 0
    about = json.loads(svg.with_suffix(".json").read_text())
    assert {r["backend"] for r in about["data"]} == {EVIL_BACKEND}  # the baseline is not a point
    assert {r["step"] for r in about["data"]} == {"prefill", "decode"}
    assert "model tiny, 2 layers, fp32" in about["slice"]
    # the figure's points are the stored columns, not recomputed
    got = {r["step"]: (r["predicted_speedup"], r["measured_speedup"]) for r in about["data"]}
    assert got["prefill"] == pytest.approx((1 / (0.6 + 0.4 / 2), 1000 / 800))


def test_no_model_rows_no_page_and_no_link(one_site):
    assert not (one_site / "model.html").exists()
    assert all("model.html" not in text for text in html_of(one_site).values())


def test_a_store_of_model_rows_only_gets_its_page_as_the_index(tmp_path, cli):
    """`attnbench model` alone, then `attnbench report`: the whole-workload page is the site's index
    (no pages of attempts it does not have), and `show` points to `attnbench model --show`."""
    from test_model_rows_io import model_store

    db = model_store(tmp_path / "m.sqlite")
    site = build(tmp_path, db)
    assert {p.name for p in site.glob("*.html")} == {"index.html", "methodology.html"}
    index = (site / "index.html").read_text()
    assert "Whole workload" in index and "predicted 1/((1−f)+f/s)" in index
    assert 'href="prefill.html"' not in index and 'href="model.html"' not in index
    res = cli("show", "--db", db)
    assert res.rc == 0 and "holds no attempts but" in res.out and "attnbench model --db" in res.out
    empty = tmp_path / "empty.sqlite"
    from attnbench.store.db import Store

    Store(empty).close()
    assert build(tmp_path, empty, out="none", expect=2) and not (tmp_path / "none").exists()


def test_the_overview_says_where_each_stores_wall_went(one_site):
    index = (one_site / "index.html").read_text()
    section = index.split("<h2>Where the sweep's wall went</h2>")[1].split("</section>")[0]
    for phase in ("timed samples", "warm-up", "in attempts, between phases"):
        assert phase in section
    decodes = sum(1 for (b, mode, *_), m in times("alpha").items() if b == "fast" and mode == "decode" and m)
    assert f"store alpha: {2 * decodes:,} in {decodes:,} OK rows" in section and decodes


def test_the_overview_says_how_several_devices_shared_a_sweep(tmp_path, one_site):
    db = tmp_path / "two.sqlite"
    s = Store(db)
    s.start_run("run-two", "default", "tiny", "attnbench run --devices 0,1", DEVICE, {"device": {"name": DEVICE}})
    rows = [row("fast", "prefill", 1, n, 0, 10.0, "two", run_id="run-two", device_index=i % 2,
                device_uuid=f"GPU-{i % 2}", wall_s=1.0 + i % 2) for i, n in enumerate((64, 128, 256, 512))]
    rows.append(row("fast", "prefill", 1, 1024, 0, None, "two", run_id="run-two", status="UNSUPPORTED",
                    reason="planned out", device_index=None, wall_s=None))
    s.insert_many(rows)
    s.finish_run("run-two")
    s.close()
    section = (build(tmp_path, db) / "index.html").read_text().split("<h2>Where the sweep's wall went</h2>")[1]
    section = section.split("</section>")[0]
    assert "How the devices of a sweep over several shared its attempts" in section
    assert f"0 {DEVICE}" in section and f"1 {DEVICE}" in section and "GPU-1" in section
    one = (one_site / "index.html").read_text()
    assert "How the devices of a sweep" not in one
