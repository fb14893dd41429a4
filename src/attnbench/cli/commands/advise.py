"""`attnbench advise`: the backend to use for one workload, and what that choice costs on other stores."""
from __future__ import annotations

from .. import console
from ..usage import UsageError

NAME = "advise"
HELP = "the backend to use for one workload, and what it costs elsewhere"
DESCRIPTION = ("The fastest backend for a workload on the first store (or the nearest measured workload, said as "
               "such), its time as measured there, whether its lead is separated, the runner-up, and the cost of that "
               "choice on every other store.")
EPILOG = """\
CONFIG.json is a Hugging-Face-style model config: num_attention_heads (Hq), num_key_value_heads
(Hkv; default Hq), head_dim (or hidden_size / num_attention_heads), and optionally torch_dtype
(bfloat16, float16 or float32; default bf16). The batch, the sequence length, the mode and the
launch come from --batch, --seqlen, --mode and --launch; attention is causal, as in a decoder
(decode has one query against the cache and no mask)."""


def add_arguments(v) -> None:
    v.add_argument("stores", nargs="+", metavar="STORE",
                   help="attnbench stores or exports (or LABEL=STORE); the first is the one advised for")
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


def run(args) -> int:
    from ...analysis.advise import advise
    from ...report import advise as page
    from ...store import sources
    from ...workloads import WorkloadError
    from ..workload_text import from_model, parse_workload

    if args.workload is not None and not args.workload.strip():
        raise UsageError('--workload is empty: name one, e.g. "prefill B=4 N=8192 Hq=32 Hkv=8 D=128 bf16 causal"')
    try:
        wanted = parse_workload(args.workload) if args.workload is not None else from_model(args.model, args)
    except WorkloadError as e:
        raise UsageError(str(e)) from None
    data = sources.load(args.stores)
    if data.attempts.empty:
        raise UsageError("the stores hold no attempts")
    advice = advise(data.attempts, wanted, home=data.labels[0], include_references=args.all)
    for part in page.terminal(advice):
        console.out.print(part, highlight=False)
    return 0

