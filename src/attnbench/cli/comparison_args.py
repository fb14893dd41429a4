"""The arguments of analyze, compare and advise: the commands that read stores side by side."""
from __future__ import annotations

from ..analysis.sides import BY_CHOICES

MODEL_HELP = """\
CONFIG.json is a Hugging-Face-style model config: num_attention_heads (Hq), num_key_value_heads
(Hkv; default Hq), head_dim (or hidden_size / num_attention_heads), and optionally torch_dtype
(bfloat16, float16 or float32; default bf16). The batch, the sequence length, the mode and the
launch come from --batch, --seqlen, --mode and --launch; attention is causal, as in a decoder
(decode has one query against the cache and no mask)."""


def add_comparison_commands(sub) -> None:
    a = sub.add_parser("analyze", help="winners, their separation, transfer costs and winner changes across stores",
                       description="Read several stores side by side, each under its own label (LABEL=STORE, "
                                   "default: the file's stem), and answer whether a winner's lead is real and "
                                   "whether the choice survives another store, GPU, toolkit, launch mode or L2 "
                                   "state (--by), and what it costs when it does not.")
    a.add_argument("stores", nargs="+", metavar="STORE", help="an attnbench store, or LABEL=STORE")
    a.add_argument("--by", choices=BY_CHOICES, default="label", metavar="COLUMN",
                   help="the axis compared across: " + ", ".join(BY_CHOICES) + " (default label: one side per "
                        "store; launch or l2: the same store's workloads that differ only there)")
    a.add_argument("--json", metavar="FILE", help="write every section (winners, transfer, pairs, outcomes, "
                                                  "dispatch, correctness, efficiency) as JSON")
    a.add_argument("--md", metavar="FILE", help="write a readable Markdown report")
    a.add_argument("--all", action="store_true", help="include accuracy references in the contest")

    c = sub.add_parser("compare", help="regressions of NEW against BASE per workload and backend (exit 3 if any)",
                       description="Per device model × workload × backend measured OK in both stores: NEW's time "
                                   "over BASE's with a 95% bootstrap interval. A row regressed when the ratio is "
                                   "at least --threshold and the interval's lower end is above 1; an OK row of "
                                   "BASE that is no longer OK in NEW is lost. Exit 0: nothing regressed or lost; "
                                   "3: something did; 2: bad input.")
    c.add_argument("base", metavar="BASE", help="the store measured before")
    c.add_argument("new", metavar="NEW", help="the store measured after")
    c.add_argument("--threshold", type=float, default=1.05, help="slowdown ratio that counts (default 1.05)")
    c.add_argument("--json", metavar="FILE", help="write every compared row as JSON")

    v = sub.add_parser("advise", help="the backend to use for one workload, and what it costs elsewhere",
                       description="The fastest backend for a workload on the first store (or the nearest "
                                   "measured workload, said as such), its expected time, whether its lead is "
                                   "separated, the runner-up, and the cost of that choice on every other store.",
                       epilog=MODEL_HELP)
    v.add_argument("stores", nargs="+", metavar="STORE", help="attnbench stores (or LABEL=STORE); the first is "
                                                              "the one advised for")
    w = v.add_mutually_exclusive_group(required=True)
    w.add_argument("--workload", metavar="TEXT",
                   help='e.g. "prefill B=4 N=8192 Hq=32 Hkv=8 D=128 bf16 causal"; also Nq=, Nkv=, Dv=, '
                        "graph, cold, BNHD, top_left, or AXIS=VALUE for any workload field; unnamed fields take "
                        "their defaults (eager, warm L2, BHND)")
    w.add_argument("--model", metavar="CONFIG.json", help="a model config (see below)")
    v.add_argument("--mode", choices=("prefill", "decode"), default="prefill", help="with --model (default prefill)")
    v.add_argument("--batch", type=int, default=1, help="with --model (default 1)")
    v.add_argument("--seqlen", default="4k", help="with --model: prompt length, or KV-cache length for decode "
                                                  "(default 4k)")
    v.add_argument("--launch", choices=("eager", "graph"), default="eager", help="with --model (default eager)")
    v.add_argument("--all", action="store_true", help="include accuracy references in the contest")
