"""The outcome of an attempt: exactly one of these per row."""
from enum import Enum


class Status(str, Enum):
    OK = "OK"  # correct, dispatched as declared, timed
    UNSUPPORTED = "UNSUPPORTED"  # the backend or library declined the configuration (reason says why)
    OOM_PREDICTED = "OOM_PREDICTED"  # predicted not to fit in device memory; not run
    OOM = "OOM"  # ran out of memory
    INCORRECT = "INCORRECT"  # output or gradients failed the float64 check, or the KV cache changed
    DISPATCH_MISMATCH = "DISPATCH_MISMATCH"  # a different kernel family ran than the backend declares
    IMPLAUSIBLE = "IMPLAUSIBLE"  # timed faster than its own kernels ran, or beyond the device's ceiling
    TIMEOUT = "TIMEOUT"  # exceeded --timeout; the worker was killed
    CRASH = "CRASH"  # the worker died (signal, abort) or the CUDA context broke
    ERROR = "ERROR"  # any other exception


ORDER = [s.value for s in Status]


# Out of memory in a library's own words: the CPU allocator's, a CUDA call's, XLA's (JAX), cuDNN's
OOM_WORDS = ("DefaultCPUAllocator: can't allocate memory", "DefaultCPUAllocator: not enough memory",
             "CUDA error: out of memory", "RESOURCE_EXHAUSTED: Out of memory", "CUDNN_STATUS_ALLOC_FAILED")


# lines a compiler's error ends with that say how to learn more, not what failed
_HINTS = ("Set TORCH", "You can suppress", "To execute this test", "For more information")


def error_text(e: BaseException) -> str:
    """An error as a row's reason: its type and the first line of its text (500 characters at most).
    A first line that ends with a colon heads what follows (a Triton compile error's "at 194:23:"
    above the source it quotes), so the text's last line, the error itself, is added to it."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    if not lines:
        return f"{type(e).__name__}: "
    text = lines[0][:500]
    tail = [ln for ln in lines[1:] if not ln.startswith(_HINTS) and set(ln) - set("^~ ")]
    if text.endswith(":") and tail:
        text += f" … {tail[-1][:300]}"
    return f"{type(e).__name__}: {text}"


def oom_reason(e: BaseException) -> str | None:
    """The reason of an OOM row when the error's text says out of memory in a library's words
    (OOM_WORDS) on any line, else None: error_text, and the line that says it when that is not the
    first (XLA's autotuner raises "NOT_FOUND: All configs failed during profiling" above its
    allocator's line)."""
    for i, line in enumerate(str(e).strip().splitlines()):
        if any(t in line for t in OOM_WORDS):
            return f"{error_text(e)} ({line.strip()[:300]})" if i else error_text(e)
    return None


# Words of a CUDA fault after which the process's context is unusable
CONTEXT_BROKEN = ("illegal memory access", "device-side assert", "unspecified launch failure",
                  "an illegal instruction", "misaligned address", "CUDA error: unknown error")


def context_broken(e: BaseException, device: str) -> str | None:
    """The error text if this failure (or an asynchronous kernel fault behind it) left the CUDA
    context unusable; what runs next must then get a fresh process."""
    if any(s in str(e) for s in CONTEXT_BROKEN):
        return error_text(e)
    if device.startswith("cuda"):
        import torch

        try:
            torch.cuda.synchronize()  # a faulting kernel launched before the exception shows here
        except Exception as late:
            return error_text(late)
    return None


def failure(e: Exception, device: str) -> tuple[Status, str]:
    """The status and reason of a step that raised `e` (an attempt's, a model step's): OOM when an
    allocator failed (its exception type, or a library's words on any line), CRASH when the CUDA
    context is broken, else ERROR."""
    import torch

    if isinstance(e, (torch.OutOfMemoryError, MemoryError)):
        return Status.OOM, error_text(e)
    oom = oom_reason(e)
    if oom is not None:
        return Status.OOM, oom
    broken = context_broken(e, device)
    if broken:
        return Status.CRASH, f"CUDA context broken: {broken}"
    return Status.ERROR, error_text(e)
