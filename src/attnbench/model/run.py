"""One model run: every step spec × backend measured in this process, one row each in model_rows.

Per row, in order: the capability gate (the backend's supports() on the attention workload of the
step, and attend() offered), the cold first step (compilation and autotuning: cold_start_us), the
float64 probe (model/check.py), one profiled step (kernel families, attention share), peak memory,
then timing by measure/timing.py. Per step spec, once: the no-op step (attention's share by
difference) and the float64 yardstick. Every failure becomes a status, as in attempts; a step
runs in this process, so TIMEOUT is not produced and a broken CUDA context ends the run."""
from __future__ import annotations

import gc
import hashlib
import json
import logging
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

from ..backends.base import Backend, DeviceInfo, Rejected
from ..measure import memory, timing
from ..status import Status, failure
from ..store import model_rows
from .amdahl import compare, kernel_medians
from .check import check, yardstick
from .configs import ModelConfig
from .share import model_families, profile_share, profiler_share, share_by_difference
from .steps import StepSpec, attention_workload, build, validate

log = logging.getLogger(__name__)


@dataclass
class ModelRequest:
    config: ModelConfig
    specs: list[StepSpec]
    backends: list[Backend]
    baseline: str
    device: str
    dtype: str
    seed: int = 0
    tag: str = "default"
    tol: float | None = None
    timing: timing.TimingConfig = field(default_factory=timing.TimingConfig)
    kernel_frame: object = None  # attempts of a kernel-level store (DataFrame) or None
    argv: str = "attnbench model"
    plugins: tuple = ()


class ContextBroken(RuntimeError):
    """The CUDA context cannot run another step."""


def row_key(req: ModelRequest, device_name: str, spec: StepSpec, backend: str) -> str:
    blob = json.dumps([req.tag, device_name, req.config.name, req.config.layers, req.dtype, spec.to_dict(),
                       backend, req.seed], sort_keys=True)
    return hashlib.sha1(blob.encode()).hexdigest()[:16]


def run_model(req: ModelRequest, store, say: Callable[[str], None] | None = None,
              on_row: Callable[[dict], None] | None = None) -> list[dict]:
    """Measure, store and return the rows of this request (rows already stored are skipped). say(text)
    hears what starts; on_row(row) gets each row as it is written."""
    from ..measure.dispatch import Classifier
    from ..measure.inputs import torch_dtype
    from ..runner.sink import new_run_id, toolkit_columns
    from ..runner.worker import run_provenance
    from .decoder import Decoder

    say = say or (lambda text: log.info(text))
    say(f"reading the device ({req.device})")
    prov = run_provenance(req.device, req.seed, req.plugins, measure_ceilings=False)
    dev = DeviceInfo.from_dict(prov["device"])
    run_id = new_run_id()
    store.start_run(run_id, req.tag, f"model:{req.config.name}", req.argv, dev.name, prov)
    model_rows.ensure(store.con)
    done = model_rows.keys(store.con)
    classifier = Classifier.from_backends(req.backends)
    say(f"building {req.config.name} × {req.config.layers} layers ({req.dtype}, random weights)")
    model = Decoder(req.config, torch_dtype(req.dtype), req.device, req.seed)
    common = {"run_id": run_id, "tag": req.tag, **toolkit_columns(prov), "device_name": dev.name,
              "device_index": prov["device"].get("index"), **_config_columns(req)}
    ordered = sorted(req.backends, key=lambda b: b.name != req.baseline)  # the baseline first
    written = []
    try:
        for spec in req.specs:
            todo = [b for b in ordered if row_key(req, dev.name, spec, b.name) not in done]
            if not todo:
                say(f"{spec.label()}: every backend already stored, skipped")
                continue
            ctx = _SpecContext(req, spec, model, dev, classifier, say)
            ctx.base_row = _stored_ok(store, row_key(req, dev.name, spec, req.baseline))
            for b in todo:
                say(f"{spec.label()}: {b.name}")
                row = ctx.measure(b, {**common, "row_key": row_key(req, dev.name, spec, b.name)})
                row = model_rows.finish(row)
                if model_rows.insert(store.con, row):
                    written.append(row)
                    if on_row:
                        on_row(row)
                if row["status"] == Status.CRASH.value:
                    raise ContextBroken(row["reason"])
            del ctx
            _free(req.device)
    finally:
        store.finish_run(run_id)
    return written


def _stored_ok(store, key: str) -> dict | None:
    """The stored OK row of this key (a baseline measured by an earlier run), or None."""
    found = model_rows.rows(store.con, "WHERE row_key=? AND status='OK'", (key,))
    return found[0] if found else None


def _config_columns(req: ModelRequest) -> dict:
    c = req.config
    return {"config": c.name, "layers": c.layers, "hidden": c.hidden, "q_heads": c.heads, "kv_heads": c.kv_heads,
            "head_dim": c.head_dim, "intermediate": c.intermediate, "sliding_window": c.sliding_window,
            "dtype": req.dtype, "attention_calls": c.layers}


class _SpecContext:
    """What the rows of one step spec share: the no-op step, the float64 yardstick, the baseline's row."""

    def __init__(self, req, spec, model, dev, classifier, say):
        self.req, self.spec, self.model, self.dev, self.classifier, self.say = req, spec, model, dev, classifier, say
        self.w = attention_workload(req.config, spec, req.dtype)
        self.kernels = kernel_medians(req.kernel_frame, self.w, dev.name)
        self._noop = self._ys = None
        self.base_row = None

    def noop(self) -> dict:
        """The no-op step's median and the families it runs (measured once per spec)."""
        from .decoder import noop_attend

        if self._noop is None:
            self.say(f"{self.spec.label()}: no-op attention (share by difference)")
            self.model.init_weights(self.req.seed)
            self.model.attend = noop_attend
            st = build(self.model, self.spec, self.req.seed)
            try:
                own = model_families(st.call, self.req.device, self.classifier)
                t = timing.measure(st.call, self.req.device, self.req.timing, self.spec.launch, "warm")
                self._noop = {"us": statistics.median(t.samples_us), "families": own}
            except Exception as e:  # without it, only the profiler's share remains
                log.warning("no-op step failed: %s", e)
                self._noop = {"us": None, "families": set(), "error": f"{type(e).__name__}: {e}"}
            finally:
                del st
                _free(self.req.device)
        return self._noop

    def yardstick(self):
        import torch

        from ..backends.reference import Reference
        from .decoder import twin

        if self._ys is None:
            ref = Reference(name="reference", family="reference")
            self.model.init_weights(self.req.seed)
            m64, mlo = twin(self.model, torch.float64, ref.attend), twin(self.model, self.model.dtype, ref.attend)
            self._ys = yardstick(self.model, m64, mlo, self.spec, self.req.seed)
            del m64, mlo
            _free(self.req.device)
        return self._ys

    def measure(self, b: Backend, values: dict) -> dict:
        t0 = time.perf_counter()
        spec = self.spec
        values.update(backend=b.name, family=b.family, role=b.role, **spec.to_dict(), tokens=spec.tokens,
                      workload_key=self.w.key(), status=Status.ERROR.value)
        why = validate(spec) or (b.availability()) or b.supports(self.w, self.dev) or \
            (None if b.offers_attend() else f"{b.name} does not offer attend(): it runs only on prepared inputs")
        if why:
            return {**values, "status": Status.UNSUPPORTED.value, "reason": why, "wall_s": _since(t0),
                    "created_at": _now()}
        try:
            self._measure(b, values)
        except (Rejected, timing.GraphCaptureError) as e:
            values.update(status=Status.UNSUPPORTED.value, reason=str(e))
        except Exception as e:
            status, reason = failure(e, self.req.device)
            if status is Status.ERROR:
                log.debug("model step failed", exc_info=True)
            values.update(status=status.value, reason=reason)
        finally:
            self.model.attend = None
            _free(self.req.device)
        values.update(wall_s=_since(t0), created_at=_now())
        if values["status"] == Status.OK.value:
            self._compare(values)
        return values

    def _measure(self, b: Backend, values: dict) -> None:
        req, spec, model, device = self.req, self.spec, self.model, self.req.device
        ys = self.yardstick()
        noop = self.noop()
        with b.attend_session():
            model.init_weights(req.seed)
            model.attend = b.attend
            st = build(model, spec, req.seed)
            out, values["cold_start_us"] = timing.one_call(st.call, device)
            del out
            model.init_weights(req.seed)  # the cold training step moved them; the probe needs the yardstick's
            v = check(model, spec, ys, req.dtype, req.tol)
            values.update(err_ratio=v.err_ratio, max_abs_err=v.max_abs_err, check_detail=v.detail)
            if not v.passed:
                values.update(status=Status.INCORRECT.value, reason=v.reason)
                return
            ps = profile_share(st.call, device, b, self.classifier, noop["families"])
            values.update(families=ps.families, attn_families=ps.attributed, share_note=ps.note,
                          attn_kernel_us=ps.attn_kernel_us, step_kernel_us=ps.step_kernel_us)
            if ps.mismatch:
                values.update(status=Status.DISPATCH_MISMATCH.value, reason=ps.mismatch)
                return
            values["peak_mem_bytes"] = memory.peak_bytes(st.call, device)
            t = timing.measure(st.call, device, req.timing, spec.launch, "warm")
            med = statistics.median(t.samples_us)
            values.update(samples_us=t.samples_us, calls_per_sample=t.calls_per_sample, timer=t.timer,
                          late_samples=t.late_samples, converged=t.converged, stationary=t.stationary, tokens_per_s=spec.tokens / med * 1e6,
                          share_profiler=profiler_share(ps, med, device), median_us=med, status=Status.OK.value)
            if noop["us"] is not None:
                values.update(noop_us=noop["us"], share_diff=share_by_difference(med, noop["us"]))
            elif noop.get("error"):
                values["share_note"] = "; ".join(filter(None, [ps.note, f"no-op step failed: {noop['error']}"]))
            del st

    def _compare(self, values: dict) -> None:
        if values["backend"] == self.req.baseline:
            self.base_row = dict(values)
        if self.base_row is None:
            return
        values.update(compare(values, self.base_row, self.kernels, self.req.config.layers))


def _free(device: str) -> None:
    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


def _since(t0: float) -> float:
    return round(time.perf_counter() - t0, 3)


def _now() -> str:
    from ..store.db import utcnow

    return utcnow()

