"""Array.get_raw_memory() on the GPU with CuPy arrays: base pointer plus
element offset on strided device views, atomics under contention across many
blocks (exact integer histograms, one compare-and-swap winner per slot,
distinct old values), a masked spin lock, and offsets past 2**31 and 2**32
in arrays that large (int64 and uint32 offsets are never narrowed)."""
import numpy as np
import pytest

import tilecore as ct

pytestmark = pytest.mark.gpu
MO, MS = ct.MemoryOrder, ct.MemoryScope


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


@ct.kernel
def gather_raw(x, off, out, TILE: ct.Constant[int]):
    o = ct.load(off, (ct.bid(0),), (TILE,))
    ok = o >= 0
    ct.store(out, (ct.bid(0),), x.get_raw_memory().load_offset(o, mask=ok, padding_value=-1))


def test_offsets_from_the_base_of_a_strided_device_view(cp):
    rng = np.random.default_rng(11)
    parent = cp.arange(300 * 40, dtype=cp.int32).reshape(300, 40)
    view = parent[7:, 1::3]                        # base pointer: parent[7, 1]
    base = 7 * 40 + 1
    off = rng.integers(-5, 300 * 40 - base, 1024).astype(np.int32)
    out = cp.zeros(1024, cp.int32)
    ct.launch(None, (8,), gather_raw, (view, cp.asarray(off), out, 128))
    want = np.where(off >= 0, np.arange(300 * 40)[base + np.maximum(off, 0)], -1)
    np.testing.assert_array_equal(cp.asnumpy(out), want)


@ct.kernel
def raw_histogram(samples, bins, TILE: ct.Constant[int]):
    t = ct.load(samples, (ct.bid(0),), (TILE,), padding_mode=ct.PaddingMode.ZERO)
    inside = ct.arange(TILE, dtype=ct.int32) + ct.bid(0) * TILE < samples.shape[0]
    bins.get_raw_memory().atomic_add_offset(t.astype(ct.int32), 1, mask=inside,
                                            memory_order=MO.RELAXED)


@pytest.mark.parametrize("spread", ["uniform", "equal"])
def test_histogram_exact(cp, spread):
    n = (1 << 22) + 3
    rng = np.random.default_rng(12)
    host = rng.integers(0, 256, n).astype(np.uint8) if spread == "uniform" else \
        np.full(n, 9, np.uint8)
    bins = cp.zeros(256, cp.uint64)
    ct.launch(None, (ct.cdiv(n, 4096),), raw_histogram, (cp.asarray(host), bins, 4096))
    np.testing.assert_array_equal(cp.asnumpy(bins), np.bincount(host, minlength=256))


@ct.kernel
def raw_tickets(counter, seen, TILE: ct.Constant[int]):
    old = counter.get_raw_memory().atomic_add_offset(ct.zeros((TILE,), ct.int32), 1)
    seen.get_raw_memory().store_offset(old, 1)


def test_old_values_are_distinct(cp):
    counter, seen = cp.zeros(1, cp.int64), cp.zeros(4096 * 256, cp.int8)
    ct.launch(None, (4096,), raw_tickets, (counter, seen, 256))
    assert int(counter[0]) == 4096 * 256 and bool((seen == 1).all())


@ct.kernel
def cas_slots(slots, wins, SLOTS: ct.Constant[int]):
    old = slots.get_raw_memory().atomic_cas_offset(ct.arange(SLOTS, dtype=ct.int32), 0,
                                                   ct.bid(0) + 1)
    wins.get_raw_memory().atomic_add_offset(ct.arange(SLOTS, dtype=ct.int32),
                                            ct.where(old == 0, 1, 0))


def test_cas_exactly_one_winner_per_slot(cp):
    slots, wins = cp.zeros(64, cp.int32), cp.zeros(64, cp.int32)
    ct.launch(None, (4096,), cas_slots, (slots, wins, 64))
    assert bool((wins == 1).all()) and bool(((slots >= 1) & (slots <= 4096)).all())


@ct.kernel
def locked_increment(lock, total, ROUNDS: ct.Constant[int]):
    raw = lock.get_raw_memory()
    for _ in range(ROUNDS):
        while raw.atomic_cas_offset(0, 0, 1) != 0:         # ACQ_REL: acquires the lock
            pass
        ct.store(total, (0,), ct.load(total, (0,), (1,)) + 1)
        raw.atomic_xchg_offset(0, 0)                        # ACQ_REL: releases it


def test_spin_lock_mutual_exclusion(cp):
    lock, total = cp.zeros(1, cp.int32), cp.zeros(1, cp.int32)
    ct.launch(None, (512,), locked_increment, (lock, total, 8))
    assert int(total[0]) == 512 * 8 and int(lock[0]) == 0


@ct.kernel
def far_access_8(x, off, out):
    raw = x.get_raw_memory()
    o = ct.load(off, (0,), (8,))
    raw.store_offset(o, ct.arange(8, dtype=ct.int32).astype(ct.int8) + 1)
    ct.store(out, (0,), raw.load_offset(o))


@pytest.mark.parametrize("odt", [np.int64, np.uint32, np.uint64])
def test_offsets_past_2_to_the_31_and_32(cp, odt):
    n = 2**32 + 64                                   # int8: 4 GiB
    x = cp.zeros(n, cp.int8)
    off = np.array([0, 2**31 - 1, 2**31, 2**31 + 7, 2**32 - 1, 5, 2**31 + 1, 3], odt)
    if odt is np.int64 or odt is np.uint64:
        off[5] = 2**32 + 63                          # past uint32
    out = cp.zeros(8, cp.int8)
    ct.launch(None, (1,), far_access_8, (x, cp.asarray(off), out))
    np.testing.assert_array_equal(cp.asnumpy(out), np.arange(8, dtype=np.int8) + 1)
    idx = cp.asarray(off.astype(np.int64))
    np.testing.assert_array_equal(cp.asnumpy(x[idx]), np.arange(8, dtype=np.int8) + 1)
    assert int(cp.count_nonzero(x)) == 8
    del x


@ct.kernel
def far_atomics(x, off, old):
    o = ct.load(off, (0,), (4,))
    ct.store(old, (0,), x.get_raw_memory().atomic_add_offset(o, 5, mask=o >= 0))


def test_atomics_past_2_to_the_31(cp):
    n = 2**31 + 64                                   # int32: 8 GiB
    x = cp.zeros(n, cp.int32)
    x[2**31 + 3] = 7
    off = cp.asarray(np.array([2**31 + 3, 2**31 - 1, -1, 2**31 + 63], np.int64))
    old = cp.full(4, -9, cp.int32)
    ct.launch(None, (1,), far_atomics, (x, off, old))
    np.testing.assert_array_equal(cp.asnumpy(old), [7, 0, 0, 0])
    assert int(x[2**31 + 3]) == 12 and int(x[2**31 - 1]) == 5 and int(x[2**31 + 63]) == 5
    assert int(x[:2**31 - 1].sum()) == 0
    del x
