"""The worker process: loads backends (plugins included), answers one request at a time: a job of
any job type (runner/jobs.py: an attempt, a model step), a release, the run's provenance."""
from __future__ import annotations

import gc
import logging
import os
import threading
import time

from ..status import Status, error_text


def _watch_parent(parent: int) -> None:
    # If the supervisor is killed (kill -9), a worker must not outlive it.
    while True:
        if os.getppid() != parent:
            os._exit(3)
        time.sleep(0.5)


# Workers of compile-based backends compile one attention graph at a time (one to four Triton
# kernels): Inductor's default pool of one compile process per core would cost seconds of start-up
# per worker and keep busy processes next to the timed ones. A value set by the user wins.
COMPILER_ENV = {"TORCHINDUCTOR_COMPILE_THREADS": "1"}


def compiler_env(cache_dir: str | None = None) -> dict:
    """The compiler settings workers of compile-based backends run with (recorded in provenance).
    cache_dir: where Inductor, Triton and JAX (XLA executables, whatever their size or compile time)
    keep compiled code for this run: a cold start then depends on that directory alone, not on
    whatever earlier runs left in the default one, and a later repeat's fresh process loads what an
    earlier one compiled (jax-xla: about 2.6 s of first call per prefill workload on an H200 otherwise)."""
    env = {k: os.environ.get(k, v) for k, v in COMPILER_ENV.items()}
    if cache_dir:
        env.update(TORCHINDUCTOR_CACHE_DIR=os.path.join(cache_dir, "inductor"),
                   TRITON_CACHE_DIR=os.path.join(cache_dir, "triton"),
                   JAX_COMPILATION_CACHE_DIR=os.path.join(cache_dir, "jax"),
                   JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                   JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="-1")
    return env


def run_provenance(device: str, seed: int, plugins=(), measure_ceilings: bool = True,
                   compile_cache: dict | None = None) -> dict:
    """What a run records: the measured provenance, plus the settings of its compile workers."""
    from ..measure import provenance
    from ..measure.ceilings import ceilings
    from ..measure.device import bind

    bind(device)
    prov = provenance.collect(device, seed, plugins=plugins)
    if measure_ceilings:
        prov["ceilings"] = ceilings(device)
    prov["compile_workers_env"] = compiler_env((compile_cache or {}).get("dir"))
    if compile_cache:
        prov["compile_cache"] = compile_cache
    return prov


def _warm_up(device: str, compiler: bool) -> None:
    """Pay process start-up before the ready handshake: torch import, CUDA context, the profiler's
    first start (seconds with CUPTI), and for compile-based backends on a GPU the compiler stack's
    first use (Dynamo, Inductor, Triton's compiler), so that a first attempt's cold start holds
    its own compilation only."""
    import torch

    from ..measure import device as bound, dispatch

    bound.bind(device)  # before the CUDA context is created: it is created on this GPU
    x = torch.ones(8, device=device)
    dispatch.probe(lambda: x * 2, device)
    if compiler:
        import torch._dynamo
        import torch._inductor.compile_fx  # noqa: F401

        if device.startswith("cuda"):
            torch.compile(lambda t: torch.softmax(t * 2, -1), dynamic=False)(x.view(2, 4))
            torch.cuda.synchronize()
            torch._dynamo.reset()


def _release(backend) -> None:
    try:
        backend.release()
    except Exception:  # a library that cannot let go keeps its pool; the next attempt says if that hurts
        logging.getLogger(__name__).warning("%s: release failed", backend.name, exc_info=True)


def after_attempt(backend) -> None:
    """Give the device memory this attempt left cached back, so that the next backend of the same
    workload, often in another worker process, finds the GPU as free as the planner assumed: a
    library with a pool of its own (JAX) drops it; PyTorch's caching allocator returns its unused
    blocks (the workload's inputs stay; the next attempt's allocations happen before its timing).
    Without it, a 16k-token prefill left 57 to 90 GiB cached in other workers, and every backend
    after them was OOM (H200, features grid)."""
    if backend.holds_pool:
        _release(backend)
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def finish(res: dict, backend) -> dict:
    """after_attempt() for an attempt that left its CUDA context usable. What fails there is CUDA's
    runtime (a kernel's fault reported late, at empty_cache): the row becomes a CRASH that says so and
    the worker stops, instead of dying with the row unsent."""
    if res.get("fatal"):
        return res  # the context is broken already: nothing can be given back through it
    try:
        after_attempt(backend)
    except Exception as e:
        return {**res, "status": Status.CRASH.value, "fatal": True,
                "reason": f"CUDA context broken after the attempt: {error_text(e)}"}
    return res


def worker_main(conn, plugins: list[str], parent: int, log_level: int = logging.WARNING,
                log_path: str | None = None, warm: dict | None = None) -> None:
    if hasattr(os, "setsid"):  # a process group of its own: a kill takes whatever a backend started with it
        try:
            os.setsid()
        except OSError:
            pass
    if warm and warm.get("cores") and hasattr(os, "sched_setaffinity"):  # before torch sizes its thread pools
        os.sched_setaffinity(0, warm["cores"])
        os.environ.setdefault("OMP_NUM_THREADS", str(len(warm["cores"])))  # one thread per core it may use
    if warm and warm.get("compiler"):
        os.environ.update(compiler_env(warm.get("compile_cache")))  # before anything imports Inductor
    if log_path:  # libraries' own prints (profiler, compilers) go to the run log, not the progress bar
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
    logging.basicConfig(level=log_level, format="worker %(process)d %(levelname)s %(name)s: %(message)s")
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    try:
        from ..backends.registry import all_backends
        from ..measure.dispatch import Classifier
        from . import attempt, jobs

        backends = {b.name: b for b in all_backends(plugins)}
        classifier = Classifier.from_backends(backends.values())  # every loaded backend's kernel names
    except Exception as e:
        conn.send({"ready": False, "error": f"{type(e).__name__}: {e}"})
        return
    if warm:
        try:
            _warm_up(warm["device"], warm.get("compiler", False))
        except Exception:  # a failed warm-up is not fatal: the first attempt will say what is wrong
            logging.getLogger(__name__).warning("worker warm-up failed", exc_info=True)
    gc.freeze()  # what start-up built lives as long as the process: each release's collection skips it
    conn.send({"ready": True, "pid": os.getpid()})
    caches: dict = {}  # per job type: what its jobs share (the last workload's inputs, the last step spec's model)
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        op = msg.get("op")
        if op == "stop":
            return
        if op == "release":
            for cache in caches.values():
                cache.clear()
            for b in backends.values():
                _release(b)
            attempt.free_memory()
            conn.send({"ok": True})
            continue
        if op == "provenance":
            try:
                conn.send({"ok": True, "provenance": run_provenance(msg["device"], msg["seed"], plugins,
                                                                       msg.get("ceilings", True),
                                                                       compile_cache=msg.get("compile_cache"))})
            except Exception as e:
                conn.send({"ok": False, "error": f"{type(e).__name__}: {e}"})
            continue
        job_type = jobs.TYPES.get(op)
        if job_type is not None:
            backend = backends[msg["backend"]]
            cache = caches[op] if op in caches else caches.setdefault(op, job_type.cache())
            res = finish(job_type.work(msg, backend, cache, classifier), backend)
            conn.send(res)
            if res.get("fatal"):
                return  # a broken CUDA context cannot serve another job
