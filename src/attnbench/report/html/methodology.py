"""The methodology page: the rules every number follows, the statuses, and the project's docs copied into
the site (as text) when the source tree is at hand."""
from __future__ import annotations

from pathlib import Path

from ...status import ORDER
from .markup import MEANING, PAGES, Col, e, note, page, table
from .performance import Context

DOCS = ("methodology.md", "schema.md", "architecture.md", "grids.md")


def docs_dir() -> Path | None:
    """The repository's docs/ beside the package (a source checkout or an editable install), else None."""
    d = Path(__file__).resolve().parents[4] / "docs"
    return d if (d / "methodology.md").is_file() else None


def copy_docs(root: Path, site_title: str, footer: str, pages=PAGES) -> list[str]:
    """Each doc of DOCS as root/docs/NAME.html (the Markdown text, escaped, in a <pre>); the names copied."""
    src = docs_dir()
    if src is None:
        return []
    (root / "docs").mkdir(exist_ok=True)
    copied = []
    for name in DOCS:
        p = src / name
        if not p.is_file():
            continue
        body = (f'<p class="note">{e(name)} of the attnbench repository, as it was when this site was built '
                f'(Markdown source).</p>\n<pre class="doc">{e(p.read_text(encoding="utf-8"))}</pre>\n')
        html = page("methodology.html", name, body, site_title, footer, depth=1, pages=pages)
        (root / "docs" / f"{Path(name).stem}.html").write_text(html, encoding="utf-8")
        copied.append(name)
    return copied


def page_body(ctx: Context, copied: list[str]) -> str:
    d = ctx.data.result["definitions"]
    rules = [{"rule": k.replace("_", " "), "definition": str(v)} for k, v in d.items()]
    statuses = [{"status": s, "meaning": MEANING[s]} for s in ORDER]
    links = "".join(f'<li><a href="docs/{e(Path(n).stem)}.html">{e(n)}</a></li>\n' for n in copied)
    docs = f"<ul>\n{links}</ul>\n" if copied else note(
        "The project's docs (docs/methodology.md and others) were not found beside the installed package; they are "
        "in the attnbench repository.")
    rule_cols = [Col("rule", "rule"), Col("definition", "definition", wrap=True)]
    return ("<section>\n<h2>Rules</h2>\n"
            + table(ctx.table_id(), rule_cols, rules, "The rules the numbers of this site follow (analysis)")
            + "</section>\n<section>\n<h2>Statuses</h2>\n"
            + table(ctx.table_id(), [Col("status", "status"), Col("meaning", "meaning", wrap=True)], statuses,
                    "Every attempt ends as exactly one of these")
            + "</section>\n<section>\n<h2>Documentation</h2>\n" + docs + "</section>\n")
