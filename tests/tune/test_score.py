"""score.py against CUB's tuning-search weights, computed here independently
from the formula of NVIDIA/cccl benchmarks/scripts/cccl/bench/score.py."""
import math

import pytest

from tilecore.tune.score import score, weights

SIZES = [1 << 16, 1 << 20, 1 << 24, 1 << 28]


def cub_raw(n: int) -> list[float]:
    """CUB's importances of n sizes: 1 - exp(-x), x from -ln(0.4) in n equal
    steps towards -ln(0.001) (the end itself not reached)."""
    begin, end = math.log(1 / 0.4), math.log(1 / 0.001)
    return [1 - math.exp(-(begin + i * (end - begin) / n)) for i in range(n)]


def test_weights_are_cubs_normalized_importances():
    raw = cub_raw(4)
    w = weights(SIZES)
    assert list(w) == SIZES
    for n, r in zip(SIZES, raw):
        assert w[n] == pytest.approx(r / sum(raw), rel=1e-12)
    assert [round(w[n], 3) for n in SIZES] == [0.172, 0.261, 0.281, 0.286]
    assert raw[0] == pytest.approx(0.6)


def test_weights_follow_position_not_value_and_grow_with_size():
    w = weights([1 << 28, 1 << 10, 1 << 18])       # any order: sorted by size
    assert sorted(w) == [1 << 10, 1 << 18, 1 << 28]
    assert w[1 << 10] < w[1 << 18] < w[1 << 28]
    assert list(weights([3, 5, 7]).values()) == pytest.approx(list(w.values()))
    assert weights([1 << 20]) == {1 << 20: pytest.approx(1.0)}


@pytest.mark.parametrize("sizes", [[], [16, 16], [0, 4], [2.0, 4], [True, 4]])
def test_weights_reject_bad_sizes(sizes):
    with pytest.raises(ValueError, match='Invalid argument "sizes" of weights'):
        weights(sizes)


def test_score_is_the_weighted_sum_of_speedups():
    w = weights(SIZES)
    s = {SIZES[0]: 0.5, SIZES[1]: 1.0, SIZES[2]: 1.5, SIZES[3]: 2.0}
    assert score(s, w) == pytest.approx(sum(w[n] * s[n] for n in SIZES))


def test_a_policy_on_par_scores_one_whatever_was_skipped():
    w = weights(SIZES)
    for measured in (SIZES, SIZES[2:], [SIZES[0], SIZES[3]], [SIZES[3]]):
        assert score({n: 1.0 for n in measured}, w) == pytest.approx(1.0)


def test_skipped_sizes_keep_the_others_weight_ratio():
    w = weights(SIZES)
    a, b = SIZES[2], SIZES[3]
    assert score({a: 2.0, b: 1.0}, w) - 1.0 == pytest.approx(w[a] / (w[a] + w[b]))


def test_uniform_gain_beats_trading_a_regression_for_a_larger_gain():
    w = weights(SIZES)
    assert score({SIZES[2]: 1.05, SIZES[3]: 1.08}, w) > score({SIZES[2]: 0.90, SIZES[3]: 1.20}, w)


def test_nothing_measured_scores_minus_infinity():
    assert score({}, weights(SIZES)) == float("-inf")


def test_score_rejects_unweighted_sizes_and_bad_speedups():
    w = weights(SIZES)
    with pytest.raises(ValueError, match=r"sizes \[1000\] have no weight"):
        score({1000: 1.0}, w)
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="expected positive finite speedups"):
            score({SIZES[0]: bad}, w)
