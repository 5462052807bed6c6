"""Loop-carried variables that start as loosely typed constants (`acc = 0`) take
the type the loop body gives them, with the same rule at every depth of
nesting (issue 13: two nested loops used to refuse what one loop accepts), in
`for` and `while` loops, for scalars and tiles, through an `if` and through an
inlined tile function; a genuine change of type is an error at every depth.

The kernels are generated (every loop kind x depth x body) into a module."""
import itertools
import sys

import numpy as np
import pytest

import tilecore as ct
from frontend_helpers import import_module, run, write_module

ROWS = 8
X = np.arange(ROWS * 4, dtype=np.float32)

# What the innermost body adds to `acc` for row n (t = row n of X, 4 elements).
BODIES = {
    "scalar": ("acc = acc + ct.sum(t)", lambda n, t: t.sum()),
    "tile": ("acc = acc + t", lambda n, t: t),
    "if": ("if n % 3 == 0:\n    acc = acc + ct.sum(t)", lambda n, t: t.sum() * (n % 3 == 0)),
    "helper": ("acc = accumulate(acc, t)", lambda n, t: t.sum()),
}
PRELUDE = """
import tilecore as ct


def accumulate(acc, t):
    for r in range(2):
        acc = acc + ct.sum(t) * 0.5
    return acc

"""


def _kernel_source(name: str, loop: str, depth: int, init: str, body: str) -> str:
    """`acc = init`, `depth` nested loops of 2 iterations (`for` or `while`),
    the body on row n = the loop indices read as binary digits."""
    idx = "ijk"[:depth]
    lines = [f"@ct.kernel", f"def {name}(x, out):", f"    acc = {init}"]
    pad = "    "
    for v in idx:
        if loop == "for":
            lines.append(f"{pad}for {v} in range(2):")
        else:
            lines += [f"{pad}{v} = 0", f"{pad}while {v} < 2:"]
        pad += "    "
    n = " + ".join(f"{v} * {2 ** (depth - 1 - d)}" for d, v in enumerate(idx))
    lines += [f"{pad}n = {n}", f"{pad}t = ct.load(x, index=(n,), shape=(4,))"]
    lines += [pad + line for line in body.splitlines()]
    if loop == "while":
        for d in reversed(range(depth)):
            lines.append("    " * (d + 2) + f"{idx[d]} += 1")
    lines.append("    ct.store(out, index=(0,), tile=ct.full((4,), 0.0, ct.float32) + acc)")
    return "\n".join(lines) + "\n\n"


CASES = list(itertools.product(("for", "while"), (1, 2, 3), BODIES))


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    """Every case's kernel, and the error cases', in one generated module."""
    path = tmp_path_factory.mktemp("loops") / "tc_loop_kernels.py"
    text = PRELUDE
    for loop, depth, body in CASES:
        text += _kernel_source(f"ok_{loop}_{depth}_{body}", loop, depth, "0", BODIES[body][0])
    for loop, depth in itertools.product(("for", "while"), (1, 2, 3)):
        for kind, body in ERROR_BODIES.items():
            text += _kernel_source(f"bad_{loop}_{depth}_{kind}", loop, depth, "ct.bid(0)", body)
    module = import_module(write_module(path, text), "tc_loop_kernels")
    yield module
    sys.modules.pop("tc_loop_kernels", None)


@pytest.mark.parametrize("loop,depth,body", CASES)
def test_a_constant_takes_the_type_the_loop_gives_it(kernels, loop, depth, body):
    out = np.zeros(4, np.float32)
    run(getattr(kernels, f"ok_{loop}_{depth}_{body}"), [X, out])
    want = sum(BODIES[body][1](n, X[4 * n:4 * n + 4].astype(np.float64))
               for n in range(2 ** depth))
    np.testing.assert_array_equal(out, np.broadcast_to(want, (4,)))


# A scalar that is an int32 value before the loops (not a constant) keeps its type.
ERROR_BODIES = {
    "changes": "acc = acc + ct.sum(t)",
    "branch": "if n % 3 == 0:\n    acc = acc + ct.sum(t)",
    "constant": "acc = 1.5",
}
ERROR_MESSAGES = {
    "changes": "Variable 'acc' changes type inside the loop: it is int32 before the loop and "
               "float32 after an iteration; a loop-carried variable must keep its dtype and shape",
    "branch": "Variable 'acc' has type float32 on one branch of the 'if' and int32 on another; "
              "convert explicitly with astype()",
    "constant": "Variable 'acc' changes type inside the loop: it is int32 before the loop and "
                "becomes a loosely typed constant 1.5; a loop-carried variable must keep its "
                "dtype and shape",
}


@pytest.mark.parametrize("loop,depth,kind", list(itertools.product(("for", "while"), (1, 2, 3),
                                                                   ERROR_BODIES)))
def test_a_genuine_type_change_is_an_error_at_every_depth(kernels, loop, depth, kind):
    kernel = getattr(kernels, f"bad_{loop}_{depth}_{kind}")
    with pytest.raises(ct.TileTypeError) as info:
        run(kernel, [X, np.zeros(4, np.float32)])
    err = info.value
    assert err.message == ERROR_MESSAGES[kind]
    # Reported at the innermost loop (the 'if' for a branch that changes it).
    source = kernels.__loader__.get_source(kernels.__name__).splitlines()
    first = kernel.pyfunc.__code__.co_firstlineno
    heads = [i + 1 for i, line in enumerate(source[first - 1:], first - 1)
             if line.lstrip().startswith(("for ", "while ", "if n"))][:depth + (kind == "branch")]
    assert err.loc.line == heads[-1]
