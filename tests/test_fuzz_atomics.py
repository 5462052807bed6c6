"""The fuzzer's atomics (tilecore/testing/fuzz/atomics.py): what the generator
writes, that its programs pass the interpreter's block-order check, and that
the check catches an old value of a shared address. Interpreter only (fast):
the CI runs of tests/test_fuzz.py compile them."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from tilecore.testing.fuzz import generate, run_program
from tilecore.testing.fuzz.model import OutputSpec, Param, Program
from tilecore.testing.fuzz.tolerance import EXACT

pytestmark = pytest.mark.interpreter_only


@pytest.fixture(scope="module")
def programs():
    return [generate(seed) for seed in range(300)]


def test_the_generator_writes_every_kind_of_atomic(programs):
    features = Counter(f for p in programs for f in p.features if f.startswith("atomic."))
    fns = {f.split(".")[1] for f in features}
    assert {"add", "max", "min", "and", "or", "xor", "xchg", "cas", "view", "raw"} <= fns
    for kind in ("unique", "repeated", "old_used", "data_indices", "reused_array", "rank2",
                 "check_bounds_false", "scope.BLOCK", "order.RELAXED", "order.ACQ_REL"):
        assert features[f"atomic.{kind}"], kind
    dtypes = {f.split(".")[-1] for f in features if f.count(".") >= 2}
    assert {"int32", "int64", "uint32", "uint64", "float32", "float64"} <= dtypes
    share = sum(any(f.startswith("atomic.") for f in p.features) for p in programs)
    assert share >= 0.25 * len(programs)


def test_atomic_programs_do_not_depend_on_block_order(programs, tmp_path):
    picked = [p for p in programs if "atomic.repeated" in p.features
              and p.grid[0] * p.grid[1] * p.grid[2] > 1][:6]
    picked += [p for p in programs if "atomic.old_used" in p.features][:4]
    for prog in picked:
        out = run_program(prog, tmp_path, archs=(), timeout=120)
        assert not out.failed, (prog.seed, out.status, out.detail)


_RACY = """import numpy as np
import tilecore as ct


@ct.kernel
def fuzz_kernel(o0, o1):
    bl = ct.bid(0)
    ct.atomic_add(o0, ct.arange(4) % 2, 1)
    old = ct.atomic_add(o0, ct.zeros((4,), ct.int32) + 1, 1)
    ct.store(o1, index=(bl,), tile=old)
"""


def test_the_block_order_check_catches_old_values_of_shared_addresses(tmp_path):
    """Final contents of an atomically updated array agree in any order; the old
    values of an address several blocks hit do not (why the generator keeps only
    those of addresses hit once in the grid)."""
    prog = Program(0, [Param("o0", "out", base=np.zeros(2, np.int32)),
                       Param("o1", "out", base=np.zeros(32, np.int32))], [], (8, 1, 1),
                   {"o0": OutputSpec(EXACT), "o1": OutputSpec(EXACT)}, text=_RACY)
    out = run_program(prog, tmp_path, archs=())
    assert out.status == "order_dependent" and out.error == "o1", (out.status, out.detail)
