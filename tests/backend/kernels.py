"""Hand-built test kernels covering every IR op, for each dtype."""
from __future__ import annotations

from tilecore.ir.types import TileType
from tilecore.language import dtypes as D
from tilecore.language.enums import PaddingMode

from ir_builder import Builder

I32 = TileType(D.int32, ())
INT_BINARY = ("add", "sub", "mul", "floordiv", "mod", "pow", "minimum", "maximum",
              "bitand", "bitor", "bitxor", "lshift", "rshift")
FLOAT_BINARY = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "atan2",
                "minimum", "maximum")
FLOAT_UNARY = ("neg", "abs", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos",
               "tan", "sinh", "cosh", "tanh", "floor", "ceil")
ARITH_FLOATS = ("float16", "float32", "float64", "bfloat16")


def _t(dt, *shape) -> TileType:
    return TileType(dt, tuple(shape))


def dtype_kernel(dt: D.DType) -> Builder:
    """Every op that applies to `dt`: load/store (2-d, permuted order, padding),
    gather/scatter (masked), astype both ways, compare/where, data movement,
    and for arithmetic dtypes every unary/binary/reduce/argreduce."""
    b = Builder(f"all_{dt.name}")
    x = b.array("x", dt, 2)
    y = b.array("y", dt, 2)
    idx = b.array("idx", D.int64, 1)
    s = b.param("s", dt)
    bx = b.op("bid", (), (I32,), axis=0)
    by = b.op("num_blocks", (), (I32,), axis=1)
    b.op("array_dim", (x,), (I32,), axis=1)
    b.op("array_stride", (x,), (I32,), axis=0)
    t = b.load(x, [bx, by], (16, 32), padding=PaddingMode.ZERO)
    tp = b.load(x, [by, bx], (32, 16), order=(1, 0), padding=PaddingMode.UNDETERMINED)
    f = b.op("astype", (t,), (_t(D.float32, 16, 32),), dtype=D.float32)
    back = b.op("astype", (f,), (_t(dt, 16, 32),), dtype=dt)
    sb = b.op("broadcast", (s,), (_t(dt, 16, 32),), shape=(16, 32))
    cond = b.op("compare", (t, sb), (_t(D.bool_, 16, 32),), fn="lt")
    w = b.op("where", (cond, back, sb), (_t(dt, 16, 32),))
    row = b.load(y, [bx, bx], (1, 32))
    rb = b.op("broadcast", (row,), (_t(dt, 16, 32),), shape=(16, 32))
    w = b.op("where", (cond, w, rb), (_t(dt, 16, 32),))
    perm = b.op("permute", (tp,), (_t(dt, 16, 32),), axes=(1, 0))
    w = b.op("where", (cond, w, perm), (_t(dt, 16, 32),))
    flat = b.op("reshape", (w,), (_t(dt, 512),), shape=(512,))
    b.store(y, w, [bx, by])
    b.store(y, tp, [by, bx], order=(1, 0), check_bounds=False)
    ii = b.op("iota", (), (_t(D.int64, 512),), shape=(512,), dtype=D.int64)
    g = b.load(idx, [bx], (512,))
    m = b.op("compare", (g, ii), (_t(D.bool_, 512),), fn="ne")
    zero = b.op("iota", (), (_t(D.int32, 512),), shape=(512,), dtype=D.int32)
    gat = b.op("gather", (x, s, g, zero, m), (_t(dt, 512),), has_mask=True, check_bounds=True)
    b.op("scatter", (y, gat, g, zero), (), has_mask=False, check_bounds=True)
    b.op("scatter", (y, flat, g, zero, m), (), has_mask=True, check_bounds=False)
    one = b.op("gather", (x, s, bx, bx), (_t(dt, ),), has_mask=False, check_bounds=True)
    b.op("scatter", (y, one, bx, bx), (), has_mask=False, check_bounds=True)
    if not dt.arithmetic or dt.is_bool:
        if dt.is_bool:
            inv = b.op("unary", (t,), (t.type,), fn="invert")
            for fn in ("bitand", "bitor", "bitxor"):
                inv = b.binary(fn, inv, t)
            b.store(y, inv, [bx, by])
        return b
    binary = INT_BINARY if dt.is_integer else FLOAT_BINARY
    unary = ("neg", "invert", "abs") if dt.is_integer else FLOAT_UNARY
    acc = t
    for fn in binary:
        acc = b.binary(fn, acc, t)
    for fn in unary:
        acc = b.op("unary", (acc,), (acc.type,), fn=fn)
    if dt.is_float:
        b.op("unary", (acc,), (_t(D.bool_, 16, 32),), fn="isnan")
    for fn in ("sum", "prod", "max", "min"):
        full = b.op("reduce", (acc,), (_t(dt),), fn=fn, axes=(0, 1), keepdims=False)
        rows = b.op("reduce", (acc,), (_t(dt, 16, 1),), fn=fn, axes=(1,), keepdims=True)
        cols = b.op("reduce", (acc,), (_t(dt, 32),), fn=fn, axes=(0,), keepdims=False)
        b.op("scatter", (y, full, bx, bx), (), has_mask=False, check_bounds=True)
        b.store(y, rows, [bx, by])
        b.store(y, b.op("reshape", (cols,), (_t(dt, 1, 32),), shape=(1, 32)), [bx, by])
    for fn in ("argmax", "argmin"):
        a_all = b.op("argreduce", (acc,), (_t(D.int32),), fn=fn, axis=None, keepdims=False)
        a_ax = b.op("argreduce", (acc,), (_t(D.int32, 16),), fn=fn, axis=1, keepdims=False)
        b.op("scatter", (idx, b.op("astype", (a_all,), (_t(D.int64),), dtype=D.int64), bx),
             (), has_mask=False, check_bounds=True)
        b.op("astype", (a_ax,), (_t(D.int64, 16),), dtype=D.int64)
    b.store(y, acc, [bx, by])
    return b


def control_kernel() -> Builder:
    """if/else with results, for with carried values (swap, continue, break), while."""
    from tilecore.ir.core import Block
    b = Builder("control")
    out = b.array("out", D.float32, 1)
    n = b.param("n", D.int32)
    t0 = b.op("iota", (), (_t(D.int32, 256),), shape=(256,), dtype=D.int32)
    a0 = b.op("astype", (t0,), (_t(D.float32, 256),), dtype=D.float32)
    zero, one = b.const(0), b.const(1)
    body = Block()
    iv = b.value(I32)
    ca, cb = b.value(a0.type), b.value(a0.type)
    body.args = [iv, ca, cb]
    res = b.op("for", (zero, n, one, a0, a0), (a0.type, a0.type), regions=(body,))
    with b.region(body):
        big = b.op("compare", (iv, b.const(3)), (_t(D.bool_),), fn="gt")
        then, other = Block(), Block()
        b.op("if", (big,), (), regions=(then, other))
        with b.region(then):
            b.op("break", (cb, ca))
        with b.region(other):
            b.op("yield", ())
        odd = b.op("compare", (b.binary("mod", iv, b.const(2)), one), (_t(D.bool_),), fn="eq")
        t2, e2 = Block(), Block()
        sel = b.op("if", (odd,), (a0.type,), regions=(t2, e2))
        with b.region(t2):
            b.op("continue", (cb, ca))
        with b.region(e2):
            b.op("yield", (b.binary("add", ca, cb),))
        b.op("yield", (cb, sel))
    wbody = Block()
    wc = b.value(I32)
    wbody.args = [wc]
    wres = b.op("while", (zero,), (a0.type,), regions=(wbody,))
    with b.region(wbody):
        nxt = b.binary("add", wc, one)
        done = b.op("compare", (nxt, n), (_t(D.bool_),), fn="ge")
        t3, e3 = Block(), Block()
        b.op("if", (done,), (), regions=(t3, e3))
        with b.region(t3):
            b.op("break", (res[0],))
        with b.region(e3):
            b.op("yield", ())
        b.op("yield", (nxt,))
    total = b.binary("add", res[1], wres)
    b.store(out, total, [zero])
    return b
