"""A fake backend that kills the process holding its worker (a Ray actor) once: its first call
after the file named by ATTNBENCH_FAKE_KILL_HOST appears removes the file and SIGKILLs its parent.
Without the file it is correct (unfused GEMMs), like fake-good."""
from __future__ import annotations

import os
import signal
import time

from attnbench.backends.layout import from_bhnd, to_bhnd
from attnbench.backends.reference import attention_math
from attnbench.backends.base import Backend


class KillsHost(Backend):
    def prepare(self, w, inputs):
        def fn():
            flag = os.environ.get("ATTNBENCH_FAKE_KILL_HOST")
            if flag:
                try:
                    os.remove(flag)  # one process wins, once
                except FileNotFoundError:
                    pass
                else:
                    os.kill(os.getppid(), signal.SIGKILL)
                    time.sleep(60)  # the worker follows its parent (runner/worker.py watches it)
            q, k, v = (to_bhnd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))
            return from_bhnd(attention_math(q, k, v, w.causal, w.causal_align, inputs.scale), w.layout)

        return fn


BACKENDS = [KillsHost(name="fake-kills-host", family="plugin",
                      kernel_families={"cpu": frozenset({"unfused-gemm"}), "cuda": frozenset({"unfused-gemm"})},
                      devices=("cpu", "cuda"))]
