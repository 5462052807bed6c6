"""Atomics into a private shared-memory window (ir/privatize.py,
backend/cuda/privatize.py): which ones qualify, and that every kind gives the
result of plain atomics. Each kernel runs in the interpreter against NumPy;
the suite compiles it for sm_80 and sm_90 and, on a GPU, replays it there and
compares the arrays bit for bit (integers)."""
import numpy as np
import pytest

import tilecore as ct

MO, MS = ct.MemoryOrder, ct.MemoryScope
RNG = np.random.default_rng(12)


def _private(kernel, args) -> bool:
    """Whether the compiled kernel keeps a private window."""
    src = ct.compile(kernel, args, arch="sm_90").source
    return "tc::private_update<" in src or "tc::private_flush<" in src


@ct.kernel
def counts(samples, bins, TILE: ct.Constant[int], ORDER: ct.Constant):
    n = samples.shape[0]
    for t in range(ct.bid(0), ct.cdiv(n, TILE), ct.num_blocks(0)):
        x = ct.load(samples, (t,), (TILE,), padding_mode=ct.PaddingMode.ZERO)
        inside = t * TILE + ct.arange(TILE, dtype=ct.int32) < n
        ct.atomic_add(bins, x, ct.where(inside, 1, 0), memory_order=ORDER)


@pytest.mark.parametrize("order", [MO.RELAXED, MO.ACQ_REL])
@pytest.mark.parametrize("kind", ["uniform", "equal", "runs"])
def test_histogram(order, kind):
    n = 7 * 512 + 77   # a partial last tile
    samples = {"uniform": RNG.integers(0, 256, n),
               "equal": np.full(n, 255),
               "runs": np.repeat(RNG.integers(0, 256, n // 9 + 1), 9)[:n]}[kind].astype(np.uint8)
    bins = np.zeros(256, np.int32)
    args = (samples, bins, 512, order)
    ct.launch(None, (3,), counts, args)
    np.testing.assert_array_equal(bins, np.bincount(samples, minlength=256))
    assert _private(counts, args)


def test_bins_beyond_the_array_are_dropped():
    """A window wider than the array: updates past its end are dropped, as the
    bounds check of a plain atomic drops them."""
    samples = RNG.integers(0, 256, 1000).astype(np.uint8)
    bins = np.zeros(100, np.int32)
    ct.launch(None, (2,), counts, (samples, bins, 512, MO.RELAXED))
    np.testing.assert_array_equal(bins, np.bincount(samples, minlength=256)[:100])


@ct.kernel
def combine(values, keys, out, FN: ct.Constant[str], TILE: ct.Constant[int]):
    v = ct.load(values, (ct.bid(0),), (TILE,))
    k = ct.load(keys, (ct.bid(0),), (TILE,)) % 37          # in [0, 36]
    if FN == "max":
        ct.atomic_max(out, k, v, memory_order=MO.RELAXED)
    elif FN == "min":
        ct.atomic_min(out, k, v, memory_order=MO.RELAXED)
    elif FN == "and":
        ct.atomic_and(out, k, v, memory_order=MO.RELAXED)
    elif FN == "or":
        ct.atomic_or(out, k, v, memory_order=MO.RELAXED)
    elif FN == "xor":
        ct.atomic_xor(out, k, v, memory_order=MO.RELAXED)
    else:
        ct.atomic_add(out, k, v, memory_order=MO.RELAXED, memory_scope=MS.BLOCK)


_UFUNC = {"max": np.maximum, "min": np.minimum, "and": np.bitwise_and, "or": np.bitwise_or,
          "xor": np.bitwise_xor, "add": np.add}


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64])
@pytest.mark.parametrize("fn", list(_UFUNC))
def test_every_kind_matches_numpy(fn, dtype):
    info = np.iinfo(dtype)
    values = RNG.integers(info.min, info.max, 4 * 256, dtype=dtype, endpoint=True)
    values[:8] = [info.min, info.max, 0, 1, info.max, info.min, 0, 0]
    keys = RNG.integers(-50, 50, 4 * 256).astype(np.int32)
    out = RNG.integers(info.min, info.max, 37, dtype=dtype, endpoint=True)
    want = out.copy()
    _UFUNC[fn].at(want, keys % 37, values)
    args = (values, keys, out, fn, 256)
    ct.launch(None, (4,), combine, args)
    np.testing.assert_array_equal(out, want)
    assert _private(combine, args) == (dtype in (np.int32, np.uint32) or fn == "add")


@ct.kernel
def not_private(samples, bins, other, CASE: ct.Constant[int]):
    x = ct.load(samples, (0,), (64,))
    if CASE == 0:      # the old values are used (their sum does not depend on the order)
        ct.store(other, (0,), ct.sum(ct.atomic_add(bins, x, 1), 0, keepdims=True))
    elif CASE == 1:    # the kernel also reads the array
        ct.atomic_add(bins, x, 1)
        ct.store(other, (0,), ct.load(bins, (0,), (64,)))
    elif CASE == 2:    # indices of no small range
        ct.atomic_add(bins, x.astype(ct.int32) * 1000, 1)
    elif CASE == 3:    # system scope: the host may watch
        ct.atomic_add(bins, x, 1, memory_scope=MS.SYS)
    else:              # two kinds of update on one array
        ct.atomic_add(bins, x, 1)
        ct.atomic_max(bins, x, 3)


@pytest.mark.parametrize("case", range(5))
def test_what_stays_global(case):
    samples = RNG.integers(0, 64, 64).astype(np.uint8)
    bins, other = np.zeros(64000, np.int32), np.zeros(64, np.int32)
    args = (samples, bins, other, case)
    ct.launch(None, (1,), not_private, args)
    assert not _private(not_private, args)
    want = np.zeros(64000, np.int64)
    idx = samples.astype(np.int64) * (1000 if case == 2 else 1)
    np.add.at(want, idx, 1)
    if case == 4:
        np.maximum.at(want, idx, 3)
    np.testing.assert_array_equal(bins, want)
