"""User operators that are a well-known operator written out run as that
operator in DeviceScan (algorithms/op_recognition.py), in the user operator's
own accumulator type: which spellings are recognized, and that the scans give
the well-known operator's results (a float32 `a + b` the built-in sum's bits;
an unrecognized operator may fold in another association)."""
import operator

import numpy as np
import pytest

import tilecore as ct
from tilecore.algorithms import DeviceScan as S
from tilecore.algorithms.op_recognition import recognized_operator
from tilecore.language import dtypes as D
from test_scan import GROUPS, by_key_ref, run, runs_of, seq_scan


def add_def(x, y):
    """The sum of two tiles."""
    return y + x


def add_two_statements(a, b):
    total = a + b
    return total


def max_call(a, b):
    return ct.maximum(b, a)


def min_builtin(a, b):
    return min(a, b)


def three(a, b, c):
    return a + b


@ct.function
def mul_tile_function(a, b):
    return a * b


@ct.kernel
def add_kernel(a, b):
    return a + b


@pytest.mark.parametrize("op, acc, want", [
    (lambda a, b: a + b, D.float32, "add"),
    (add_def, D.int64, "add"),
    (lambda a, b: a * b, D.float64, "mul"),
    (mul_tile_function, D.int32, "mul"),
    (lambda p, q: p ^ q, D.uint32, "xor"),
    (lambda p, q: q & p, D.int64, "and"),
    (lambda p, q: p | q, D.uint64, "or"),
    (max_call, D.int32, "max"),
    (min_builtin, D.int64, "min"),
    (lambda a, b: ct.minimum(a, b), D.uint32, "min"),
    # not recognized: other arithmetic, the same parameter twice, more than one return,
    # three parameters, narrow accumulators, bitwise / min / max of floats
    (lambda a, b: a - b, D.int32, None),
    (lambda a, b: a + a, D.int32, None),
    (lambda a, b: a + b + 1, D.int32, None),
    (add_two_statements, D.float32, None),
    (three, D.int32, None),
    (lambda a, b: a + b, D.int16, None),
    (lambda a, b: a + b, D.bfloat16, None),
    (lambda a, b: ct.maximum(a, b), D.float32, None),
    (min_builtin, D.float64, None),
    (lambda a, b: a ^ b, D.float32, None),
    (operator.add, D.int32, None),          # not a user function (op_name knows it)
    (add_kernel, D.int32, None),            # a kernel is no operator
], ids=lambda v: getattr(v, "__name__", str(v)))
def test_which_spellings_are_recognized(op, acc, want):
    assert recognized_operator(op, acc) == want


class UnhashableAdd:
    """A callable object that cannot be hashed (it defines __eq__ only)."""

    def __eq__(self, other):
        return isinstance(other, UnhashableAdd)

    def __call__(self, a, b):
        return a + b


def test_callable_objects_are_not_recognized_and_never_hashed():
    """Not recognized; and the scan refuses an unhashable operator (its kernels
    are found again by the operator's hash) by name, before it writes anything."""
    assert recognized_operator(UnhashableAdd(), D.int32) is None
    x = np.arange(10, dtype=np.int32)
    y = np.full(10, 7, np.int32)
    for temp in (None, np.zeros(1 << 16, np.uint8)):
        with pytest.raises(TypeError, match='argument "op": .* got an unhashable UnhashableAdd'):
            S.inclusive_scan(temp, x, y, UnhashableAdd(), 10)
    np.testing.assert_array_equal(y, 7)


@pytest.mark.float_scratch("status", "vals")   # float aggregates: rounded as each backend folds
def test_float32_add_lambda_runs_as_the_built_in_sum():
    """Random float32 data (sums rounded, association visible in the bits): the
    lambda's scan is bit for bit the built-in sum's on the two-level groups, the
    same sum written as two statements (a user operator) within rounding."""
    n = 3001
    x = np.random.default_rng(5).normal(size=n).astype(np.float32)
    want = np.cumsum(x.astype(np.float64))
    got = {}
    for name, call in (("sum", lambda t, y: S.inclusive_sum(t, x, y, n)),
                       ("lambda", lambda t, y: S.inclusive_scan(t, x, y, lambda a, b: a + b, n)),
                       ("user", lambda t, y: S.inclusive_scan(t, x, y, add_two_statements, n))):
        y = np.zeros(n, np.float32)
        run(call, y, mode=GROUPS)
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-3)
        got[name] = y
    np.testing.assert_array_equal(got["lambda"].view(np.uint32), got["sum"].view(np.uint32))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint64])
def test_integer_operators_keep_the_value_type(dtype):
    """Recognized integer operators accumulate in the value type, as the user
    operator does (a + b wraps at its width), exclusive with init and by key."""
    n = 1500
    info = np.iinfo(dtype)
    rng = np.random.default_rng(9)
    x = rng.integers(info.max // 4, info.max // 2, n, dtype=dtype, endpoint=True)
    with np.errstate(over="ignore"):
        wrapped = lambda a, b: dtype(a) + dtype(b)   # noqa: E731
        for op, ref in ((lambda a, b: a + b, wrapped),
                        (max_call, lambda a, b: max(a, b)),
                        (lambda a, b: a ^ b, lambda a, b: dtype(a) ^ dtype(b))):
            y = np.zeros(n, dtype)
            run(lambda t, y=y, op=op: S.exclusive_scan(t, x, y, op, dtype(3), n), mode=GROUPS)
            np.testing.assert_array_equal(y, np.array(seq_scan(list(x), ref, dtype(3), True),
                                                      dtype))
        keys = runs_of(n)
        y = np.zeros(n, dtype)
        run(lambda t: S.inclusive_scan_by_key(t, keys, x, y, lambda a, b: a + b, n),
            mode=GROUPS)
        np.testing.assert_array_equal(y, np.array(by_key_ref(keys, list(x), wrapped), dtype))

