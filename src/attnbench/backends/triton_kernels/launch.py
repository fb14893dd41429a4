"""A Triton kernel launch whose arguments are bound once: after the first call (through the JIT), the compiled kernel's own launcher is called directly, without the JIT's per-call binding, specialisation and cache lookup."""
from __future__ import annotations

import inspect
import logging

log = logging.getLogger(__name__)


class Launch:
    """fn[grid](*args, **kwargs) with the same arguments at every call.

    The first call goes through Triton's JIT (it compiles if needed, specialises, launches) and keeps the
    CompiledKernel it returns. With `fast` (CUDA; never the interpreter), each later call hands that kernel's
    launcher the arguments as the JIT bound them (tensors as their device addresses) on the current stream of the
    device the JIT launched on (whose context loaded the kernel), read at every call (a capture or a timing on a
    side stream gets its own stream):
    Triton 3.6's JIT spends tens of microseconds of Python per launch binding and specialising arguments that
    never change here. Nothing of the result is kept: the kernel reads the tensors' memory at every launch;
    only where they lie is fixed, and the step's tensors are bound once (refills write into them)."""

    def __init__(self, fn, grid: tuple, args: tuple, kwargs: dict, fast: bool = False):
        self.fn, self.args, self.kwargs, self.fast = fn, tuple(args), dict(kwargs), fast
        self.grid = tuple(grid) + (1,) * (3 - len(grid))
        self.direct = False  # whether calls now bypass the JIT (said by tests and the host-cost benchmark)
        self.kernel = None  # the CompiledKernel of the first call (its metadata: shared memory, PTX)
        self._call = self._through_jit

    def __call__(self) -> None:
        self._call()

    def _through_jit(self) -> None:
        kernel = self.kernel = self.fn[self.grid](*self.args, **self.kwargs)
        if self.fast:
            bound = direct_call(kernel, self.fn, self.grid, self.args, self.kwargs)
            if bound is not None:
                self._bound, self.direct = bound, True
                self._call = self._first_direct

    def _first_direct(self) -> None:
        """The first launch past the JIT; should the launcher refuse it (a Triton whose launcher takes other
        arguments), the JIT launches this and every later call, and `direct` says so (the row's config)."""
        try:
            self._bound()
        except Exception as e:  # noqa: BLE001 - any refusal: the JIT's own launch is always right
            log.warning("%s: a launch past Triton's JIT failed (%s: %s); the JIT launches every call",
                        getattr(self.fn, "__name__", self.fn), type(e).__name__, str(e)[:200])
            self.fast, self.direct, self._call = False, False, self._through_jit
            self._through_jit()
            return
        self._call = self._bound


def bound_values(fn, args: tuple, kwargs: dict) -> tuple:
    """Every parameter of the jitted `fn` in its order, as the JIT hands them to the launcher (constexprs
    included: the launcher skips them), tensors replaced by their addresses (what the launcher reads of them)."""
    names = fn.arg_names
    ba = inspect.signature(fn.fn).bind(*args, **{k: v for k, v in kwargs.items() if k in names})
    ba.apply_defaults()
    return tuple(v.data_ptr() if hasattr(v, "data_ptr") else v for v in (ba.arguments[n] for n in names))


def direct_call(kernel, fn, grid: tuple, args: tuple, kwargs: dict):
    """A function that launches `kernel` (the CompiledKernel a JIT call returned for these very arguments)
    again, or None where this Triton's kernel object is not the one this was written against (the JIT then
    launches every call, as before)."""
    from triton import knobs
    from triton.runtime import driver

    if kernel is not None and hasattr(kernel, "result"):  # an asynchronous compile's future
        kernel = kernel.result()
    if kernel is None or not all(hasattr(kernel, a) for a in ("run", "function", "packed_metadata",
                                                                "launch_metadata")):
        return None
    values = bound_values(fn, args, kwargs)
    runner = kernel.run  # the launcher; its module was loaded by the JIT's launch
    function, meta = kernel.function, kernel.packed_metadata
    gx, gy, gz = grid
    stream_of = driver.active.get_current_stream
    device_index = driver.active.get_current_device()  # the JIT's device for the launch just made
    rt = knobs.runtime

    def hooked(stream) -> bool:
        """Launch hooks set (a profiler such as proton): launch as the JIT does, with the launch metadata."""
        enter, leave = rt.launch_enter_hook, rt.launch_exit_hook
        if not (_live(enter) or _live(leave)):
            return False
        runner(gx, gy, gz, stream, function, meta, kernel.launch_metadata(grid, stream, *values), enter, leave,
               *values)
        return True

    c_launch = getattr(runner, "launch", None)
    if (c_launch is not None and hasattr(runner, "launch_cooperative_grid") and hasattr(runner, "launch_pdl")
            and getattr(runner, "global_scratch_size", 1) == 0 and getattr(runner, "profile_scratch_size", 1) == 0):
        # CudaLauncher.__call__ only allocates scratch (none here) before its C launch: call the C launch itself
        tail = (function, runner.launch_cooperative_grid, runner.launch_pdl, None, None, meta, None, None, None,
                *values)

        def call() -> None:
            stream = stream_of(device_index)
            if not hooked(stream):
                c_launch(gx, gy, gz, stream, *tail)
        return call
    tail = (function, meta, None, None, None, *values)

    def call_launcher() -> None:
        stream = stream_of(device_index)
        if not hooked(stream):
            runner(gx, gy, gz, stream, *tail)
    return call_launcher


def _live(hook) -> bool:
    """Whether a launch hook would do anything (Triton 3.6 holds an empty HookChain when none is set)."""
    if hook is None:
        return False
    calls = getattr(hook, "calls", None)
    return bool(calls) if calls is not None else True
