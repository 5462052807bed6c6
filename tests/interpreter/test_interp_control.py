"""Structured control flow, scalar parameters, grid queries and block order."""
import numpy as np
import pytest

from tilecore.errors import TileRuntimeError
from tilecore.interpreter import run_function
from tilecore.language import dtypes as dt

from interp_builder import FnBuilder, tile

I32 = tile(dt.int32)


def _store_scalar(b, out, value, index=None):
    """out[index] = value for a 1-d out array (index defaults to 0)."""
    index = b.const(0, dt.int32) if index is None else index
    t = b.op("reshape", [value], [tile(value.type.dtype, 1)], shape=(1,))
    b.store(out, t, [index])


def run_scalar_kernel(build, dtype=dt.int32, params=()):
    """Build a kernel storing one scalar of `dtype` into out[0]; return it."""
    b = FnBuilder()
    out = b.array("out", dtype, 1)
    scalars = [b.scalar(name, pdt) for name, pdt, _ in params]
    _store_scalar(b, out, build(b, *scalars))
    result = np.zeros(1, dtype.numpy_dtype)
    run_function(b.build(), (1, 1, 1), [result, *(v for _, _, v in params)])
    return result[0]


def _if_else(b, cond, then_value, else_value):
    with b.region() as then:
        b.op("yield", [b.const(then_value, dt.int32)])
    with b.region() as other:
        b.op("yield", [b.const(else_value, dt.int32)])
    return b.op("if", [cond], [I32], regions=[then, other])


@pytest.mark.parametrize("x, expected", [(3, 10), (-3, 20)])
def test_if_yields_the_taken_region(x, expected):
    def build(b, xv):
        return _if_else(b, b.compare("gt", xv, b.const(0, dt.int32)), 10, 20)
    assert run_scalar_kernel(build, params=[("x", dt.int32, x)]) == expected


def _for(b, lb, ub, step, inits, body, iv_dtype=dt.int32):
    """for iv in range(lb, ub, step) with carried values; body(b, iv, *carried)."""
    bounds = [b.const(v, iv_dtype) for v in (lb, ub, step)]
    with b.region(tile(iv_dtype), *(v.type for v in inits)) as blk:
        body(b, *blk.args)
    return b.op("for", [*bounds, *inits], [v.type for v in inits], regions=[blk])


def _if_then_terminates(b, cond, kind, values):
    """if cond: <kind>(values)  (else falls through with an empty yield)."""
    with b.region() as then:
        b.op(kind, values)
    with b.region() as other:
        b.op("yield", [])
    b.op("if", [cond], [], regions=[then, other])


def test_for_sums_with_int64_induction_variable():
    def body(b, iv, acc):
        # The interpreter checks every result's dtype: this fails if iv is not int64.
        b.op("reshape", [iv], [tile(dt.int64, 1)], shape=(1,))
        b.op("yield", [b.binary("add", acc, iv)])

    def build(b):
        return _for(b, 3, 20, 4, [b.const(0, dt.int64)], body, iv_dtype=dt.int64)
    assert run_scalar_kernel(build, dt.int64) == sum(range(3, 20, 4))


def test_for_with_empty_range_returns_init():
    def build(b):
        return _for(b, 5, 5, 1, [b.const(42, dt.int32)],
                    lambda b, iv, acc: b.op("yield", [iv]))
    assert run_scalar_kernel(build) == 42


def test_break_inside_if_inside_for():
    def body(b, iv, acc):
        _if_then_terminates(b, b.compare("eq", iv, b.const(7, dt.int32)), "break", [acc])
        b.op("yield", [b.binary("add", acc, iv)])

    def build(b):
        return _for(b, 0, 100, 1, [b.const(0, dt.int32)], body)
    assert run_scalar_kernel(build) == sum(range(7))


def test_continue_inside_if_inside_for():
    def body(b, iv, acc):
        odd = b.binary("mod", iv, b.const(2, dt.int32))
        _if_then_terminates(b, b.compare("eq", odd, b.const(1, dt.int32)), "continue", [acc])
        b.op("yield", [b.binary("add", acc, iv)])

    def build(b):
        return _for(b, 0, 10, 1, [b.const(0, dt.int32)], body)
    assert run_scalar_kernel(build) == 0 + 2 + 4 + 6 + 8


def test_break_in_inner_loop_only_leaves_inner_loop():
    def inner(b, j, acc):
        _if_then_terminates(b, b.compare("ge", j, b.const(3, dt.int32)), "break", [acc])
        b.op("yield", [b.binary("add", acc, b.const(1, dt.int32))])

    def outer(b, i, acc):
        b.op("yield", [_for(b, 0, 100, 1, [acc], inner)])

    def build(b):
        return _for(b, 0, 4, 1, [b.const(0, dt.int32)], outer)
    assert run_scalar_kernel(build) == 4 * 3


def test_while_runs_until_break():
    def build(b):
        with b.region(I32) as blk:
            (x,) = blk.args
            _if_then_terminates(b, b.compare("gt", x, b.const(100, dt.int32)), "break", [x])
            b.op("yield", [b.binary("mul", x, b.const(2, dt.int32))])
        return b.op("while", [b.const(1, dt.int32)], [I32], regions=[blk])
    assert run_scalar_kernel(build) == 128


def test_for_with_non_positive_step_raises():
    def build(b):
        return _for(b, 0, 10, 0, [b.const(0, dt.int32)], lambda b, iv, a: b.op("yield", [a]))
    with pytest.raises(TileRuntimeError, match=r"The step of range\(\) must be strictly positive, "
                                               r"got 0 \(block \(0, 0, 0\)\)"):
        run_scalar_kernel(build)


def test_scalar_params_are_converted_to_their_dtype():
    def build(b, alpha, n):
        scaled = b.binary("mul", alpha, b.const(2.0, dt.float32))
        as_f = b.op("astype", [n], [tile(dt.float32)], dtype=dt.float32)
        return b.binary("add", scaled, as_f)
    got = run_scalar_kernel(build, dt.float32,
                            [("alpha", dt.float32, 0.1), ("n", dt.int32, np.int64(2**32 + 5))])
    assert got == np.float32(np.float32(0.1) * 2) + 5  # n wraps to int32 5


def _grid_kernel():
    """out[bx, by, bz] = encoded (bid, num_blocks); also last[0] = linear block id."""
    b = FnBuilder()
    out, last = b.array("out", dt.int32, 3), b.array("last", dt.int32, 1)
    bids = [b.op("bid", [], [I32], axis=a) for a in range(3)]
    nbs = [b.op("num_blocks", [], [I32], axis=a) for a in range(3)]
    lin = b.binary("add", bids[0], b.binary("mul", nbs[0], b.binary(
        "add", bids[1], b.binary("mul", nbs[1], bids[2]))))
    code = b.binary("add", b.binary("mul", lin, b.const(1000, dt.int32)),
                    b.binary("add", nbs[0], b.binary("mul", nbs[1], b.const(10, dt.int32))))
    t = b.op("reshape", [code], [tile(dt.int32, 1, 1, 1)], shape=(1, 1, 1))
    b.store(out, t, bids)
    _store_scalar(b, last, lin)
    return b.build()


def test_grid_queries_and_sequential_x_fastest_order():
    out, last = np.zeros((3, 2, 2), np.int32), np.zeros(1, np.int32)
    run_function(_grid_kernel(), (3, 2, 2), [out, last])
    x, y, z = np.meshgrid(np.arange(3), np.arange(2), np.arange(2), indexing="ij")
    np.testing.assert_array_equal(out, (x + 3 * (y + 2 * z)) * 1000 + 3 + 2 * 10)
    assert last[0] == 11  # the last block run is (2, 1, 1)


def test_random_block_order_same_result_for_order_independent_kernel():
    results = []
    for order, seed in [("sequential", None), ("random", 0), ("random", 1)]:
        out, last = np.zeros((3, 2, 2), np.int32), np.zeros(1, np.int32)
        run_function(_grid_kernel(), (3, 2, 2), [out, last], block_order=order, seed=seed)
        results.append((out, last[0]))
    for out, _ in results[1:]:
        np.testing.assert_array_equal(out, results[0][0])
    # `last` depends on block order: the random orders expose that.
    assert {r[1] for r in results} != {11}


def test_block_order_is_validated():
    with pytest.raises(ValueError, match="block_order must be one of"):
        run_function(_grid_kernel(), (1, 1, 1), [np.zeros((1, 1, 1), np.int32),
                                                 np.zeros(1, np.int32)], block_order="reverse")


def test_array_dim_and_stride_in_elements():
    b = FnBuilder()
    arr, out = b.array("arr", dt.float64, 2), b.array("out", dt.int32, 1)
    vals = [b.op(name, [arr], [I32], axis=a) for name in ("array_dim", "array_stride")
            for a in (0, 1)]
    for k, v in enumerate(vals):
        _store_scalar(b, out, v, b.const(k, dt.int32))
    base = np.zeros((10, 12))
    result = np.zeros(4, np.int32)
    run_function(b.build(), (1, 1, 1), [base[::2, ::3], result])
    assert result.tolist() == [5, 4, 24, 3]


def test_result_type_mismatch_is_reported():
    b = FnBuilder()
    out = b.array("out", dt.int32, 1)
    bad = b.op("constant", [], [tile(dt.int32, 4)], value=1)  # constant is a scalar
    b.store(out, bad, [b.const(0, dt.int32)])
    with pytest.raises(TileRuntimeError, match=r"constant\(\) produced a int32 array of "
                                               r"shape \(\), but its IR result"):
        run_function(b.build(), (1, 1, 1), [np.zeros(4, np.int32)])
