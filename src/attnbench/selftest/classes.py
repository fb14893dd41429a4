"""The selftest's classes of misbehaviour: which kernel plays each, on which devices, and how its row is judged."""
from __future__ import annotations

from dataclasses import dataclass

from ..status import Status

# the verdicts of the gates: a row with one of these says the kernel was caught, and which gate said so
GATE_STATUSES = frozenset({Status.INCORRECT.value, Status.DISPATCH_MISMATCH.value, Status.IMPLAUSIBLE.value})
CONTROL = "selftest-honest"
CACHED_CONTROL = "selftest-honest-cached"  # the honest kernel on the cache classes' workload
# a cache class's OK row was timed on calls that did the work when its kernel's longest run of computed calls
# is at least this share of the row's timed calls (calls_per_sample x samples, one run of calls): warm-up calls
# on the same inputs are memo answers whatever the timer does, so a share of all calls says nothing
COMPUTED_SHARE = 0.5


@dataclass(frozen=True)
class Case:
    name: str  # what it is called in the table
    backend: str  # its kernel in selftest/kernels.py
    what: str  # the misbehaviour, in a few words
    devices: tuple[str, ...] = ("cpu", "cuda")
    gpu_only: str = ""  # why the class means nothing on a CPU
    cache: bool = False  # an OK row is judged by how many calls its memo answered (fresh inputs defeat it)


CASES = (
    Case("side stream", "selftest-side-stream", "work on a stream of its own that the caller never waits for",
         ("cuda",), "a CPU call runs on the caller's thread: there is no stream to leave unjoined"),
    Case("empty graph", "selftest-empty-graph", "a CUDA graph that captured nothing and replays stale output",
         ("cuda",), "CUDA graphs exist only on CUDA (CPU rows are launched eagerly)"),
    Case("cached on identity", "selftest-cached-identity",
         "a result memoised on the inputs' identity and version, declaring no kernels", cache=True),
    Case("cached on values", "selftest-cached-values",
         "a result memoised on a fingerprint of the input values; hits still run the declared kernel on 1/4 "
         "of the KV", cache=True),
    Case("inputs written", "selftest-writes-inputs", "decode that rounds the KV cache in place (idempotent)"),
    Case("late fallback", "selftest-late-fallback", "the declared fused kernel for 12 calls, unfused GEMMs after"),
    Case("partial fallback", "selftest-partial-fallback", "the declared kernel for one KV group, GEMMs for the rest"),
    Case("silently eager", "selftest-silently-eager",
         "declares the compiled path's kernels, runs flex_attention's eager fallback"),
    Case("host-side wait", "selftest-host-thread",
         "returns at once; a host thread waits, then writes the output behind the clock"),
    Case("unwritten output", "selftest-unwritten-output", "writes half the query rows of its output buffer"),
    Case("wrong gradients", "selftest-wrong-gradients", "right forward, dK 20% too large"),
)


def cases_for(device_type: str) -> list[Case]:
    return [c for c in CASES if device_type in c.devices]


@dataclass(frozen=True)
class Verdict:
    case: str
    caught: bool
    shown: str  # CAUGHT's status, MISSED, or NOT RUN
    status: str | None  # the row's status (None: no row)
    detail: str  # the row's reason, or what an OK row's time says

    def to_json(self) -> dict:
        return {"class": self.case, "caught": self.caught, "verdict": self.shown, "status": self.status,
                "detail": self.detail}


def judge(case: Case, row: dict | None, control: dict | None, ledger: dict | None = None) -> Verdict:
    """A class's verdict from its row; for a cache class's OK row, from its kernel's own count of its calls
    (`ledger`: calls, hits, longest_computed) against the row's timed calls, its time beside the honest kernel's."""
    if row is None:
        return Verdict(case.name, False, "NOT RUN", None, "no row was written for its kernel")
    status, reason = row["status"], (row.get("reason") or "").strip()
    if status in GATE_STATUSES:
        return Verdict(case.name, True, status, status, reason)
    if status != Status.OK.value:  # it failed in a way no gate chose: the class was not tried
        return Verdict(case.name, False, "NOT RUN", status, reason)
    text = f"OK at {row.get('median_us') or 0:.1f} us"
    if control and control.get("status") == Status.OK.value and control.get("median_us"):
        text += f" (the honest kernel: {control['median_us']:.1f} us)"
    if not case.cache:
        return Verdict(case.name, False, "MISSED", status, text)
    timed = (row.get("calls_per_sample") or 0) * len(row.get("samples_us") or ())
    if not ledger or not ledger.get("calls") or not timed:
        return Verdict(case.name, False, "NOT RUN", status, text + "; its kernel left no count of its calls")
    longest = ledger.get("longest_computed", 0)
    text += (f"; {timed} timed calls, its longest run of computed calls {longest} "
             f"(its memo answered {ledger['hits']} of {ledger['calls']} calls, warm-up's included)")
    if longest < COMPUTED_SHARE * timed:
        return Verdict(case.name, False, "MISSED", status, text + ": the timed calls were memo answers")
    return Verdict(case.name, True, "UNCACHED", status, text + ": the timed calls did the work")
