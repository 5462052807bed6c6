"""Atomics and memory order on the GPU, at sizes where blocks really run
concurrently: exact integer results under heavy contention, distinct old
values, one compare-and-swap winner, float sums against float64 within the
worst-case bound of any summation order, a spin lock, and cross-block
message passing that must hold with release/acquire (and is expected to
break when weakened to relaxed).

Every protocol here only waits for blocks that are already running: a block
takes its role from an atomic ticket, so it waits only for blocks that took
earlier tickets (a block waiting for one the GPU has not scheduled yet could
wait forever)."""
import numpy as np
import pytest

import tilecore as ct

pytestmark = pytest.mark.gpu
MO, MS = ct.MemoryOrder, ct.MemoryScope


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


# --- message passing ------------------------------------------------------------------------------------
@ct.function
def observed(flags, pair, OBSERVE, RAW):
    """The pair's flag: a one-element ct.load, or (RAW) a masked load_offset of
    two lanes whose second is masked off (tilecore's ordered load_offset)."""
    if RAW:
        lane = ct.arange(2, dtype=ct.int32)
        both = flags.get_raw_memory().load_offset(pair + lane, mask=lane == 0, padding_value=0,
                                                  memory_order=OBSERVE, memory_scope=MS.DEVICE)
        return ct.sum(both)
    return ct.load(flags, (pair,), (1,), memory_order=OBSERVE, memory_scope=MS.DEVICE).item()


@ct.kernel
def message_passing(counter, flags, payload, early, late, TILE: ct.Constant[int],
                    PUBLISH: ct.Constant, OBSERVE: ct.Constant, RAW: ct.Constant[bool]):
    t = ct.atomic_add(counter, 0, 1, memory_order=MO.RELAXED)
    pair = t // 2
    if t % 2 == 0:   # producer: the payload with plain stores, then the flag
        ct.store(payload, (pair,), ct.full((TILE,), pair + 1, ct.int32))
        ct.store(flags, (pair,), ct.full((1,), 1, ct.int32), memory_order=PUBLISH,
                 memory_scope=MS.DEVICE)
    else:            # consumer: its producer took the ticket before, so it is running
        ct.store(early, (pair,), ct.load(payload, (pair,), (TILE,)))   # may be old: fine
        while observed(flags, pair, OBSERVE, RAW) == 0:
            pass
        ct.store(late, (pair,), ct.load(payload, (pair,), (TILE,)))    # must be new


def _stale_pairs(cp, publish, observe, raw=False, pairs=2048, tile=1024, rounds=5) -> int:
    bad = 0
    for _ in range(rounds):
        counter = cp.zeros(1, cp.int32)
        flags = cp.zeros(pairs, cp.int32)
        payload = cp.zeros(pairs * tile, cp.int32)
        early, late = cp.zeros_like(payload), cp.zeros_like(payload)
        ct.launch(None, (2 * pairs,), message_passing,
                  (counter, flags, payload, early, late, tile, publish, observe, raw))
        cp.cuda.Device().synchronize()
        want = cp.repeat(cp.arange(1, pairs + 1, dtype=cp.int32), tile)
        bad += int((late.reshape(pairs, tile) != want.reshape(pairs, tile)).any(axis=1).sum())
    return bad


@pytest.mark.parametrize("raw", [False, True], ids=["load", "load_offset"])
def test_release_acquire_message_passing(cp, raw):
    """With RELAXED on both sides nothing orders the payload (the codegen test checks that
    RELAXED emits no fence or barrier); whether the GPU then shows a stale payload is
    timing, so only the ordered protocol is asserted here. The consumer polls with
    ct.load, or with tilecore's ordered, masked load_offset."""
    assert _stale_pairs(cp, MO.RELEASE, MO.ACQUIRE, raw) == 0


# --- contention -----------------------------------------------------------------------------------------
@ct.kernel
def histogram(samples, bins, TILE: ct.Constant[int], ORDER: ct.Constant):
    t = ct.load(samples, (ct.bid(0),), (TILE,), padding_mode=ct.PaddingMode.ZERO)
    inside = ct.arange(TILE, dtype=ct.int32) + ct.bid(0) * TILE < samples.shape[0]
    ct.atomic_add(bins, t.astype(ct.int32), ct.where(inside, 1, 0), memory_order=ORDER)


@pytest.mark.parametrize("order", [MO.RELAXED, MO.ACQ_REL])
@pytest.mark.parametrize("spread", ["uniform", "equal"])
def test_histogram_exact(cp, order, spread):
    n = (1 << 22) + 3
    rng = np.random.default_rng(5)
    host = rng.integers(0, 256, n).astype(np.uint8) if spread == "uniform" else \
        np.full(n, 7, np.uint8)
    bins = cp.zeros(256, cp.int32)
    ct.launch(None, (ct.cdiv(n, 4096),), histogram, (cp.asarray(host), bins, 4096, order))
    np.testing.assert_array_equal(cp.asnumpy(bins), np.bincount(host, minlength=256))


@ct.kernel
def tickets(counter, seen, TILE: ct.Constant[int]):
    ct.scatter(seen, ct.atomic_add(counter, ct.zeros((TILE,), ct.int32), 1), 1)


def test_old_values_are_distinct(cp):
    counter, seen = cp.zeros(1, cp.int64), cp.zeros(4096 * 256, cp.int32)
    ct.launch(None, (4096,), tickets, (counter, seen, 256))
    assert int(counter[0]) == 4096 * 256
    assert bool((seen == 1).all())


@ct.kernel
def cas_race(lock, wins, TILE: ct.Constant[int]):
    old = ct.atomic_cas(lock, ct.zeros((TILE,), ct.int32), 0, ct.bid(0) + 1)
    ct.atomic_add(wins, 0, ct.sum(ct.where(old == 0, 1, 0)))


def test_cas_exactly_one_winner(cp):
    for _ in range(5):
        lock, wins = cp.zeros(1, cp.int32), cp.zeros(1, cp.int32)
        ct.launch(None, (8192,), cas_race, (lock, wins, 128))
        assert int(wins[0]) == 1 and 1 <= int(lock[0]) <= 8192


@ct.kernel
def float_bins(x, vals, BINS: ct.Constant[int], TILE: ct.Constant[int]):
    v = ct.load(vals, (ct.bid(0),), (TILE,))
    ct.atomic_add(x, ct.arange(TILE, dtype=ct.int32) % BINS, v, memory_order=MO.RELAXED)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_float_add_within_the_bound_of_any_order(dtype):
    """Each bin sums n = 4097 terms in an order the GPU picks; any order is
    within (n - 1) * u * sum(|terms|) of the exact sum (u: the unit roundoff)."""
    torch = pytest.importorskip("torch")
    import ml_dtypes
    tdtype = getattr(torch, dtype)
    blocks, tile, bins = 1024, 64, 16
    gen = torch.Generator().manual_seed(9)
    vals = torch.rand(blocks * tile, generator=gen).to(tdtype)
    x0 = torch.rand(bins, generator=gen).to(tdtype)
    x = x0.cuda()
    ct.launch(None, (blocks,), float_bins, (x, vals.cuda(), bins, tile))
    torch.cuda.synchronize()
    got = x.cpu().double().numpy()
    terms = torch.cat([x0[:, None], vals.reshape(-1, bins).T], 1).double().numpy()
    u = float(ml_dtypes.finfo(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype).eps) / 2
    bound = (terms.shape[1] - 1) * u * np.abs(terms).sum(1)
    assert (np.abs(got - terms.sum(1)) <= bound).all()


# --- protocols ------------------------------------------------------------------------------------------
@ct.kernel
def locked_increment(lock, total, ROUNDS: ct.Constant[int]):
    for _ in range(ROUNDS):
        while ct.atomic_cas(lock, 0, 0, 1) != 0:        # ACQ_REL: acquires the lock
            pass
        ct.store(total, (0,), ct.load(total, (0,), (1,)) + 1)   # plain accesses inside
        ct.atomic_xchg(lock, 0, 0)                      # ACQ_REL: releases it


def test_spin_lock_mutual_exclusion(cp):
    lock, total = cp.zeros(1, cp.int32), cp.zeros(1, cp.int32)
    ct.launch(None, (512,), locked_increment, (lock, total, 8))
    assert int(total[0]) == 512 * 8 and int(lock[0]) == 0


@ct.kernel
def chained(counter, flags, data, TILE: ct.Constant[int]):
    t = ct.atomic_add(counter, 0, 1)
    prev = ct.zeros((TILE,), ct.int32)
    if t > 0:
        while ct.load(flags, (t - 1,), (1,), memory_order=MO.ACQUIRE,
                      memory_scope=MS.DEVICE).item() == 0:
            pass
        prev = ct.load(data, (t - 1,), (TILE,))
    ct.store(data, (t,), prev + 1)
    ct.store(flags, (t,), ct.full((1,), 1, ct.int32), memory_order=MO.RELEASE,
             memory_scope=MS.DEVICE)


def test_chained_prefix_across_all_blocks(cp):
    """Each tile adds one to its predecessor's tile, published with a release
    store and read after an acquire load: the last tile holds the tile count."""
    tiles, tile = 8192, 256
    counter, flags = cp.zeros(1, cp.int32), cp.zeros(tiles, cp.int32)
    data = cp.zeros(tiles * tile, cp.int32)
    ct.launch(None, (tiles,), chained, (counter, flags, data, tile))
    want = np.repeat(np.arange(1, tiles + 1, dtype=np.int32), tile)
    np.testing.assert_array_equal(cp.asnumpy(data), want)
