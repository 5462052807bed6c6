"""Atomics in the interpreter: elements apply one at a time in row-major order
(repeated indices all apply and each sees the value the previous ones left),
blocks one after another; spin-waits that could never end are errors at the
loop's line, not hangs. These results depend on the interpreter's order, so
the tests are interpreter_only (tests/frontend/test_atomics.py holds the
order-independent ones that also run on the GPU)."""
import linecache

import numpy as np
import pytest

import tilecore as ct
from tilecore.interpreter import run_function

MO, MS = ct.MemoryOrder, ct.MemoryScope
pytestmark = pytest.mark.interpreter_only


def _line(kernel, marker: str) -> int:
    filename = kernel.pyfunc.__code__.co_filename
    lines = [i + 1 for i, text in enumerate(linecache.getlines(filename))
             if text.rstrip().endswith(f"# {marker}")]
    assert len(lines) == 1
    return lines[0]


@ct.kernel
def repeated(x, idx, upd, old, FN: ct.Constant):
    ct.store(old, (0,), FN(x, ct.load(idx, (0,), (8,)), ct.load(upd, (0,), (8,))))


@pytest.mark.parametrize("fn,expect_old,expect_x", [
    (ct.atomic_add, [30, 10, 31, 34, 20, 12, 38, 25], [18, 33, 45]),
    (ct.atomic_xchg, [30, 10, 1, 3, 20, 2, 4, 5], [6, 8, 7]),
    (ct.atomic_max, [30, 10, 30, 30, 20, 10, 30, 20], [10, 20, 30]),
])
def test_repeated_indices_apply_in_row_major_order(fn, expect_old, expect_x):
    x = np.array([10, 20, 30], np.int32)
    idx = np.array([2, 0, 2, 2, 1, 0, 2, 1], np.int32)
    upd = np.array([1, 2, 3, 4, 5, 6, 7, 8], np.int32)
    old = np.zeros(8, np.int32)
    ct.launch(None, (1,), repeated, (x, idx, upd, old, fn))
    np.testing.assert_array_equal(old, expect_old)
    np.testing.assert_array_equal(x, expect_x)


@ct.kernel
def cas_tile(lock, old):
    desired = ct.arange(4, dtype=ct.int32) + 1
    ct.store(old, (0,), ct.atomic_cas(lock, ct.zeros((4,), ct.int32), 0, desired))


def test_cas_within_a_tile_first_element_wins():
    lock, old = np.zeros(1, np.int32), np.full(4, -1, np.int32)
    ct.launch(None, (1,), cas_tile, (lock, old))
    np.testing.assert_array_equal(old, [0, 1, 1, 1])
    assert lock[0] == 1


@ct.kernel
def ticket(counter, out):
    t = ct.atomic_add(counter, 0, 1)
    ct.store(out, (ct.bid(0),), ct.full((1,), t, ct.int32))


def test_blocks_run_one_after_another():
    counter, out = np.zeros(1, np.int32), np.zeros(6, np.int32)
    ct.launch(None, (6,), ticket, (counter, out))
    np.testing.assert_array_equal(out, np.arange(6))


def test_random_block_order_gives_tickets_in_execution_order():
    counter, out = np.zeros(1, np.int32), np.zeros(6, np.int32)
    ct.launch(None, (6,), ticket, (counter, out))       # specializes and lowers the kernel
    (fn,) = ticket._ir.values()
    counter[0] = 0
    run_function(fn, (6, 1, 1), [counter, out], block_order="random", seed=3)
    assert sorted(out) == list(range(6)) and list(out) != list(range(6))


# --- spin-waits ------------------------------------------------------------------------------------------
@ct.kernel
def wait_for_block(flag, out, WAITER: ct.Constant[int]):
    if ct.bid(0) == WAITER:
        f = ct.load(flag, (0,), (1,), memory_order=MO.ACQUIRE, memory_scope=MS.DEVICE)
        while f.item() == 0:  # spin: flag
            f = ct.load(flag, (0,), (1,), memory_order=MO.ACQUIRE, memory_scope=MS.DEVICE)
        ct.store(out, (0,), f)
    else:
        ct.store(flag, (0,), ct.full((1,), 1, ct.int32), memory_order=MO.RELEASE,
                 memory_scope=MS.DEVICE)


def test_waiting_for_a_later_block_is_an_error_at_the_loop():
    flag, out = np.zeros(1, np.int32), np.zeros(1, np.int32)
    with pytest.raises(ct.TileRuntimeError) as info:
        ct.launch(None, (2,), wait_for_block, (flag, out, 0))
    err = info.value
    assert err.message.startswith("This while loop can never end in the interpreter: in block "
                                  "(0, 0, 0) one iteration wrote nothing to memory and left the "
                                  "loop's variables unchanged")
    assert "the interpreter runs blocks one after another" in err.message
    assert err.loc.line == _line(wait_for_block, "spin: flag")
    assert f"line {err.loc.line}," in str(err)


def test_waiting_for_an_earlier_block_works():
    flag, out = np.zeros(1, np.int32), np.zeros(1, np.int32)
    ct.launch(None, (2,), wait_for_block, (flag, out, 1))
    assert out[0] == 1


@ct.kernel
def spin_on_cas(lock, out):
    ct.atomic_cas(lock, 0, 0, 1)                      # never released
    while ct.atomic_cas(lock, 0, 0, 1) != 0:  # spin: cas
        pass
    ct.store(out, (0,), ct.full((1,), 1, ct.int32))


def test_a_failed_compare_and_swap_is_no_progress():
    with pytest.raises(ct.TileRuntimeError) as info:
        ct.launch(None, (1,), spin_on_cas, (np.zeros(1, np.int32), np.zeros(1, np.int32)))
    assert info.value.loc.line == _line(spin_on_cas, "spin: cas")


@ct.kernel
def count_in_registers(out, N: ct.Constant[int]):
    i = 0
    while i < N:
        i += 1
    ct.store(out, (0,), ct.full((1,), i, ct.int32))


def test_a_loop_whose_variables_change_is_not_reported():
    out = np.zeros(1, np.int32)
    ct.launch(None, (1,), count_in_registers, (out, 1000))
    assert out[0] == 1000


@ct.kernel
def chained(counter, flags, data, TILE: ct.Constant[int]):
    t = ct.atomic_add(counter, 0, 1)                  # tile number in start order
    prev = ct.zeros((TILE,), ct.int32)
    if t > 0:
        while ct.load(flags, (t - 1,), (1,), memory_order=MO.ACQUIRE,
                      memory_scope=MS.DEVICE).item() == 0:
            pass
        prev = ct.load(data, (t - 1,), (TILE,))
    ct.store(data, (t,), prev + 1)
    ct.store(flags, (t,), ct.full((1,), 1, ct.int32), memory_order=MO.RELEASE,
             memory_scope=MS.DEVICE)


@pytest.mark.parametrize("order", ["sequential", "random"])
def test_a_protocol_on_blocks_already_run_works_in_any_block_order(order):
    """Tile numbers from an atomic counter: a tile only waits for tiles that
    blocks which started earlier took, so the interpreter never waits."""
    counter, flags, data = np.zeros(1, np.int32), np.zeros(5, np.int32), np.zeros(40, np.int32)
    ct.launch(None, (5,), chained, (counter, flags, data, 8))
    (fn,) = chained._ir.values()
    counter[0], flags[:], data[:] = 0, 0, 0
    run_function(fn, (5, 1, 1), [counter, flags, data], block_order=order, seed=1)
    np.testing.assert_array_equal(data, np.repeat(np.arange(1, 6), 8))
    np.testing.assert_array_equal(flags, 1)
