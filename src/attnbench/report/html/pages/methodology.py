"""The methodology page: the rules every number follows, the statuses, and the project's docs copied into
the site (as text) when the source tree is at hand."""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from ....status import ORDER
from .. import selftest_block
from ..context import Context
from ..markup import MEANING, Col, e, note, page, table

FILE, TITLE = "methodology.html", "Methodology"
DOCS = ("methodology.md", "schema.md", "architecture.md", "grids.md")
RULES = "method"  # docs/method/*.md: the rules, one file per measurement, which docs/methodology.md indexes


def docs_dir() -> Path | None:
    """The repository's docs/ beside the package (a source checkout or an editable install), else None."""
    d = Path(__file__).resolve().parents[5] / "docs"
    return d if any((d / n).is_file() for n in DOCS) else None


def doc_names(src: Path) -> list[str]:
    """The docs to copy, relative to docs/: those of DOCS that exist, then every rule under docs/method/."""
    rules = sorted(p.relative_to(src).as_posix() for p in (src / RULES).glob("*.md")) if (src / RULES).is_dir() else []
    return [n for n in DOCS if (src / n).is_file()] + rules


def copy_docs(root: Path, site_title: str, footer: str, pages) -> list[str]:
    """Each doc (doc_names) as root/docs/NAME.html (the Markdown text, escaped, in a <pre>); the names copied.
    `pages`: the site's nav, (file, title) per page."""
    src = docs_dir()
    if src is None:
        return []
    copied = []
    for name in doc_names(src):
        body = (f'<p class="note">{e(name)} of the attnbench repository, as it was when this site was built '
                f'(Markdown source).</p>\n<pre class="doc">{e((src / name).read_text(encoding="utf-8"))}</pre>\n')
        html = page(FILE, name, body, site_title, footer, depth=1 + name.count("/"), pages=pages)
        out = root / "docs" / Path(name).with_suffix(".html")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(html, encoding="utf-8")
        copied.append(name)
    return copied


def applies(data) -> bool:
    return True


def body(ctx: Context) -> str:
    rules = [{"rule": k.replace("_", " "), "definition": str(v)}
             for k, v in asdict(ctx.data.analysis.definitions).items()]
    statuses = [{"status": s, "meaning": MEANING[s]} for s in ORDER]
    links = "".join(f'<li><a href="docs/{e(Path(n).with_suffix(".html").as_posix())}">{e(n)}</a></li>\n'
                    for n in ctx.docs)
    docs = f"<ul>\n{links}</ul>\n" if ctx.docs else note(
        "The project's docs (docs/methodology.md and others) were not found beside the installed package; they are "
        "in the attnbench repository.")
    rule_cols = [Col("rule", "rule"), Col("definition", "definition", wrap=True)]
    return ("<section>\n<h2>Rules</h2>\n"
            + table(ctx.table_id(), rule_cols, rules, "The rules the numbers of this site follow (analysis)")
            + "</section>\n<section>\n<h2>Statuses</h2>\n"
            + table(ctx.table_id(), [Col("status", "status"), Col("meaning", "meaning", wrap=True)], statuses,
                    "Every attempt ends as exactly one of these")
            + "</section>\n" + selftest_block.block(ctx.data.dataset.paths, ctx.table_id)  # issue 42.1
            + "<section>\n<h2>Documentation</h2>\n" + docs + "</section>\n")
