"""triton-decode's eager host cost (issue 41): after its first call a launch goes past Triton's JIT to the compiled
kernel's launcher with arguments bound once (backends/triton_kernels/launch.py), on the stream current at each
call; the split rule's "under" fill. CPU: Triton's driver replaced by one whose launcher's C call only records its
arguments (the kernel compiled for sm_90 by the JIT itself). GPU (marked gpu): the real launches, eager, on a side
stream and captured in a CUDA graph, against the JIT's own launches."""
from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
import torch

triton = pytest.importorskip("triton", reason="triton is not installed: no kernel to launch")
interp = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") == "1", reason="compiles for sm_90: not under the "
                            "interpreter")


def _fake_driver(calls: list, stream: list):
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.driver import CudaLauncher

    class Recording(CudaLauncher):
        def __init__(self, src, metadata):  # CudaLauncher's attributes, its C launch replaced by a recorder
            self.num_ctas = 1
            self.launch = lambda *args: calls.append(args)
            self.global_scratch_size = metadata.global_scratch_size
            self.global_scratch_align = metadata.global_scratch_align
            self.profile_scratch_size = metadata.profile_scratch_size
            self.profile_scratch_align = metadata.profile_scratch_align
            self.launch_cooperative_grid = metadata.launch_cooperative_grid
            self.launch_pdl = metadata.launch_pdl

    return SimpleNamespace(
        utils=SimpleNamespace(load_binary=lambda name, kernel, shared, device: (1, 2, 32, 0, 1024),
                              get_device_properties=lambda device: {"max_shared_mem": 232448}),
        launcher_cls=Recording, get_current_device=lambda: 0, get_current_stream=lambda index: stream[0],
        get_current_target=lambda: GPUTarget("cuda", 90, 32), get_active_torch_device=lambda: torch.device("cpu"))


def _addresses(args):
    return [a.data_ptr() if hasattr(a, "data_ptr") else a for a in args]


@interp
def test_after_its_first_call_a_launch_skips_the_jit_and_hands_the_launcher_the_same_arguments(monkeypatch):
    from triton import knobs
    from triton.runtime import driver

    from attnbench.backends.triton_kernels import decode
    from attnbench.backends.triton_kernels.launch import Launch

    calls, stream = [], [7]
    monkeypatch.setattr(driver, "_active", _fake_driver(calls, stream))
    fn = triton.jit(decode.tri_dec_reduce.fn)  # a JIT of its own: no fake kernel left in the real one's cache
    part_o, part_l = torch.zeros(4 * 3, 16), torch.zeros(4 * 3)
    o = torch.zeros(2, 2, 1, 16, dtype=torch.bfloat16)
    launch = Launch(fn, (4,), (part_o, part_l, o, *(o.stride(i) for i in (0, 1, 3)), 2, 3),
                    dict(BLOCK_S=4, HEAD_DV=16, num_warps=4), fast=True)
    launch()  # through the JIT: it compiles for sm_90, specialises, launches
    assert launch.direct and len(calls) == 1
    monkeypatch.setattr(fn, "run", lambda *a, **k: pytest.fail("the JIT ran again"))
    stream[0] = 9  # a capture or a timing on another stream: read at each call
    launch()
    jit, direct = calls
    assert direct[:3] == jit[:3] == (4, 1, 1) and direct[3] == 9 and jit[3] == 7
    assert direct[4:7] == jit[4:7] and direct[9] == jit[9]  # function, cooperative, pdl; the kernel's metadata
    assert direct[13:] == tuple(_addresses(jit[13:]))  # every kernel argument, tensors as the launcher reads them
    assert direct[10:13] == (None, None, None)  # no launch metadata or hooks when none is set
    hook = lambda metadata: None  # noqa: E731  (a profiler's enter hook: honoured as the JIT honours it)
    knobs.runtime.launch_enter_hook.add(hook)
    try:
        launch()
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)
    assert calls[-1][11] is knobs.runtime.launch_enter_hook and calls[-1][10] is not None


@interp
def test_a_direct_launch_the_launcher_refuses_falls_back_to_the_jit_for_good(monkeypatch):
    from triton.runtime import driver

    from attnbench.backends.triton_kernels import decode
    from attnbench.backends.triton_kernels.launch import Launch

    calls, stream, refuse = [], [7], [False]
    fake = _fake_driver(calls, stream)

    class Refusing(fake.launcher_cls):
        def __init__(self, src, metadata):
            super().__init__(src, metadata)
            record = self.launch

            def launch(*args):
                if refuse[0]:
                    refuse[0] = False
                    raise TypeError("this launcher takes other arguments")
                record(*args)
            self.launch = launch

    fake.launcher_cls = Refusing
    monkeypatch.setattr(driver, "_active", fake)
    fn = triton.jit(decode.tri_dec_reduce.fn)
    part_o, part_l, o = torch.zeros(4 * 3, 16), torch.zeros(4 * 3), torch.zeros(2, 2, 1, 16, dtype=torch.bfloat16)
    launch = Launch(fn, (4,), (part_o, part_l, o, *(o.stride(i) for i in (0, 1, 3)), 2, 3),
                    dict(BLOCK_S=4, HEAD_DV=16, num_warps=4), fast=True)
    launch()
    refuse[0] = True
    launch()  # refused past the JIT: launched by the JIT instead, and by it from now on
    launch()
    assert not launch.direct and len(calls) == 3 and all(c[11] is not None for c in calls[1:])  # the JIT's hooks


def test_without_fast_every_call_goes_through_the_jit():
    from attnbench.backends.triton_kernels.launch import Launch

    seen = []

    class Jit:  # a JIT whose call returns a kernel with a launcher: only `fast` may take it
        def __getitem__(self, grid):
            return lambda *a, **k: seen.append((grid, a, k)) or SimpleNamespace(run=None)

    launch = Launch(Jit(), (2, 3), (1, 2), {"X": 4})
    for _ in range(3):
        launch()
    assert len(seen) == 3 and not launch.direct and seen[0] == ((2, 3, 1), (1, 2), {"X": 4})


def test_the_under_fill_never_puts_more_programs_than_asked_on_an_sm():
    from attnbench.backends.triton_kernels.decode import splits_for

    # B8 Hkv8 on the H200's 132 SMs: v1's rule (over) gave 5 splits, 320 programs, 56 SMs with a third one
    assert splits_for(8, 8, 4096, 64, 132) == 5
    assert splits_for(8, 8, 4096, 64, 132, 2, "under") == 4
    assert splits_for(8, 8, 4096, 64, 132, 3, "under") == 6
    for pairs in (1, 8, 48, 64, 256, 1000):
        for per_sm in (2, 3):
            ns = splits_for(pairs, 1, 1 << 20, 64, 132, per_sm, "under")
            assert ns >= 1 and (ns == 1 or pairs * ns <= per_sm * 132)
    assert splits_for(8, 8, 100, 64, 132, 2, "under") == 2  # never more splits than KV blocks


# ---- GPU -------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@interp
def test_direct_launches_equal_the_jits_eager_on_a_side_stream_and_in_a_graph_with_new_values():
    from attnbench.backends.triton_kernels import decode

    torch.manual_seed(0)
    q = torch.randn(8, 32, 1, 128, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(8, 8, 4096, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    cfg = {"BLOCK_N": 64, "num_warps": 4, "num_stages": 3}
    ns = decode.splits_for(8, 8, 4096, 64, torch.cuda.get_device_properties(0).multi_processor_count, 2, "under")
    outs = [torch.empty_like(q) for _ in range(2)]
    jit, fast = (decode.plan(q, k, v, o, None, 0, 4096, 128 ** -0.5, ns, decode.buffers(8, 32, ns, 128, "cuda"),
                             cfg, fast=f) for o, f in zip(outs, (False, True)))

    def both():
        for launches in (jit, fast):
            for launch in launches:
                launch()

    both()
    assert all(x.direct for x in fast) and not any(x.direct for x in jit)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        q.normal_()  # new values on the side stream: a launch on the default stream would race them
        both()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    assert torch.equal(outs[0], outs[1])
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float().repeat_interleave(4, 1),
                                                           v.float().repeat_interleave(4, 1))
    assert (outs[1].float() - ref).abs().max().item() < 2e-2
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for launch in fast:
            launch()
    q.normal_()
    graph.replay()
    for launch in jit:
        launch()
    torch.cuda.synchronize()
    assert torch.equal(outs[0], outs[1])  # the replay read the new values


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@interp
@pytest.mark.parametrize("launch", ["eager", "graph"])
def test_the_step_launches_past_the_jit_and_passes_every_gate(launch):
    from attnbench.backends import registry
    from attnbench.runner import attempt
    from attnbench.workloads import Workload

    w = Workload(mode="decode", batch=8, q_len=1, kv_len=4096, q_heads=32, kv_heads=8, head_dim=128,
                 head_dim_v=128, dtype="bf16", causal=False, launch=launch, fresh_inputs=True)
    spec = {"op": "attempt", "workload": w.to_dict(), "device": "cuda", "seed": 0,
            "timing": dict(warmup_s=0.0, warmup_max_s=0.05, min_samples=3, max_samples=4, max_time_s=0.02)}
    r = attempt.run(spec, {b.name: b for b in registry.builtin()}["triton-decode"], attempt.WorkloadCache())
    assert r["status"] == "OK", r["reason"]
    assert r["kernel_config"]["dec"]["launch"] == "direct", r["kernel_config"]
