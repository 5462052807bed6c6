"""scan and fold on hand-built IR: the region is evaluated on whole arrays,
combines earlier values on the left, never uses the identity, and gives
results of the declared types."""
import numpy as np
import pytest

from tilecore.errors import TileRuntimeError
from tilecore.interpreter import run_function
from tilecore.interpreter.context import BlockContext
from tilecore.interpreter.rules import RULES
from tilecore.interpreter.scan import combine
from tilecore.ir.ops import OPS
from tilecore.language import dtypes as dt

from interp_builder import FnBuilder, tile

RNG = np.random.default_rng(14)


def test_rules_cover_scan_and_fold():
    assert {"scan", "fold"} <= set(RULES) and set(RULES) == set(OPS)


def _affine_region(b, dtype):
    """(a1, b1) then (a2, b2) -> (a1 * a2, a2 * b1 + b2): map composition."""
    s = tile(dtype)
    with b.region(s, s, s, s) as blk:
        a1, b1, a2, b2 = blk.args
        b.op("yield", [b.binary("mul", a1, a2), b.binary("add", b.binary("mul", a2, b1), b2)])
    return blk


def _sequential(a, bb, axis, reverse):
    """Compose the maps in order along `axis` (int64 arithmetic wrapped to int32)."""
    a, bb = np.moveaxis(a, axis, -1).astype(np.int64), np.moveaxis(bb, axis, -1).astype(np.int64)
    ra, rb = np.empty_like(a), np.empty_like(bb)
    order = range(a.shape[-1] - 1, -1, -1) if reverse else range(a.shape[-1])
    acc = None
    for i in order:
        cur = (a[..., i], bb[..., i])
        acc = cur if acc is None else (
            (acc[0] * cur[0]).astype(np.int32).astype(np.int64),
            (cur[0] * acc[1] + cur[1]).astype(np.int32).astype(np.int64))
        ra[..., i], rb[..., i] = acc
    return (np.moveaxis(ra, -1, axis).astype(np.int32),
            np.moveaxis(rb, -1, axis).astype(np.int32))


def _run_op(name, shape, axis, attrs, result_shape, inputs, region_of):
    """Load the inputs (int32, `shape`), run one scan/fold, store its results."""
    b = FnBuilder()
    ins = [b.array(f"x{i}", dt.int32, len(shape)) for i in range(len(inputs))]
    stored = result_shape or (1,)   # arrays have at least one dimension
    outs = [b.array(f"y{i}", dt.int32, len(stored)) for i in range(len(inputs))]
    zero = b.const(0, dt.int32)
    tiles = [b.load(x, [zero] * len(shape), shape) for x in ins]
    res = b.op(name, tiles, [tile(dt.int32, *result_shape)] * len(inputs),
               regions=[region_of(b)], axis=axis, **attrs)
    res = res if isinstance(res, tuple) else (res,)
    for o, r in zip(outs, res):
        if not result_shape:
            r = b.op("reshape", [r], [tile(dt.int32, 1)], shape=(1,))
        b.store(o, r, [zero] * len(stored))
    results = [np.zeros(stored, np.int32) for _ in inputs]
    run_function(b.build(), (1, 1, 1), [*inputs, *results])
    return [r.reshape(result_shape) for r in results]


@pytest.mark.parametrize("shape, axis", [((64,), 0), ((3, 5, 8), 1), ((4, 16), 0),
                                         ((2, 2, 32), 2), ((1,), 0)])
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_is_ordered_and_ignores_the_identity(shape, axis, reverse):
    a = RNG.integers(-3, 4, shape).astype(np.int32)
    bb = RNG.integers(-99, 100, shape).astype(np.int32)
    # a wrong identity: results must not depend on it (the IR promises they never do)
    ra, rb = _run_op("scan", shape, axis, {"reverse": reverse, "identities": (7, 7)}, shape,
                     [a, bb], lambda b: _affine_region(b, dt.int32))
    ea, eb = _sequential(a, bb, axis, reverse)
    np.testing.assert_array_equal(ra, ea)
    np.testing.assert_array_equal(rb, eb)


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("shape, axis", [((32,), 0), ((4, 8, 2), 1), ((16, 4), 0)])
def test_fold_is_ordered(shape, axis, keepdims):
    a = RNG.integers(-3, 4, shape).astype(np.int32)
    bb = RNG.integers(-99, 100, shape).astype(np.int32)
    out_shape = tuple(1 if i == axis else s for i, s in enumerate(shape) if keepdims or i != axis)
    ra, rb = _run_op("fold", shape, axis, {"keepdims": keepdims, "identities": (1, 0)},
                     out_shape, [a, bb], lambda b: _affine_region(b, dt.int32))
    ea, eb = _sequential(a, bb, axis, False)
    last = np.take(ea, [shape[axis] - 1], axis), np.take(eb, [shape[axis] - 1], axis)
    np.testing.assert_array_equal(ra, last[0].reshape(out_shape))
    np.testing.assert_array_equal(rb, last[1].reshape(out_shape))


def test_region_with_constants_where_and_block_index():
    """max(l, r) + bid, as where(l > r, l, r) + bid: constants and the block index
    are evaluated once and broadcast against the element-wise operands."""
    def region_of(b):
        s = tile(dt.int32)
        with b.region(s, s) as blk:
            left, right = blk.args
            cond = b.compare("gt", left, right)
            m = b.op("where", [cond, left, right], [s])
            bid = b.op("bid", [], [s], axis=0)
            shift = b.op("reshape", [b.binary("mul", bid, b.const(0, dt.int32))], [s], shape=())
            b.op("yield", [b.binary("add", m, shift)])
        return blk
    x = RNG.integers(-1000, 1000, (8, 16)).astype(np.int32)
    (r,) = _run_op("scan", (8, 16), 1, {"reverse": False, "identities": (-2**31,)}, (8, 16),
                   [x], region_of)
    np.testing.assert_array_equal(r, np.maximum.accumulate(x, 1))


def test_combine_evaluates_the_region_on_arrays():
    b = FnBuilder()
    region = _affine_region(b, dt.int64)
    ctx = BlockContext((0, 0, 0), (1, 1, 1), {}, RULES, {})
    la, lb = np.array([2, 3], np.int64), np.array([5, 7], np.int64)
    ra, rb = np.array([10, 1], np.int64), np.array([1, 2], np.int64)
    out = combine(ctx, region, [la, lb], [ra, rb])
    np.testing.assert_array_equal(out[0], [20, 3])
    np.testing.assert_array_equal(out[1], [51, 9])


def test_a_region_yielding_another_dtype_is_reported():
    """The interpreter checks results against the IR's types (a front-end bug)."""
    def region_of(b):
        s = tile(dt.int32)
        with b.region(s, s) as blk:
            f = b.op("astype", [blk.args[0]], [tile(dt.float32)], dtype=dt.float32)
            b.op("yield", [f])
        return blk
    x = np.arange(8, dtype=np.int32)
    with pytest.raises(TileRuntimeError, match="scan"):
        _run_op("scan", (8,), 0, {"reverse": False, "identities": (0,)}, (8,), [x], region_of)
