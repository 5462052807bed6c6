"""The load-hoisting pass: reads move up past independent work, never past a
write to the same array or a control-flow op, and results do not change."""
import numpy as np

import tilecore as ct


def _op_names(kernel):
    (fn,) = kernel._ir.values()
    return [op.name for op in fn.body.ops]


@ct.kernel
def norm_rows(x, w, y, N: ct.Constant[int]):
    row = ct.bid(0)
    t = ct.load(x, index=(row, 0), shape=(1, N))
    d = t - ct.sum(t, axis=1, keepdims=True) / N
    wt = ct.load(w, index=(0,), shape=(N,))
    ct.store(y, index=(row, 0), tile=d * wt)


def test_load_moves_above_reduction_and_result_is_unchanged():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 8)).astype(np.float32)
    w = rng.standard_normal(8).astype(np.float32)
    y = np.zeros_like(x)
    ct.launch(None, (3,), norm_rows, (x, w, y, 8))
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(y, (x64 - x64.mean(1, keepdims=True)) * w, rtol=1e-6, atol=1e-6)
    names = _op_names(norm_rows)
    assert names.index("load", names.index("load") + 1) < names.index("reduce")


@ct.kernel
def read_after_write(a, out):
    ct.store(a, index=(0,), tile=ct.full((4,), 7.0, ct.float32))
    s = ct.sum(ct.ones((4,), ct.float32))
    t = ct.load(a, index=(0,), shape=(4,))
    ct.store(out, index=(0,), tile=t + s)


def test_load_stays_after_a_store_to_the_same_array():
    a = np.zeros(4, np.float32)
    out = np.zeros(4, np.float32)
    ct.launch(None, (1,), read_after_write, (a, out))
    np.testing.assert_array_equal(out, np.full(4, 11.0, np.float32))
    names = _op_names(read_after_write)
    assert names.index("store") < names.index("load")


@ct.kernel
def guarded_loop(a, out, LIMIT: ct.Constant[int]):
    acc = ct.zeros((4,), ct.float32)
    for k in range(8):
        if k >= LIMIT:
            break
        acc += ct.load(a, index=(k,), shape=(4,))
    ct.store(out, index=(0,), tile=acc)


def test_load_does_not_move_above_a_break():
    a = np.arange(8, dtype=np.float32)    # two tiles of 4: a third load would be out of bounds
    out = np.zeros(4, np.float32)
    ct.launch(None, (1,), guarded_loop, (a, out, 2))
    np.testing.assert_array_equal(out, a[:4] + a[4:])
    (fn,) = guarded_loop._ir.values()
    loop = next(op for op in fn.body.ops if op.name == "for")
    body = [op.name for op in loop.regions[0].ops]
    assert body.index("if") < body.index("load")
