"""The Python subset of tile code (seed 000): control flow, loops, tuples,
assignments, tile-function calls and attribute access run end to end on the
interpreter; everything outside the subset is a TileSyntaxError (or the
matching TileError) with an exact message and the kernel's file:line."""
import numpy as np
import pytest

import tilecore as ct
from frontend_helpers import expect_error, run

F32 = np.float32


def _out(n=4, dtype=F32):
    return np.zeros(n, dtype)


# --- if / elif / else ------------------------------------------------------------------------
@ct.kernel
def if_chain(out):
    b = ct.bid(0)
    if b == 0:
        v = 10
    elif b == 1:
        v = 20
    elif b < 4:
        v = 30
    else:
        v = 40
    ct.store(out, (b,), ct.full((1,), v, ct.int32))


def test_if_elif_else_runtime():
    out = run(if_chain, [_out(6, np.int32)], grid=(6,))[0]
    np.testing.assert_array_equal(out, [10, 20, 30, 30, 40, 40])


@ct.kernel
def if_compile_time(out, MODE: ct.Constant[int]):
    x = ct.zeros((4,), ct.float32)
    if MODE == 0:
        x = x + 1
    elif MODE == 1:
        x = x + 2
    else:
        x = ct.zeros((4,), ct.int32)  # only type-checked when taken
        x = x.astype(ct.float32) + 3
    if not MODE:
        x = x * 10
    ct.store(out, (0,), x)


@pytest.mark.parametrize("mode,want", [(0, 10.0), (1, 2.0), (7, 3.0)])
def test_if_compile_time(mode, want):
    out = run(if_compile_time, [_out(), mode])[0]
    np.testing.assert_array_equal(out, want)


@ct.kernel
def if_branch_types(out, flag):
    t = ct.zeros((4,), ct.float32)
    s = 0          # loose constant on one side, runtime scalar on the other
    if flag > 0:
        t = t + 5
        s = flag * 2
    ct.store(out, (0,), t + s)


def test_if_merges_constant_and_runtime():
    np.testing.assert_array_equal(run(if_branch_types, [_out(), 3])[0], 11.0)
    np.testing.assert_array_equal(run(if_branch_types, [_out(), -1])[0], 0.0)


@ct.kernel
def if_expr(out, flag):
    v = 1.5 if flag > 0 else 2.5
    w = 7 if 3 > 2 else ct.bid(5)  # compile-time condition: the other side is not lowered
    ct.store(out, (0,), ct.full((4,), v + w, ct.float32))


def test_if_expression():
    np.testing.assert_array_equal(run(if_expr, [_out(), 1])[0], 8.5)
    np.testing.assert_array_equal(run(if_expr, [_out(), 0])[0], 9.5)


@ct.kernel
def bool_ops(out, a, b):
    r = 0
    if a > 0 and b > 0:
        r = r + 1
    if a > 0 or b > 0:
        r = r + 10
    if not (a > 0):
        r = r + 100
    ct.store(out, (0,), ct.full((1,), r, ct.int32))


@pytest.mark.parametrize("a,b,want", [(1, 1, 11), (1, 0, 10), (0, 1, 110), (0, 0, 100)])
def test_and_or_not(a, b, want):
    assert run(bool_ops, [_out(1, np.int32), a, b])[0][0] == want


# --- for over range -------------------------------------------------------------------------
@ct.kernel
def range_forms(out, n, lo, hi, step):
    a = 0
    for i in range(n):
        a = a + i
    b = 0
    for i in range(lo, hi):
        b = b + i
    c = 0
    for i in range(lo, hi, step):
        c = c + i
    d = 0
    for i in range(2, 11, 3):      # constant bounds
        d = d + i
    e = 0
    for i in range(5, 2):          # zero trips, compile-time
        e = e + 1
    ct.store(out, (0,), ct.full((1,), a, ct.int32))
    ct.store(out, (1,), ct.full((1,), b, ct.int32))
    ct.store(out, (2,), ct.full((1,), c, ct.int32))
    ct.store(out, (3,), ct.full((1,), d, ct.int32))
    ct.store(out, (4,), ct.full((1,), e, ct.int32))


@pytest.mark.parametrize("n,lo,hi,step", [(5, 3, 9, 2), (0, 7, 7, 1), (1, 9, 3, 4), (3, -4, 4, 3)])
def test_range_forms(n, lo, hi, step):
    out = run(range_forms, [_out(5, np.int32), n, lo, hi, step])[0]
    want = [sum(range(n)), sum(range(lo, hi)), sum(range(lo, hi, step)), sum(range(2, 11, 3)), 0]
    np.testing.assert_array_equal(out, want)


@ct.kernel
def nested_loops(x, out, M: ct.Constant[int], N: ct.Constant[int]):
    acc = ct.zeros((2, 4), ct.float32)
    for i in range(M):
        for j in range(N):
            acc = acc + ct.load(x, (i, j), (2, 4))
    ct.store(out, (0, 0), acc)


def test_nested_loops():
    x = np.arange(6 * 12, dtype=F32).reshape(6, 12)
    out = np.zeros((2, 4), F32)
    run(nested_loops, [x, out, 3, 3])
    np.testing.assert_array_equal(out, x.reshape(3, 2, 3, 4).sum(axis=(0, 2)))


@ct.kernel
def break_continue(out, n):
    s = 0
    for i in range(n):
        if i % 2 == 1:
            continue
        if i > 8:
            break
        s = s + i
    t = 0
    for i in range(100):
        for j in range(100):
            if j >= i:
                break          # inner break only
            t = t + 1
        if i == 5:
            break
    ct.store(out, (0,), ct.full((1,), s, ct.int32))
    ct.store(out, (1,), ct.full((1,), t, ct.int32))


def test_break_continue():
    out = run(break_continue, [_out(2, np.int32), 20])[0]
    np.testing.assert_array_equal(out, [0 + 2 + 4 + 6 + 8, 0 + 1 + 2 + 3 + 4 + 5])


@ct.kernel
def while_loop(out, n):
    i = 0
    s = 0
    while i < n:
        i += 1
        if i == 3:
            continue
        if i > 6:
            break
        s += i
    k = 0
    while True:
        k = k + 2
        if k >= 7:
            break
    ct.store(out, (0,), ct.full((1,), s, ct.int32))
    ct.store(out, (1,), ct.full((1,), k, ct.int32))


@pytest.mark.parametrize("n,want", [(10, 1 + 2 + 4 + 5 + 6), (2, 3), (0, 0)])
def test_while(n, want):
    out = run(while_loop, [_out(2, np.int32), n])[0]
    np.testing.assert_array_equal(out, [want, 8])


@ct.kernel
def loose_then_tile(x, out, N: ct.Constant[int]):
    acc = 0                       # loosely typed constant ...
    for i in range(N):
        acc = acc + ct.load(x, (i,), (4,))   # ... becomes a float32 tile
    m = 0
    for i in range(N):
        m = m + 0.5               # loose int becomes a float32 scalar
    ct.store(out, (0,), acc + m)


def test_loop_carried_constant_becomes_tile():
    x = np.arange(12, dtype=F32)
    out = run(loose_then_tile, [x, _out(), 3])[1]
    np.testing.assert_array_equal(out, x.reshape(3, 4).sum(0) + 1.5)


@ct.kernel
def loop_type_change(x, out):
    acc = ct.zeros((4,), ct.float32)
    for i in range(2):
        acc = ct.zeros((4,), ct.int32)  # LOOP-TYPE
    ct.store(out, (0,), acc)


def test_loop_carried_type_change_is_an_error():
    expect_error(loop_type_change, [_out(), _out()], ct.TileTypeError,
                 "Variable 'acc' changes type inside the loop: it is tile<float32, 4> before "
                 "the loop and tile<int32, 4> after an iteration; a loop-carried variable must "
                 "keep its dtype and shape")


# --- tuples, unpacking, augmented assignment -------------------------------------------------------
@ct.kernel
def tuples(x, out):
    shape = (2, 4)
    a, (b, c) = 1, (2, 3)
    a, b = b, a                    # swap
    a += c
    pair = (ct.load(x, (0, 0), shape), 10)
    t, k = pair
    first = shape[0] * shape[-1] + len(shape) + len(pair)
    both = shape + (1,)
    t *= k
    t -= a + b                     # a = 5, b = 1
    t //= 1.0
    ct.store(out, (0, 0), t + first + both[2])


def test_tuples_and_augmented_assignment():
    x = np.arange(8, dtype=F32).reshape(2, 4)
    out = np.zeros((2, 4), F32)
    run(tuples, [x, out])
    np.testing.assert_array_equal(out, np.floor(x * 10 - 6) + 12 + 1)


# --- tile functions --------------------------------------------------------------------------------
def plain_helper(t, scale=2):
    """Unannotated: becomes a tile function when called from tile code."""
    return t * scale


@ct.function
def annotated_helper(t, n):
    return power_of_two(plain_helper(t), n)


def power_of_two(t, n):
    if n == 0:                     # compile-time recursion ends
        return t
    return power_of_two(t, n - 1) * 2


def early_return(t, flag):
    if flag > 0:                   # run-time condition
        return t + 1
    return t - 1


def returns_tuple(t):
    return t + 1, t.shape[0]


@ct.kernel
def calls(x, out, flag):
    t = ct.load(x, (0,), (4,))
    u = annotated_helper(t, 3)          # (t * 2) * 8
    v = early_return(u, flag)
    w, n = returns_tuple(v)
    ct.store(out, (0,), w + plain_helper(n, scale=1))


@pytest.mark.parametrize("flag,delta", [(1, 1), (0, -1)])
def test_tile_function_calls(flag, delta):
    x = np.arange(4, dtype=F32)
    out = run(calls, [x, _out(), flag])[1]
    np.testing.assert_array_equal(out, x * 16 + delta + 1 + 4)


def test_tile_function_from_host():
    with pytest.raises(TypeError, match=r"annotated_helper\(\) is a tile function and can only "
                                        r"be called from tile code"):
        annotated_helper(1, 2)
    host_ok = ct.function(host=True)(lambda v: v + 1)
    assert host_ok(1) == 2


def endless(t):
    return endless(t)


@ct.kernel
def recursion(out):
    endless(1)  # RECURSE


def test_unbounded_recursion_is_an_error():
    err = expect_error(recursion, [_out()], ct.TileSyntaxError,
                       "Tile function calls nest deeper than 32 levels at the call to endless() "
                       "(recursion must end at compile time)")
    assert "in recursion:" in str(err)


# --- attributes of arrays in tile code ---------------------------------------------------------------
@ct.kernel
def array_attrs(x, out):
    n0, n1 = x.shape
    s0, s1 = x.strides
    ok = 1 if x.dtype == ct.float32 else 0
    v = ct.full((1,), n0 * 1000 + n1 * 100 + s0 * 10 + s1, ct.int32)
    ct.store(out, (0,), v)
    ct.store(out, (1,), ct.full((1,), x.ndim * 10 + ok, ct.int32))


def test_array_attributes():
    x = np.zeros((5, 8), F32)[:, ::3]       # shape (5, 3), strides (8, 3) in elements
    out = run(array_attrs, [x, _out(2, np.int32)])[1]
    np.testing.assert_array_equal(out, [5 * 1000 + 3 * 100 + 8 * 10 + 3, 21])


@ct.kernel
def tile_attrs(x, out):
    t = ct.load(x, (0, 0), (2, 4))
    assert t.shape == (2, 4) and t.ndim == 2 and t.dtype == ct.float32
    n = t.size + t.shape[1]
    ct.store(out, (0, 0), t.T.T + n)


def test_tile_attributes():
    x = np.arange(8, dtype=F32).reshape(2, 4)
    out = np.zeros((2, 4), F32)
    run(tile_attrs, [x, out])
    np.testing.assert_array_equal(out, x + 12)


# --- outside the subset ------------------------------------------------------------------------------
@ct.kernel
def k_lambda(out):
    f = lambda *v: v  # E-LAMBDA  # noqa: E731


@ct.kernel
def k_try(out):
    try:  # E-TRY
        pass
    except Exception:
        pass


@ct.kernel
def k_with(out):
    with open("x"):  # E-WITH
        pass


@ct.kernel
def k_listcomp(out):
    v = [i for i in range(3)]  # E-LISTCOMP


@ct.kernel
def k_return_in_loop(out):
    for i in range(3):
        return  # E-RET-LOOP


@ct.kernel
def k_return_in_while(out, n):
    while n > 0:
        return  # E-RET-WHILE


@ct.kernel
def k_item_assign(x, out):
    t = ct.load(x, (0,), (4,))
    t[0] = 1  # E-ITEM


@ct.kernel
def k_attr_assign(x, out):
    t = ct.load(x, (0,), (4,))
    t.foo = 1  # E-ATTR


@ct.kernel
def k_print(out):
    print(1)  # E-PRINT


@ct.kernel
def k_raise(out):
    raise ValueError("no")  # E-RAISE


@ct.kernel
def k_dict(out):
    d = {1: 2}  # E-DICT


@ct.kernel
def k_for_list(out):
    for i in [1, 2]:  # E-FORLIST
        pass


@ct.kernel
def k_for_else(out):
    for i in range(2):  # E-FORELSE
        pass
    else:
        pass


@ct.kernel
def k_neg_step(out):
    for i in range(10, 0, -1):  # E-NEGSTEP
        pass


@ct.kernel
def k_zero_step(out):
    for i in range(0, 10, 0):  # E-ZEROSTEP
        pass


@ct.kernel
def k_global(out):
    global GLOBAL_X  # E-GLOBAL


@ct.kernel
def k_del(out):
    v = 1
    del v  # E-DEL


@ct.kernel
def k_nested_def(out):
    async def inner():  # E-DEF
        pass


@ct.kernel
def k_array_index(x, out):
    v = x[0]  # E-ARRIDX


@ct.kernel
def k_tile_index(x, out):
    t = ct.load(x, (0,), (4,))
    v = t[0]  # E-TILEIDX


@ct.kernel
def k_undefined(out):
    v = not_defined_anywhere  # E-UNDEF  # noqa: F821


@ct.kernel
def k_maybe_undefined(out):
    if ct.bid(0) > 0:
        y = 1
    ct.store(out, (0,), ct.full((4,), y, ct.float32))  # E-MAYBE


@ct.kernel
def k_loop_var_after(out):
    for i in range(2):
        pass
    ct.store(out, (0,), ct.full((4,), i, ct.float32))  # E-LOOPVAR


@ct.kernel
def k_kernel_returns(x):
    return ct.load(x, (0,), (4,))  # E-KRET


@ct.kernel
def k_range_outside(out):
    r = range(3)  # E-RANGE


@ct.kernel
def k_tile_if(x):
    t = ct.load(x, (0,), (4,))
    if t > 0:  # E-TILEIF
        pass


@ct.kernel
def k_async_comp(out):
    v = (i for i in range(2))  # E-GEN


SUBSET_ERRORS = [
    (k_lambda, 1, ct.TileSyntaxError, "'*args' and '**kwargs' parameters of a nested "
     "function or a lambda are not supported in tile code", "E-LAMBDA"),
    (k_try, 1, ct.TileSyntaxError, "Exception handling ('try') is not supported in tile code",
     "E-TRY"),
    (k_with, 1, ct.TileSyntaxError, "'with' is not supported in tile code", "E-WITH"),
    (k_listcomp, 1, ct.TileSyntaxError, "A list comprehension is not supported in tile code",
     "E-LISTCOMP"),
    (k_return_in_loop, 1, ct.TileSyntaxError,
     "'return' inside a loop is not supported in tile code", "E-RET-LOOP"),
    (k_return_in_while, "n", ct.TileSyntaxError,
     "'return' inside a loop is not supported in tile code", "E-RET-WHILE"),
    (k_item_assign, 2, ct.TileSyntaxError,
     "Item assignment is not supported: tiles are immutable and arrays are written with "
     "tilecore.store or tilecore.scatter", "E-ITEM"),
    (k_attr_assign, 2, ct.TileSyntaxError,
     "Attribute assignment is not supported: objects in tile code are immutable", "E-ATTR"),
    (k_print, 1, ct.TileSyntaxError, "print() is not supported in tile code", "E-PRINT"),
    (k_raise, 1, ct.TileSyntaxError, "'raise' is not supported in tile code", "E-RAISE"),
    (k_dict, 1, ct.TileSyntaxError, "A dict is not supported in tile code", "E-DICT"),
    (k_for_list, 1, ct.TileSyntaxError,
     "Only 'for ... in range(...)' loops are supported in tile code", "E-FORLIST"),
    (k_for_else, 1, ct.TileSyntaxError, "'for ... else' is not supported in tile code",
     "E-FORELSE"),
    (k_neg_step, 1, ct.TileValueError, "The step of range() must be strictly positive, got -1",
     "E-NEGSTEP"),
    (k_zero_step, 1, ct.TileValueError, "The step of range() must be strictly positive, got 0",
     "E-ZEROSTEP"),
    (k_global, 1, ct.TileSyntaxError, "'global' is not supported in tile code", "E-GLOBAL"),
    (k_del, 1, ct.TileSyntaxError, "'del' is not supported in tile code", "E-DEL"),
    (k_nested_def, 1, ct.TileSyntaxError,
     "A nested function definition is not supported in tile code", "E-DEF"),
    (k_array_index, 2, ct.TileSyntaxError,
     "Arrays cannot be indexed in tile code; load tiles with tilecore.load or tilecore.gather",
     "E-ARRIDX"),
    (k_tile_index, 2, ct.TileSyntaxError,
     "Tiles can only be indexed with ':', None and '...' (tiles are not addressable element "
     "by element)", "E-TILEIDX"),
    (k_undefined, 1, ct.TileSyntaxError, "Name 'not_defined_anywhere' is not defined",
     "E-UNDEF"),
    (k_maybe_undefined, 1, ct.TileSyntaxError,
     "Variable 'y' is assigned only on some paths through an 'if'", "E-MAYBE"),
    (k_loop_var_after, 1, ct.TileSyntaxError,
     "Variable 'i' is the variable of a for loop and is not available after it", "E-LOOPVAR"),
    (k_kernel_returns, 1, ct.TileTypeError,
     "A kernel cannot return a value (got a tile of float32 with shape (4,))", "E-KRET"),
    (k_range_outside, 1, ct.TileSyntaxError,
     "range() can only be used as the iterable of a for loop", "E-RANGE"),
    (k_tile_if, 1, ct.TileTypeError,
     "The condition of 'if' must be a scalar, got a tile of shape (4,) (use tilecore.where "
     "for element-wise selection)", "E-TILEIF"),
    (k_async_comp, 1, ct.TileSyntaxError, "A generator expression is not supported in tile code",
     "E-GEN"),
]


@pytest.mark.parametrize("kernel,nargs,cls,message,marker", SUBSET_ERRORS,
                         ids=[e[4] for e in SUBSET_ERRORS])
def test_outside_the_subset(kernel, nargs, cls, message, marker):
    args = [_out(), 3] if nargs == "n" else [_out() for _ in range(nargs)]
    expect_error(kernel, args, cls, message, marker)


def test_errors_are_builtin_subclasses_and_pickle():
    import pickle
    with pytest.raises(SyntaxError) as info:
        ct.launch(None, (1,), k_lambda, (_out(),))
    err = pickle.loads(pickle.dumps(info.value))
    assert type(err) is ct.TileSyntaxError and err.message == info.value.message
    assert str(err) == str(info.value)
    with pytest.raises(TypeError):
        ct.launch(None, (1,), k_kernel_returns, (_out(),))
    with pytest.raises(ValueError):
        ct.launch(None, (1,), k_neg_step, (_out(),))
