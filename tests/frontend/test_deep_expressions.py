"""Expressions as deep as Python compiles them lower without a RecursionError
(issue 13): each form is nested as deeply as CPython's own `compile` accepts at
this point of the stack, and the kernel must give the right result. A nesting
deeper than the lowering has room for is a TileSyntaxError at its statement.

Interpreter only: the time NVRTC takes for such long kernels is another item
of the issue (compile time of long kernels)."""
import ast
import sys

import numpy as np
import pytest

import tilecore as ct
from frontend_helpers import import_module, write_module

pytestmark = pytest.mark.interpreter_only

MODULE = """
import tilecore as ct

T = 2
for _ in range({n}):
    T = (T,)


class O:
    v = 3


o = O()
o.o = o


def f(z):
    return f


f.v = 3


@ct.kernel
def k(a, out):
    x = ct.load(a, index=(0,), shape=(2,))
    c = ct.bid(0) == 0
    y = {expr}
    ct.store(out, index=(0,), tile=y)
"""

X = np.array([1.0, 2.0], np.float32)

# name: (expression of nesting n, the result it gives for x = X)
FORMS = {
    "left-deep sum": (lambda n: " + ".join(["x"] * n), lambda n: X * n),  # exact in float32
    "unary minus": (lambda n: "- " * n + "x", lambda n: X * (-1) ** n),
    "power chain": (lambda n: "x * " + " ** ".join(["2"] + ["1"] * (n - 1)), lambda n: 2 * X),
    "conditional chain": (lambda n: "x if c else " * n + "x + 1", lambda n: X),
    "attribute chain": (lambda n: "x * o" + ".o" * n + ".v", lambda n: 3 * X),
    "call chain": (lambda n: "x * f" + "(1)" * n + ".v", lambda n: 3 * X),
    "subscript chain": (lambda n: "x * T" + "[0]" * n, lambda n: 2 * X),
    "nested calls": (lambda n: "ct.abs(" * n + "-x" + ")" * n, lambda n: X),
    "nested parentheses": (lambda n: "(x + " * n + "x" + ")" * n, lambda n: (n + 1) * X),
    "nested tuples": (lambda n: "(" * n + "x" + ",)" * n + "[0]" * n, lambda n: X),
}


def _deepest(path, make):
    """The deepest `make(n)` CPython compiles from here, and its module's code.
    Python's own AST must hold it too (`ast.parse`, which the front end reads):
    CPython 3.12 compiles subscript chains about 10,000 deep, while its AST
    construction stops near 6,000 (measured with 3.12.1)."""
    def code(n):
        source = MODULE.format(n=n, expr=make(n))
        try:
            ast.parse(source)
            return compile(source, str(path), "exec")
        except (RecursionError, SyntaxError, MemoryError):
            return None
    lo, hi = 1, 20000
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if code(mid) is not None else (lo, mid - 1)
    return lo, code(lo)


def _deepest_kernel(tmp_path, form):
    make, _ = FORMS[form]
    path = tmp_path / "deep_kernel.py"
    n, code = _deepest(path, make)
    write_module(path, MODULE.format(n=n, expr=make(n)))   # the source capture reads it
    namespace = {"__name__": f"tc_deep_{tmp_path.name}"}
    exec(code, namespace)
    return n, namespace["k"]


@pytest.mark.parametrize("form", list(FORMS))
def test_deepest_expressions_python_compiles_lower(tmp_path, form):
    n, kernel = _deepest_kernel(tmp_path, form)
    paren_limit = "parenthes" in form or form in ("nested calls", "nested tuples")
    assert n >= (190 if paren_limit else 2000), n   # Python's limits: 200 and ~3 x 1000
    out = np.zeros(2, np.float32)
    ct.launch(None, (1,), kernel, (X, out))
    np.testing.assert_array_equal(out, FORMS[form][1](n))


def test_a_sum_of_2500_terms(tmp_path):
    """The issue's case (600 terms used to raise a RecursionError)."""
    path = write_module(tmp_path / "sum2500.py", MODULE.format(n=1, expr=" + ".join(["x"] * 2500)))
    kernel = import_module(path, f"tc_sum_{tmp_path.name}").k
    out = np.zeros(2, np.float32)
    ct.launch(None, (1,), kernel, (X, out))
    np.testing.assert_array_equal(out, 2500 * X)
    sys.modules.pop(f"tc_sum_{tmp_path.name}")


def test_deeper_than_the_lowering_allows_is_a_syntax_error(tmp_path, monkeypatch):
    from tilecore.frontend import deep
    n, kernel = _deepest_kernel(tmp_path, "unary minus")
    monkeypatch.setattr(deep, "FRAMES_PER_LEVEL", 0)   # room for ~1000 frames only
    with pytest.raises(ct.TileSyntaxError) as info:
        ct.launch(None, (1,), kernel, (X, np.zeros(2, np.float32)))
    err = info.value
    assert err.message == ("This statement nests expressions too deeply for the tile compiler "
                           "(more levels than Python itself compiles at the current recursion "
                           "limit)")
    assert (err.loc.line, err.loc.col) == (MODULE.splitlines().index("    y = {expr}") + 1, 4)
