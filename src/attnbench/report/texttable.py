"""A table of text cells rendered alike for a terminal (rich, fits 80 columns) and for Markdown."""
from __future__ import annotations

from dataclasses import dataclass, field

from rich import box
from rich.markup import escape
from rich.table import Table


@dataclass
class TextTable:
    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    right: frozenset[int] = frozenset()  # indexes of right-justified (numeric) columns

    def add(self, *cells) -> None:
        self.rows.append([str(c) for c in cells])


def to_rich(t: TextTable) -> Table:
    """A compact table: a rule under the header only, long cells folded, markup never interpreted."""
    out = Table(title=escape(t.title), box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False)
    for i, h in enumerate(t.headers):
        out.add_column(escape(h), justify="right" if i in t.right else "left", overflow="fold")
    for r in t.rows:
        out.add_row(*(escape(c) for c in r))
    return out


def to_markdown(t: TextTable) -> str:
    def cell(c: str) -> str:
        return c.replace("|", "\\|").replace("\n", " ")

    lines = [f"### {t.title}", "", "| " + " | ".join(cell(h) for h in t.headers) + " |",
             "| " + " | ".join("---:" if i in t.right else "---" for i in range(len(t.headers))) + " |"]
    lines += ["| " + " | ".join(cell(c) for c in r) + " |" for r in t.rows]
    return "\n".join(lines) + "\n"


def num(v, fmt: str = ".2f", none: str = "-") -> str:
    """A number as text, `none` when it is missing."""
    if v is None or v != v:  # NaN
        return none
    return format(v, fmt)


def pct(v, none: str = "-") -> str:
    return none if v is None or v != v else f"{100 * v:.0f}%"


def workload_tokens(r: dict) -> list[str]:
    """A workload as short tokens: prefill B4 N8192 H32/8 D128 bf16 causal eager."""
    n = f"N{r['kv_len']}" if r["mode"] == "decode" or r["q_len"] == r["kv_len"] else f"Nq{r['q_len']} Nkv{r['kv_len']}"
    return [str(r["mode"]), f"B{r['batch']}", n, f"H{r['q_heads']}/{r['kv_heads']}", f"D{r['head_dim']}",
            str(r["dtype"]), "causal" if r.get("causal") else "full", str(r["launch"]),
            f"L2 {r['l2']}" if r.get("l2") else "L2 warm"]


def workload_text(r: dict) -> str:
    return " ".join(workload_tokens(r))


def varying_text(rows: list[dict]) -> tuple[list[str], str]:
    """Each row's workload in the tokens that differ among `rows`, and the tokens they all share (a
    caption: a narrow table need not repeat them)."""
    tokens = [workload_tokens(r) for r in rows]
    if not tokens:
        return [], ""
    same = [i for i in range(len(tokens[0])) if len({t[i] for t in tokens}) == 1] if len(tokens) > 1 else []
    texts = [" ".join(x for i, x in enumerate(t) if i not in same) for t in tokens]
    return texts, " ".join(tokens[0][i] for i in same)


def load_text(load: list[float] | None, cpus: int | None) -> str:
    """The hosts' 1-minute load average when the runs started, against their CPU count: "load 3.1 on 2 CPUs
    at start"; '' when no run recorded it."""
    if not load:
        return ""
    lo, hi = load[0], load[-1]
    text = f"{lo:.1f}" if f"{lo:.1f}" == f"{hi:.1f}" else f"{lo:.1f}-{hi:.1f}"
    return f"load {text}" + (f" on {cpus} CPUs" if cpus else "") + " at start"
