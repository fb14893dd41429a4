"""CUDA-graph samples: capture, the device-side delay ahead of a sample, and replays queued in chunks."""
from __future__ import annotations

import collections
import statistics
import time
from typing import Any, Callable

from .sampling import BATCH_S

DELAY_US = 200.0  # device-side delay queued before a graph sample's start event
_cycles_per_us: dict[str, float] = {}


def device_delay(device: str, us: float = DELAY_US) -> None:
    """Queue a kernel that only spins for `us` microseconds, so that the host has recorded the start
    event, launched the work and recorded the end event before the device reaches them: the events
    then bracket device time only, not the host's launch latency (or its jitter)."""
    import torch

    if device not in _cycles_per_us:  # calibrate once per process: spin cycles per microsecond
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1000)
        rates = []
        for _ in range(3):
            a.record()
            torch.cuda._sleep(1_000_000)
            b.record()
            b.synchronize()
            rates.append(1_000_000 / (a.elapsed_time(b) * 1e3))
        _cycles_per_us[device] = statistics.median(rates)
    torch.cuda._sleep(max(1, int(us * _cycles_per_us[device])))


MAX_CHUNK = 1024  # graph samples queued behind one lead delay, at most
# a chunk lasts at most this long on the device (or one sample, where that is longer): a batch under a
# floor (about BATCH_S) fits in one, and a slow sample is queued alone as before chunks
CHUNK_S = 2 * BATCH_S
MAX_LEAD_US = 10_000.0  # the lead delay doubles after a late sample, up to this


class GraphSampler:
    """Graph samples queued in chunks: one device-side delay (the lead), then for each sample the
    start event, the replay and the end event, back to back, and one sync for the chunk. _collect's
    plan(n) sizes the next chunk to the samples its batch asks for, and no longer than CHUNK_S of
    samples (their length from the last chunk, or `sample_s` before the first): a chunk the rule's
    time cap will not read is not queued. With cold L2 (flush) a chunk is one sample, its flush
    before the lead: on the H200, decode samples right behind a flush read 2-10% longer than samples
    200 µs after it (lab/graph_chunks.py --l2 cold), so cold samples stay as they were measured
    before chunks.

    A sample is kept only if the device had not reached its start event when the host had queued its
    end event (start.query() is still False then): the events then bracket the replay's device time
    and none of the host's. A sample the host was late for is dropped and counted (`late`), and the
    lead doubles for the next chunk (up to MAX_LEAD_US): a host slower than the device's samples
    still gets the first samples of every chunk in. A chunk at that lead that keeps no sample raises
    GraphTimingError (the attempt is UNSUPPORTED): the host takes longer to queue one replay than any
    lead covers, so no sample is device time. Samples left when the caller stops are dropped; the
    chunk's sync has already run them."""

    def __init__(self, replay: Callable[[], Any], k: int, device: str, flush: Callable[[], None] | None = None,
                 most: int = MAX_CHUNK, sample_s: float | None = None, between: Callable[[], None] | None = None):
        """most: the longest chunk (1: one sample a lead and a sync, how graph samples were taken
        before chunks, kept for comparisons); sample_s: the device seconds of one sample (a replay
        of k calls), if known before the first chunk; between: queued before every sample's start
        event (new input values written into the captured buffers, measure/inputs.py Refresher), so
        its work is outside every sample; with cold L2 it comes before the flush."""
        self.replay, self.k, self.device, self.flush, self.most = replay, k, device, flush, most
        self.between = between
        self.sample_s = sample_s
        self.lead, self.late, self.want = DELAY_US, 0, 1
        self.ready: collections.deque[float] = collections.deque()
        self.pairs: list = []

    def plan(self, n: int) -> None:
        self.want = max(1, n)
        self.ready.clear()  # a new batch starts from fresh samples

    def __call__(self) -> float:
        while not self.ready:
            n = 1 if self.flush else min(self.want, self.most)  # cold L2: one sample a chunk
            if self.sample_s:
                n = min(n, max(1, int(CHUNK_S / self.sample_s)))
            self._chunk(n)
        self.want = max(1, self.want - 1)
        return self.ready.popleft()

    def _chunk(self, n: int) -> None:
        import torch

        while len(self.pairs) < n:
            self.pairs.append((torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)))
        pairs, late = self.pairs[:n], []
        between = self.between
        if self.flush:  # before the lead, as before chunks existed (a chunk of one sample: its refill first)
            if between:
                between()
                between = None
            self.flush()
        device_delay(self.device, self.lead)
        for start, end in pairs:
            if between:
                between()
            start.record()
            self.replay()
            end.record()
            late.append(start.query())
        pairs[-1][1].synchronize()
        kept = [start.elapsed_time(end) * 1e3 for (start, end), was_late in zip(pairs, late) if not was_late]
        if kept:
            self.sample_s = max(kept) / 1e6
        elif self.lead >= MAX_LEAD_US:
            raise GraphTimingError(f"graph samples cannot be timed as device time: the host took longer than "
                                   f"{MAX_LEAD_US / 1e3:.0f} ms to queue one replay of {self.k} call(s)")
        self.ready.extend(us / self.k for us in kept)
        if any(late):
            self.late += sum(late)
            self.lead = min(2 * self.lead, MAX_LEAD_US)


class GraphCaptureError(RuntimeError):
    pass


class GraphTimingError(GraphCaptureError):
    """The captured graph cannot be timed as device time (an UNSUPPORTED attempt, as a failed capture)."""


def capture_graph(step: Callable[[], Any], k: int, device: str):
    """Capture k calls in one CUDA graph after a side-stream warm-up (what capture requires)."""
    import torch

    side = torch.cuda.Stream(device=device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(2):
            step()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            for _ in range(k):
                out = step()
    except Exception as e:
        raise GraphCaptureError(f"graph capture failed: {type(e).__name__}: {str(e).splitlines()[0]}") from None
    graph.last_output = out  # the captured buffers a replay writes: what the post-timing check reads
    return graph


def event_overhead_us(device: str, n: int = 200, ahead: bool = False) -> float:
    """Median time between two back-to-back events: the floor under an eager sample; with
    ahead=True (a device_delay first), the floor under a graph sample."""
    if not device.startswith("cuda"):
        t = []
        for _ in range(n):
            t0 = time.perf_counter_ns()
            t.append((time.perf_counter_ns() - t0) / 1e3)
        return statistics.median(t)
    import torch

    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(n):
        if ahead:
            device_delay(device, 50.0)
        a.record()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) * 1e3)
    return statistics.median(out)
