"""One model step in a worker: the values of its model_rows row (columns of origin "step", record/).

Per row, in order: the cold first step (compilation and autotuning: cold_start_us), the float64
probe (model/check.py), one profiled step (kernel families, attention share), peak memory, then
timing by measure/timing.py. Per step spec, once (SpecCache, kept by the worker across that spec's
backends): the decoder, the no-op step (attention's share by difference) and the float64 yardstick.
The capability gate is the planner's (runner/jobs_model.py); every failure becomes a status, and a
broken CUDA context ends the worker ("fatal"), as an attempt's does."""
from __future__ import annotations

import gc
import logging
import statistics

from ..backends.base import Backend, Rejected
from ..measure import memory, timing
from ..measure.device import bind
from ..status import Status, failure
from .check import check, yardstick
from .configs import ModelConfig
from .share import model_families, profile_share, profiler_share, share_by_difference
from .steps import StepSpec, build

log = logging.getLogger(__name__)


class SpecCache:
    """What the rows of one step spec share in a worker: the decoder, the no-op step, the yardstick.
    A message of another spec (or the worker's release) drops them."""

    def __init__(self):
        self.clear()

    def clear(self) -> None:
        self.key = self.ctx = None
        gc.collect()

    def get(self, msg: dict) -> "_SpecContext":
        k = (repr(sorted(msg["config"].items())), msg["dtype"], repr(sorted(msg["spec"].items())), msg["device"],
             msg["seed"])
        if self.key != k:
            self.clear()
            self.ctx, self.key = _SpecContext(msg), k
        return self.ctx


def run(msg: dict, backend: Backend, cache: SpecCache, classifier=None) -> dict:
    """The measured values of one (spec, backend) row, plus "fatal" when the CUDA context broke."""
    device = msg["device"]
    res: dict = {"status": Status.ERROR.value}
    try:
        bind(device)
        cache.get(msg).measure(backend, res, classifier)
    except (Rejected, timing.GraphCaptureError) as e:
        res.update(status=Status.UNSUPPORTED.value, reason=str(e))
    except Exception as e:
        status, reason = failure(e, device)
        if status is Status.ERROR:
            log.debug("model step failed", exc_info=True)
        res.update(status=status.value, reason=reason, fatal=status is Status.CRASH)
    if cache.ctx is not None:
        cache.ctx.model.attend = None
    if not res.get("fatal"):  # nothing can be given back through a broken context
        _free(device)
    return res


class _SpecContext:
    def __init__(self, msg: dict):
        from ..measure.inputs import torch_dtype
        from .decoder import Decoder

        self.cfg = ModelConfig(**msg["config"])
        self.spec = StepSpec(**msg["spec"])
        self.dtype, self.device, self.seed, self.tol = msg["dtype"], msg["device"], msg["seed"], msg.get("tol")
        self.timing = timing.TimingConfig(**msg["timing"])
        log.info("building %s × %d layers (%s, random weights)", self.cfg.name, self.cfg.layers, self.dtype)
        self.model = Decoder(self.cfg, torch_dtype(self.dtype), self.device, self.seed)
        self._noop = self._ys = None

    def noop(self, classifier) -> dict:
        """The no-op step's median and the families it runs (measured once per spec)."""
        from .decoder import noop_attend

        if self._noop is None:
            self.model.init_weights(self.seed)
            self.model.attend = noop_attend
            st = build(self.model, self.spec, self.seed)
            try:
                own = model_families(st.call, self.device, classifier)
                t = timing.measure(st.call, self.device, self.timing, self.spec.launch, "warm")
                self._noop = {"us": statistics.median(t.samples_us), "families": own}
            except Exception as e:  # without it, only the profiler's share remains
                log.warning("no-op step failed: %s", e)
                self._noop = {"us": None, "families": set(), "error": f"{type(e).__name__}: {e}"}
            finally:
                del st
                _free(self.device)
        return self._noop

    def yardstick(self):
        import torch

        from ..backends.reference import Reference
        from .decoder import twin

        if self._ys is None:
            ref = Reference(name="reference", family="reference")
            self.model.init_weights(self.seed)
            m64, mlo = twin(self.model, torch.float64, ref.attend), twin(self.model, self.model.dtype, ref.attend)
            self._ys = yardstick(self.model, m64, mlo, self.spec, self.seed)
            del m64, mlo
            _free(self.device)
        return self._ys

    def measure(self, b: Backend, values: dict, classifier) -> None:
        spec, model, device = self.spec, self.model, self.device
        ys = self.yardstick()
        noop = self.noop(classifier)
        with b.attend_session():
            model.init_weights(self.seed)
            model.attend = b.attend
            st = build(model, spec, self.seed)
            out, values["cold_start_us"] = timing.one_call(st.call, device)
            del out
            model.init_weights(self.seed)  # the cold training step moved them; the probe needs the yardstick's
            v = check(model, spec, ys, self.dtype, self.tol)
            values.update(err_ratio=v.err_ratio, max_abs_err=v.max_abs_err, check_detail=v.detail)
            if not v.passed:
                values.update(status=Status.INCORRECT.value, reason=v.reason)
                return
            ps = profile_share(st.call, device, b, classifier, noop["families"])
            values.update(families=ps.families, attn_families=ps.attributed, share_note=ps.note,
                          attn_kernel_us=ps.attn_kernel_us, step_kernel_us=ps.step_kernel_us)
            if ps.mismatch:
                values.update(status=Status.DISPATCH_MISMATCH.value, reason=ps.mismatch)
                return
            values["peak_mem_bytes"] = memory.peak_bytes(st.call, device)
            t = timing.measure(st.call, device, self.timing, spec.launch, "warm")
            med = statistics.median(t.samples_us)
            values.update(samples_us=t.samples_us, calls_per_sample=t.calls_per_sample, timer=t.timer,
                          late_samples=t.late_samples, converged=t.converged, stationary=t.stationary,
                          tokens_per_s=spec.tokens / med * 1e6, share_profiler=profiler_share(ps, med, device),
                          status=Status.OK.value)
            if noop["us"] is not None:
                values.update(noop_us=noop["us"], share_diff=share_by_difference(med, noop["us"]))
            elif noop.get("error"):
                values["share_note"] = "; ".join(filter(None, [ps.note, f"no-op step failed: {noop['error']}"]))
            del st


def _free(device: str) -> None:
    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()
