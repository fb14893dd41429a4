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
