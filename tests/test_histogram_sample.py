"""The 256-bin histogram sample (examples/histogram.py) in the interpreter (whose
launches the suite also compiles for sm_80 and sm_90): counts against
np.bincount, a partial last tile, and its argument checks, which stop counts
from being dropped silently (bins shorter than 256) before anything runs."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from histogram import histogram  # noqa: E402


@pytest.mark.parametrize("n", [1, 4095, 3 * 4096 + 7])
def test_counts_add_to_bins(n):
    samples = np.random.default_rng(n).integers(0, 256, n).astype(np.uint8)
    bins = np.full(256, 3, np.int32)
    histogram(samples, bins, blocks=2)
    np.testing.assert_array_equal(bins, 3 + np.bincount(samples, minlength=256))


def test_bad_arguments_are_errors_before_any_launch():
    bins = np.zeros(255, np.int32)
    with pytest.raises(ValueError, match=r'"bins": expected a 1-D array of at least 256 '
                                         r"counts, got shape \(255,\)"):
        histogram(np.zeros(10, np.uint8), bins)
    with pytest.raises(TypeError, match='"samples": expected uint8, got int32'):
        histogram(np.zeros(10, np.int32), np.zeros(256, np.int32))
