"""measure.py with injected timers (a HostTimer on a fake clock that the
calls themselves advance, and scripted Timers): stopping rules, racing,
throttled samples, the order-statistics interval against hand-computed
order statistics, interleaving and speedups."""
import math
import random

import pytest

from tilecore.tune import measure as M
from tilecore.tune.measure import (HostTimer, Measurement, ThrottledError, interleaved,
                                   measure, median_ci, speedup)


class FakeClock:
    """A clock that only the calls move: each call adds the next duration (s)."""

    def __init__(self, durations):
        self.now = 0.0
        self.durations = iter(durations)
        self.calls = 0

    def __call__(self):
        return self.now

    def call(self):
        self.calls += 1
        self.now += next(self.durations)


def constant(seconds):
    while True:
        yield seconds


def reference_ci(values, confidence=0.95):
    """The distribution-free interval for the median, the slow way: the
    largest k <= (n-1)/2 whose [x_(k+1), x_(n-k)] covers with
    1 - 2 sum_{i<=k} C(n,i)/2^n >= confidence (k = 0 when none does)."""
    xs, n = sorted(values), len(values)
    best = 0
    for k in range((n - 1) // 2 + 1):
        coverage = 1 - 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
        if coverage >= confidence:
            best = k
    return xs[best], xs[n - 1 - best]


# 1-indexed order statistics of the 95% interval from published tables
# (e.g. Conover, Practical Nonparametric Statistics, table A3 / the binomial
# tables): n -> (lower, upper)
HAND = {6: (1, 6), 8: (1, 8), 9: (2, 8), 10: (2, 9), 13: (3, 11), 20: (6, 15), 50: (18, 33)}


@pytest.mark.parametrize("n", sorted(HAND))
def test_median_ci_order_statistics(n):
    rng = random.Random(n)
    values = [rng.uniform(1.0, 2.0) for _ in range(n)]
    xs = sorted(values)
    median, lo, hi = median_ci(values)
    lower, upper = HAND[n]
    assert (lo, hi) == (xs[lower - 1], xs[upper - 1])
    assert (lo, hi) == reference_ci(values)
    assert median == (xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2)


def test_median_ci_small_samples_give_the_range():
    for n in range(1, 9):
        values = [float(3 * i % 7) for i in range(n)]
        _, lo, hi = median_ci(values)
        assert (lo, hi) == (min(values), max(values)) == reference_ci(values)
    assert median_ci([5.0, 1.0]) == (3.0, 1.0, 5.0)
    with pytest.raises(ValueError):
        median_ci([])


def test_median_ci_agrees_with_the_slow_reference_up_to_200():
    rng = random.Random(0)
    for n in list(range(1, 60)) + [99, 100, 200]:
        values = [rng.random() for _ in range(n)]
        assert median_ci(values)[1:] == reference_ci(values), n
    # large n: no float overflow in 2^n
    assert median_ci(list(range(2001)))[0] == 1000


def test_constant_calls_stop_after_min_samples():
    clock = FakeClock(constant(1e-4))            # 0.1 ms a call
    m = measure([clock.call], timer=HostTimer(clock), min_samples=5)
    assert m.calls_per_sample == 10              # ceil(MIN_SAMPLE_MS / 0.1 ms)
    assert m.samples == 5 and not m.stopped_early and m.discarded_throttled == 0
    assert m.ms == pytest.approx(0.1) and m.rel_noise == pytest.approx(0.0, abs=1e-9)
    # warm-up (1) + calibration (1 sample of 1 call) + 5 samples of 10
    assert clock.calls == 1 + 1 + 50
    assert len(m.values) == 5


def test_buffer_sets_rotate_across_samples():
    seen = []
    clock = FakeClock(constant(3e-4))
    calls = [lambda i=i: (seen.append(i), clock.call()) for i in range(3)]
    measure(calls, timer=HostTimer(clock), calls_per_sample=2, min_samples=3)
    # warm-up 0 1 2, calibration 0 1, then samples carry the rotation on: 0 1, 2 0, 1 2
    assert seen == [0, 1, 2, 0, 1, 0, 1, 2, 0, 1, 2]


def test_sampling_stops_once_the_noise_is_below_the_bound():
    """Per-sample times from a seeded sequence; the stop is where the
    reference interval's half-width first falls under 2% of the median."""
    rng = random.Random(7)
    per_sample = [1.0 + rng.uniform(-0.08, 0.08) for _ in range(200)]
    # calls_per_sample=1: each sample is one call; the first two calls are warm-up
    # and calibration
    clock = FakeClock([1e-3, 1e-3] + [t * 1e-3 for t in per_sample])
    m = measure([clock.call], timer=HostTimer(clock), calls_per_sample=1, rel_noise=0.02,
                min_samples=5, max_samples=200)
    stop = None
    for n in range(5, 201):
        xs = per_sample[:n]
        lo, hi = reference_ci(xs)
        med = sorted(xs)[n // 2] if n % 2 else sum(sorted(xs)[n // 2 - 1:n // 2 + 1]) / 2
        if (hi - lo) / 2 <= 0.02 * med:
            stop = n
            break
    assert stop is not None and 5 < stop < 200
    assert m.samples == stop
    assert m.values == pytest.approx(per_sample[:stop])
    assert m.rel_noise <= 0.02


def test_max_samples_bounds_a_noisy_measurement():
    clock = FakeClock([1e-3, 1e-3] + [1e-3 if i % 2 else 2e-3 for i in range(100)])
    m = measure([clock.call], timer=HostTimer(clock), calls_per_sample=1, rel_noise=0.01,
                max_samples=12)
    assert m.samples == 12 and not m.stopped_early
    assert m.ms == pytest.approx(1.5)
    assert m.ci_low == pytest.approx(1.0) and m.ci_high == pytest.approx(2.0)


def test_racing_stops_a_slower_candidate_early():
    rng = random.Random(1)
    noisy = [1e-3 * (1 + rng.uniform(-0.2, 0.2)) for _ in range(100)]
    clock = FakeClock([1e-3, 1e-3] + noisy)
    m = measure([clock.call], timer=HostTimer(clock), calls_per_sample=1, rel_noise=1e-6,
                give_up_if_faster_than_ms=0.5)
    assert m.stopped_early and m.samples == M.RACE_AFTER
    # not surely slower: the low end of the interval is below the time to beat
    clock = FakeClock([1e-3, 1e-3] + noisy)
    m = measure([clock.call], timer=HostTimer(clock), calls_per_sample=1, rel_noise=1e-6,
                max_samples=20, give_up_if_faster_than_ms=0.9)
    assert not m.stopped_early and m.samples == 20


class ScriptedTimer:
    """A Timer that answers scripted per-call times (ms) and throttling reasons,
    sample by sample (the warm-up's calibration sample first)."""

    def __init__(self, per_call_ms, reasons=None):
        self.per_call_ms = list(per_call_ms)
        self.reasons = list(reasons or [])
        self.taken = []         # (first call id, first, count)
        self._last = ""

    def sample_ms(self, calls, first, count):
        i = len(self.taken)
        self.taken.append((calls[0], first, count))
        self._last = self.reasons[i] if i < len(self.reasons) else ""
        return self.per_call_ms[i % len(self.per_call_ms)] * count

    def throttled(self):
        return self._last


def test_throttled_samples_are_discarded():
    per_call = [1.0, 1.0, 50.0, 1.0, 50.0, 1.0, 1.0, 1.0, 1.0]
    reasons = ["", "", "sw_thermal", "", "hw_slowdown,sw_power_cap", "", "", "", ""]
    timer = ScriptedTimer(per_call, reasons)
    m = measure([lambda: None], timer=timer, calls_per_sample=1, min_samples=5)
    assert m.discarded_throttled == 2
    assert m.samples == 5 and 50.0 not in m.values and m.ms == 1.0
    with pytest.raises(ThrottledError, match="sw_thermal"):
        measure([lambda: None], timer=ScriptedTimer([1.0], ["sw_thermal"] * 100),
                calls_per_sample=1, max_samples=5)


def test_calls_per_sample_from_calibration():
    for per_call, want in [(0.3, 4), (1.0, 1), (2.5, 1), (1e-4, M.MAX_CALLS_PER_SAMPLE),
                           (0.0, M.MAX_CALLS_PER_SAMPLE)]:
        timer = ScriptedTimer([per_call])
        m = measure([lambda: None], timer=timer, min_samples=1, max_samples=1)
        assert m.calls_per_sample == want, per_call
        assert timer.taken[1][2] == want


def test_calibration_never_queues_more_than_max_calls():
    """Many buffer sets (small inputs rotated to span L2): the calibration sample
    takes at most MAX_CALLS_PER_SAMPLE calls (a deeper queue blocks the host)."""
    timer = ScriptedTimer([0.001])
    calls = [lambda: None] * 1024
    m = measure(calls, timer=timer, min_samples=2, max_samples=2)
    assert [count for _, _, count in timer.taken] == [M.MAX_CALLS_PER_SAMPLE] * 3
    assert m.calls_per_sample == M.MAX_CALLS_PER_SAMPLE <= 128
    assert [first for _, first, _ in timer.taken] == [0, 0, M.MAX_CALLS_PER_SAMPLE]


def test_argument_checks():
    with pytest.raises(ValueError, match="calls"):
        measure([], timer=ScriptedTimer([1.0]))
    with pytest.raises(ValueError, match="min_samples"):
        measure([lambda: None], timer=ScriptedTimer([1.0]), min_samples=5, max_samples=4)
    with pytest.raises(ValueError, match="calls_per_sample"):
        measure([lambda: None], timer=ScriptedTimer([1.0]), calls_per_sample=0)


def test_interleaved_rotates_the_order_and_retakes_throttled_rounds():
    a, b, c = (lambda: None), (lambda: None), (lambda: None)
    names = {id(a): "a", id(b): "b", id(c): "c"}
    # 3 calibration samples, then rounds of 3 samples; round 1 (samples 6-8) is throttled
    reasons = [""] * 3 + ["", "", ""] + ["", "sw_thermal", ""] + [""] * 30
    timer = ScriptedTimer([1.0], reasons)
    out = interleaved({"a": [a], "b": [b], "c": [c]}, rounds=4, timer=timer)
    order = [names[id(t[0])] for t in timer.taken[3:]]
    assert order == ["a", "b", "c", "b", "c", "a",    # round 0; round 1 throttled:
                     "c", "a", "b",                    # taken again, rotated once more
                     "a", "b", "c", "b", "c", "a"]
    assert all(m.samples == 4 for m in out.values())
    # round 1 ran b, c, a: c's sample was the throttled one
    assert [out[n].discarded_throttled for n in "abc"] == [0, 0, 1]


def test_speedup_unpaired_and_paired():
    base = Measurement(ms=2.0, ci_low=1.9, ci_high=2.1, rel_noise=0.05, samples=10,
                       discarded_throttled=0, stopped_early=False)
    cand = Measurement(ms=1.0, ci_low=0.99, ci_high=1.01, rel_noise=0.01, samples=10,
                       discarded_throttled=0, stopped_early=False)
    s, noise = speedup(base, cand)
    assert s == 2.0 and noise == pytest.approx(math.sqrt(0.05 ** 2 + 0.01 ** 2))
    b = Measurement(2.0, 0, 0, 0, 10, 0, False, 1, tuple(2.0 + 0.1 * i for i in range(10)))
    c = Measurement(1.0, 0, 0, 0, 10, 0, False, 1, tuple([1.0] * 9 + [0.5]))
    ratios = sorted([(2.0 + 0.1 * i) / 1.0 for i in range(9)] + [2.9 / 0.5])
    s, noise = speedup(b, c, paired=True)
    assert s == pytest.approx((ratios[4] + ratios[5]) / 2)
    assert noise == pytest.approx((ratios[8] - ratios[1]) / 2 / s)   # n=10: [x_2, x_9]
    with pytest.raises(ValueError, match="paired"):
        speedup(b, Measurement(1.0, 0, 0, 0, 3, 0, False, 1, (1.0, 1.0, 1.0)), paired=True)


def test_spin_covers_the_host_then_shrinks_back():
    """GpuTimer's spin: an uncovered sample is retaken behind a longer spin,
    and after one slow moment of the host the spin returns to twice the
    host's usual time instead of staying long for every later sample."""
    spin = 0.5
    covered, spin = M.next_spin_ms(spin, 0.3)           # 0.3 <= 0.8 * 0.5
    assert covered and spin == pytest.approx(0.5)
    covered, spin = M.next_spin_ms(spin, 20.0)          # a hiccup: retake
    assert not covered and spin == pytest.approx(30.0)
    covered, spin = M.next_spin_ms(spin, 21.0)          # covered now
    assert covered and spin == pytest.approx(30.0)
    covered, spin = M.next_spin_ms(spin, 1.0)           # the host is quick again
    assert covered and spin == pytest.approx(2.0)
    covered, spin = M.next_spin_ms(spin, 0.01)          # never below the floor
    assert covered and spin == pytest.approx(0.2)
    covered, again = M.next_spin_ms(spin, 0.16)         # exactly 80%: still covered
    assert covered and again == pytest.approx(0.2)
