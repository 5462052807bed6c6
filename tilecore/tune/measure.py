"""How long a GPU call takes, measured as the best tuners measure it (NVBench,
Helion, cuTile's tuner), for the tuner, the user autotuning API and the
benchmark scripts alike.

`measure(calls)`:

1. Warm-up: every call once (compilation, first touch of its buffers).
2. Calibration: one discarded sample of `len(calls)` calls (at most
   MAX_CALLS_PER_SAMPLE), whose per-call time
   sets `calls_per_sample` so that a sample lasts at least MIN_SAMPLE_MS (at
   most MAX_CALLS_PER_SAMPLE calls, the depth a stream's launch queue takes).
3. Samples: `calls_per_sample` back-to-back calls between two CUDA events on
   the stream. The calls rotate over the caller's buffer sets (together larger
   than L2, so no call finds its inputs left in L2 by the one before), and the
   rotation carries on from sample to sample. On the GPU each sample is queued
   behind a short spinning kernel that outlasts the host's queueing, so the
   host's launch time never starves the GPU (see GpuTimer).
4. A sample taken while the SM clock was throttled (NVML's clock-event reasons,
   see nvml.py) is discarded and counted.
5. Sampling stops when the relative noise is at most `rel_noise` (after at
   least `min_samples`), at `max_samples`, or, when racing, as soon as the
   candidate is surely slower than the time it must beat.

The statistic: `ms` is the median of the accepted samples' per-call times; its
95% confidence interval is distribution-free, from order statistics: the
interval [x_(k+1), x_(n-k)] of the sorted samples covers the median with
probability 1 - 2 P(B <= k), B ~ Binomial(n, 1/2), and k is the largest with a
coverage of at least 95% (below 6 samples no k reaches 95%: the interval is
then the samples' range, of coverage 1 - 2^(1-n)). `rel_noise` is the
interval's half-width over the median. Medians and order statistics ignore the
rare slow outlier (a context switch, an interrupt) that would widen a
t-interval of the mean, and need no random resampling (bootstrap), so the
result is a deterministic function of the samples.

Racing (`give_up_if_faster_than_ms`): from RACE_AFTER samples on, once the
interval's low end is slower than the time the candidate must beat, stop
(`stopped_early`). `interleaved()` re-measures finalists round-robin with the
current policy, each round in a rotated order, so slow drift (clocks,
temperature) falls on all of them alike; `speedup(..., paired=True)` then
compares them round by round.

Timers: `GpuTimer` (CUDA events on a stream, through CuPy) and `HostTimer`
(time.perf_counter: the interpreter, and tests with an injected clock).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Optional, Protocol, Sequence

__all__ = ["Measurement", "Timer", "HostTimer", "GpuTimer", "ThrottledError", "measure",
           "interleaved", "median_ci", "speedup", "next_spin_ms", "MIN_SAMPLE_MS",
           "MAX_CALLS_PER_SAMPLE", "RACE_AFTER"]

MIN_SAMPLE_MS = 1.0          # a sample lasts at least this long (when calls allow)
# ... but queues no more calls than a stream holds: CUDA's launch queue holds about
# 1024 launches, and a call may be several (a scan: up to 3); once it is full the host
# blocks until the GPU drains it, behind GpuTimer's spin, and the sample is void
MAX_CALLS_PER_SAMPLE = 128
RACE_AFTER = 3               # samples before a racing decision
CONFIDENCE = 0.95

Call = Callable[[], object]


@dataclass(frozen=True)
class Measurement:
    """The time of one call. `ms`: median per-call time of the accepted
    samples; `ci_low`/`ci_high`: its 95% order-statistics confidence interval;
    `rel_noise`: (ci_high - ci_low) / 2 / ms; `samples`: accepted samples;
    `discarded_throttled`: samples dropped because the SM clock was throttled;
    `stopped_early`: racing stopped the measurement; `calls_per_sample`: calls
    between the two events of a sample; `values`: the accepted per-call times
    in the order taken (for interleaved(), one per round)."""

    ms: float
    ci_low: float
    ci_high: float
    rel_noise: float
    samples: int
    discarded_throttled: int
    stopped_early: bool
    calls_per_sample: int = 1
    values: tuple[float, ...] = ()


class Timer(Protocol):
    """Times one sample. `sample_ms` runs `count` calls, `calls[(first + i) %
    len(calls)]` for i in range(count), back to back, and returns the elapsed
    milliseconds; `throttled` says why the clock was throttled during the last
    sample ("" when it was not)."""

    def sample_ms(self, calls: Sequence[Call], first: int, count: int) -> float: ...

    def throttled(self) -> str: ...


class ThrottledError(RuntimeError):
    """Every sample of a measurement ran with a throttled SM clock."""


def _run(calls: Sequence[Call], first: int, count: int) -> None:
    n = len(calls)
    for i in range(count):
        calls[(first + i) % n]()


class HostTimer:
    """Wall-clock timer: `clock` in seconds (time.perf_counter; tests inject a
    fake one), for calls that finish before they return (the interpreter).
    `throttled` is a callable answering Timer.throttled (default: never)."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter,
                 throttled: Optional[Callable[[], str]] = None):
        self._clock = clock
        self._throttled = throttled

    def sample_ms(self, calls: Sequence[Call], first: int, count: int) -> float:
        t0 = self._clock()
        _run(calls, first, count)
        return (self._clock() - t0) * 1e3

    def throttled(self) -> str:
        return self._throttled() if self._throttled is not None else ""


_SPIN_SOURCE = r"""
extern "C" __global__ void tilecore_tune_spin(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}
"""
_SPIN_KERNELS: dict[int, object] = {}   # CUDA device ordinal -> cupy.RawKernel
_THROTTLE_RECOVERY_S = 0.05             # NVBench's default throttle recovery delay
_MAX_SPIN_MS = 10_000.0
_MIN_SPIN_MS = 0.2


def next_spin_ms(spin_ms: float, host_ms: float) -> tuple[bool, float]:
    """(covered, next spin): whether a spin of `spin_ms` covered the host's
    `host_ms` of queueing (with a 20% margin), and the spin for the next
    sample. Uncovered, the spin at least doubles and the sample is taken
    again; covered, it shrinks to twice the host's time (at least
    _MIN_SPIN_MS), so one slow moment of the host (a compile worker, the
    garbage collector) does not leave every later sample idling behind a long
    spin."""
    if host_ms > 0.8 * spin_ms:
        return False, max(2 * spin_ms, 1.5 * host_ms)
    return True, max(_MIN_SPIN_MS, min(spin_ms, 2 * host_ms))


class GpuTimer:
    """CUDA events around the calls on `stream` (None, a raw handle, or any
    stream object tilecore.launch accepts), through CuPy.

    `cover_launch` (default): each sample is queued behind a one-thread kernel
    that spins on the GPU's global timer for longer than the host takes to
    queue the sample, so the events time the GPU's work alone. When the host
    took more than 80% of the spin, the sample is taken again with a spin twice
    as long; the spin shrinks back once the host is quick again
    (next_spin_ms). Calls that wait for the GPU themselves cannot be queued ahead:
    time those with `cover_launch=False` (the device is synchronized before
    each sample and the host's time counts, as users see it).

    `check_throttle`: read NVML's clock-event reasons before and after each
    sample (device `device`, default CUDA's current device); a throttled sample
    is reported by `throttled()` and followed by NVBench's 50 ms recovery
    pause. Without NVML nothing is ever reported throttled."""

    def __init__(self, stream=None, *, device: Optional[int] = None, cover_launch: bool = True,
                 check_throttle: bool = True):
        import cupy
        from ..runtime.streams import stream_handle
        from . import nvml
        self._cp = cupy
        handle = stream_handle(stream)
        self._device = cupy.cuda.Device(device) if device is not None else cupy.cuda.Device()
        with self._device:
            self._stream = cupy.cuda.Stream.null if handle == 0 else \
                cupy.cuda.ExternalStream(handle, self._device.id)
            self._start, self._end = cupy.cuda.Event(), cupy.cuda.Event()
        self._cover = cover_launch
        self._spin_ms = 0.5
        self._nvml = None
        if check_throttle:
            bus_id = cupy.cuda.runtime.deviceGetPCIBusId(self._device.id)
            self._nvml = nvml.device(self._device.id, pci_bus_id=bus_id)
        self._last_throttled = ""
        self.throttled_samples = 0    # samples taken while throttled (then discarded)
        self.recovery_s = 0.0         # time slept after them

    def _spin(self, ms: float) -> None:
        kernel = _SPIN_KERNELS.get(self._device.id)
        if kernel is None:
            kernel = _SPIN_KERNELS[self._device.id] = self._cp.RawKernel(
                _SPIN_SOURCE, "tilecore_tune_spin")
        kernel((1,), (1,), (self._cp.uint64(int(ms * 1e6)),), stream=self._stream)

    def _throttling(self) -> str:
        return self._nvml.throttling() if self._nvml is not None else ""

    def sample_ms(self, calls: Sequence[Call], first: int, count: int) -> float:
        with self._device:
            while True:
                if self._cover:
                    self._spin(self._spin_ms)
                else:
                    self._device.synchronize()
                before = self._throttling()
                self._start.record(self._stream)
                t0 = time.perf_counter()
                _run(calls, first, count)
                host_ms = (time.perf_counter() - t0) * 1e3
                self._end.record(self._stream)
                self._end.synchronize()
                if self._cover:
                    covered, self._spin_ms = next_spin_ms(self._spin_ms, host_ms)
                    if not covered:      # the GPU may have waited for the host: again
                        if self._spin_ms > _MAX_SPIN_MS:
                            raise RuntimeError(
                                "GpuTimer: the host cannot queue one sample within "
                                f"{_MAX_SPIN_MS / 1e3:.0f} s; calls that wait for the GPU "
                                "need GpuTimer(cover_launch=False)")
                        continue
                self._last_throttled = before or self._throttling()
                if self._last_throttled:
                    self.throttled_samples += 1
                    self.recovery_s += _THROTTLE_RECOVERY_S
                    time.sleep(_THROTTLE_RECOVERY_S)
                return float(self._cp.cuda.get_elapsed_time(self._start, self._end))

    def throttled(self) -> str:
        return self._last_throttled


def median_ci(values: Sequence[float], confidence: float = CONFIDENCE
              ) -> tuple[float, float, float]:
    """(median, low, high): the median of `values` and its distribution-free
    confidence interval from order statistics (see the module docstring)."""
    if not values:
        raise ValueError("median_ci(): expected at least one value, got none")
    xs = sorted(values)
    n = len(xs)
    mid = n // 2
    median = xs[mid] if n % 2 else (xs[mid - 1] + xs[mid]) / 2
    # k = 0 (the range) covers with 1 - 2 P(B <= 0); step to k + 1 while the
    # interval [x_(k+2), x_(n-k-1)] still covers with 1 - 2 P(B <= k + 1) >= confidence
    total = 2 ** n                       # exact integers: no overflow for large n
    k, below = 0, 1                      # below = 2^n P(B <= k)
    while k + 1 <= (n - 1) // 2:
        below_next = below + math.comb(n, k + 1)
        if 1 - 2 * below_next / total < confidence:
            break
        k, below = k + 1, below_next
    return median, xs[k], xs[n - 1 - k]


def _summary(values: list[float], discarded: int, stopped: bool, cps: int) -> Measurement:
    ms, lo, hi = median_ci(values)
    return Measurement(ms=ms, ci_low=lo, ci_high=hi,
                       rel_noise=(hi - lo) / 2 / ms if ms > 0 else 0.0,
                       samples=len(values), discarded_throttled=discarded,
                       stopped_early=stopped, calls_per_sample=cps, values=tuple(values))


def _check_calls(where: str, calls: Sequence[Call]) -> None:
    if not calls or not all(callable(c) for c in calls):
        raise ValueError(f'Invalid argument "calls" of {where}: expected a non-empty sequence '
                         f"of callables, got {calls!r}")


def _prepare(calls: Sequence[Call], timer: Timer, calls_per_sample: Optional[int]) -> int:
    """Warm-up and calibration; the calls per sample."""
    for c in calls:
        c()
    probe = calls_per_sample or min(len(calls), MAX_CALLS_PER_SAMPLE)
    per_call = timer.sample_ms(calls, 0, probe) / probe
    if calls_per_sample:
        return calls_per_sample
    if per_call <= 0:
        return MAX_CALLS_PER_SAMPLE
    return max(1, min(MAX_CALLS_PER_SAMPLE, math.ceil(MIN_SAMPLE_MS / per_call)))


def measure(calls: Sequence[Call], *, stream=None, rel_noise: float = 0.01,
            min_samples: int = 5, max_samples: int = 50,
            calls_per_sample: Optional[int] = None,
            give_up_if_faster_than_ms: Optional[float] = None,
            timer: Optional[Timer] = None) -> Measurement:
    """The per-call time of `calls` (the same work over different buffer sets),
    measured as the module docstring says. `timer` defaults to a GpuTimer on
    `stream`. Raises ThrottledError when more than `max_samples` samples in a
    row were throttled."""
    _check_calls("measure()", calls)
    if not 1 <= min_samples <= max_samples:
        raise ValueError(f"measure(): expected 1 <= min_samples <= max_samples, got "
                         f"min_samples={min_samples}, max_samples={max_samples}")
    if calls_per_sample is not None and calls_per_sample < 1:
        raise ValueError(f'Invalid argument "calls_per_sample" of measure(): expected a '
                         f"positive int or None, got {calls_per_sample}")
    if timer is None:
        timer = GpuTimer(stream)
    cps = _prepare(calls, timer, calls_per_sample)
    values: list[float] = []
    discarded = streak = 0
    first = 0
    while len(values) < max_samples:
        ms = timer.sample_ms(calls, first, cps) / cps
        first = (first + cps) % len(calls)
        reasons = timer.throttled()
        if reasons:
            discarded += 1
            streak += 1
            if streak > max_samples:
                raise ThrottledError(
                    f"measure(): the SM clock was throttled ({reasons}) during "
                    f"{streak} samples in a row; let the GPU cool down or lower its load")
            continue
        streak = 0
        values.append(ms)
        median, lo, hi = median_ci(values)
        if give_up_if_faster_than_ms is not None and len(values) >= RACE_AFTER and \
                lo > give_up_if_faster_than_ms:
            return _summary(values, discarded, True, cps)
        if len(values) >= min_samples and (hi - lo) / 2 <= rel_noise * median:
            break
    return _summary(values, discarded, False, cps)


def interleaved(candidates: dict[str, Sequence[Call]], *, rounds: int = 10, stream=None,
                timer: Optional[Timer] = None) -> dict[str, Measurement]:
    """Each candidate measured `rounds` times, one sample per candidate per
    round; round r takes them in the order rotated by r, so each one runs in
    every position equally often and slow drift cancels. A round in which any
    sample was throttled is taken again whole, so values stay paired by round
    (see speedup(paired=True)); ThrottledError after `rounds` such retries in a
    row."""
    if not candidates:
        raise ValueError('Invalid argument "candidates" of interleaved(): expected at least '
                         "one candidate, got none")
    if rounds < 1:
        raise ValueError(f'Invalid argument "rounds" of interleaved(): expected a positive '
                         f"int, got {rounds}")
    for name, calls in candidates.items():
        _check_calls(f"interleaved() (candidate {name!r})", calls)
    if timer is None:
        timer = GpuTimer(stream)
    names = list(candidates)
    cps = {name: _prepare(candidates[name], timer, None) for name in names}
    first = dict.fromkeys(names, 0)
    values: dict[str, list[float]] = {name: [] for name in names}
    discarded = dict.fromkeys(names, 0)
    streak = attempt = 0
    while len(values[names[0]]) < rounds:
        shift = attempt % len(names)
        attempt += 1
        order = names[shift:] + names[:shift]
        taken, reasons = {}, ""
        for name in order:
            calls = candidates[name]
            taken[name] = timer.sample_ms(calls, first[name], cps[name]) / cps[name]
            first[name] = (first[name] + cps[name]) % len(calls)
            why = timer.throttled()
            if why:
                discarded[name] += 1
                reasons = why
        if reasons:
            streak += 1
            if streak > rounds:
                raise ThrottledError(f"interleaved(): the SM clock was throttled ({reasons}) "
                                     f"in {streak} rounds in a row")
            continue
        streak = 0
        for name in names:
            values[name].append(taken[name])
    return {name: _summary(values[name], discarded[name], False, cps[name]) for name in names}


def speedup(baseline: Measurement, candidate: Measurement, *, paired: bool = False
            ) -> tuple[float, float]:
    """(speedup, relative noise) of `candidate` over `baseline` (> 1: faster).

    paired=True (two measurements of one interleaved() call): the median of the
    per-round ratios baseline/candidate, its noise the half-width of their
    order-statistics interval over the median. Otherwise the ratio of the
    medians, its noise the two relative noises added in quadrature."""
    if paired:
        if not baseline.values or len(baseline.values) != len(candidate.values):
            raise ValueError(f"speedup(paired=True): expected measurements with as many values "
                             f"(rounds), got {len(baseline.values)} and "
                             f"{len(candidate.values)}")
        ratios = [b / c for b, c in zip(baseline.values, candidate.values)]
        s, lo, hi = median_ci(ratios)
        return s, (hi - lo) / 2 / s
    return baseline.ms / candidate.ms, math.hypot(baseline.rel_noise, candidate.rel_noise)
