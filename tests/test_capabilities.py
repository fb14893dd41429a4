"""Backend capabilities per workload axis (backends/capabilities.py): one declaration per axis, the
default always accepted, refusals in the words rows store, the old keywords still understood."""
from __future__ import annotations

import pytest

from attnbench.backends import capabilities, registry
from attnbench.backends.base import ANY, Backend, DeviceInfo
from attnbench.backends.capabilities import AXIS_RULES, OTHER_AXES, RULES
from attnbench.workloads import Workload
from attnbench.workloads.axes import NAMES

CPU, H200 = DeviceInfo("cpu"), DeviceInfo("cuda", "H200", (9, 0))


def _w(**kw) -> Workload:
    base = dict(mode="prefill", batch=1, q_len=64, kv_len=64, q_heads=4, kv_heads=4, head_dim=64, head_dim_v=64)
    if kw.get("mode") == "decode":
        base["q_len"] = 1
    return Workload(**{**base, **kw})


def test_every_workload_axis_is_declared_exactly_once():
    ruled = [r.axis for r in AXIS_RULES]
    assert len(ruled) == len(set(ruled))
    assert not set(ruled) & set(OTHER_AXES)
    assert sorted(ruled + list(OTHER_AXES)) == sorted(NAMES)


def test_an_axis_at_its_default_is_accepted_by_a_backend_that_declares_nothing():
    b = Backend(name="plain", family="plugin")
    for w in (_w(), _w(mode="decode"), _w(mode="decode", decode_append="excluded")):
        assert b.supports(w, CPU) is None


@pytest.mark.parametrize("kw, reason", [
    (dict(dropout=0.1), "dropout > 0: output cannot be validated against a deterministic float64 reference"),
    (dict(lengths="uniform"), "lengths uniform (a packed variable-length batch): plain has no packed-batch kernel"),
    (dict(mode="decode", page_size=16), "page_size 16: no paged KV cache path"),
    (dict(mode="decode", decode_append="included"),
     "decode_append included: no path that appends K/V to the cache in the step"),
])
def test_a_non_default_value_is_refused_unless_listed(kw, reason):
    w = _w(**kw)
    assert Backend(name="plain", family="plugin").supports(w, CPU) == reason
    name = next(n for n in kw if n in RULES)
    assert Backend(name="lists-it", family="plugin", accepts={name: ANY}).supports(w, CPU) is None


def test_a_listed_value_is_accepted_and_another_refused():
    b = Backend(name="some", family="plugin", accepts={"lengths": ("uniform",)})
    assert b.supports(_w(lengths="uniform"), CPU) is None
    assert b.supports(_w(lengths="longtail"), CPU).startswith("lengths longtail (a packed variable-length batch)")


def test_graph_and_cold_l2_need_cuda_before_the_backend_is_asked():
    graph, cold = _w(launch="graph"), _w(l2="cold")
    assert Backend(name="g", family="plugin").supports(graph, CPU) == "CUDA-graph launch needs a CUDA device"
    assert Backend(name="g", family="plugin").supports(graph, H200) is None  # accepted by default
    assert Backend(name="g", family="plugin", accepts={"launch": ()}).supports(graph, H200) == "not graph-capturable"
    assert Backend(name="g", family="plugin").supports(cold, CPU) == "l2=cold is defined for CUDA devices only"
    assert Backend(name="g", family="plugin").supports(cold, H200) is None


def test_own_words_replace_the_default_why():
    b = Backend(name="own", family="plugin", refusals={"decode_append": "its append is a kernel of its own"})
    assert b.supports(_w(mode="decode", decode_append="included"), CPU) == \
        "decode_append included: its append is a kernel of its own"


def test_the_old_keywords_declare_the_same():
    old = Backend(name="old", family="plugin", supports_varlen=True, supports_paged=True, supports_append=False,
                  supports_graph=False, append_refusal="not mapped")
    assert old.accepts == {"lengths": ANY, "page_size": ANY, "decode_append": (), "launch": ()}
    assert old.supports(_w(lengths="longtail"), CPU) is None
    assert old.supports(_w(launch="graph"), H200) == "not graph-capturable"
    assert old.supports(_w(mode="decode", decode_append="included"), CPU) == "decode_append included: not mapped"


def test_the_registry_refuses_an_unknown_axis_and_a_bare_value():
    with pytest.raises(registry.BackendError, match="accepts names 'lenghts'"):
        registry._check(Backend(name="typo", family="plugin", accepts={"lenghts": ANY}), "test")
    with pytest.raises(registry.BackendError, match="use a tuple of values or ANY"):
        registry._check(Backend(name="bare", family="plugin", accepts={"lengths": "uniform"}), "test")


def test_describe_lists_every_opt_in_axis():
    fa2 = next(b for b in registry.builtin() if b.name == "fa2")
    jax = next(b for b in registry.builtin() if b.name == "jax-xla")
    assert capabilities.describe(fa2) == {"dropout": [], "lengths": ANY, "page_size": ANY, "decode_append": ANY,
                                          "launch": ANY, "l2": ANY}
    assert fa2.describe()["accepts"] == capabilities.describe(fa2)
    assert jax.describe()["accepts"]["launch"] == []
