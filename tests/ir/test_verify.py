"""The IR verifier: it accepts what the front end produces and names the
broken invariant, with the op's location, for hand-made bad IR."""
import numpy as np
import pytest

import tilecore as ct
from tilecore.errors import Loc
from tilecore.ir.core import Block, Function, Op, Param, Value
from tilecore.ir.types import ArrayType, TileType
from tilecore.ir.verify import IRVerificationError, verify
from tilecore.language import dtypes as D

F32 = TileType(D.float32, (4,))
I32 = TileType(D.int32, ())
LOC = Loc("k.py", 3, 4, None, "k")


def _fn(ops, params=()):
    return Function("k", list(params), Block([], ops), LOC)


def test_front_end_output_verifies():
    @ct.kernel
    def k(x, out):
        acc = ct.zeros((4,), ct.float32)
        for i in range(3):
            if i == 1:
                continue
            acc += ct.load(x, (i,), (4,))
        ct.store(out, (0,), acc)

    ct.launch(None, (1,), k, (np.ones(12, np.float32), np.zeros(4, np.float32)))
    (fn,) = k._ir.values()
    assert verify(fn) is fn


def test_use_before_definition():
    a, b = Value(F32, 0), Value(F32, 1)
    ops = [Op("binary", (a, a), (b,), {"fn": "add"}, (), LOC)]
    with pytest.raises(IRVerificationError, match=r"invalid IR in op 'binary' at k.py:3:5: "
                                                  r"operand %0 is used before it is defined"):
        verify(_fn(ops))


def test_mismatched_operand_types():
    a = Value(F32, 0)
    b = Value(TileType(D.float16, (4,)), 1)
    c = Value(F32, 2)
    ops = [Op("constant", (), (a,), {"value": 1.0}), Op("constant", (), (b,), {"value": 1.0}),
           Op("binary", (a, b), (c,), {"fn": "add"}, (), LOC)]
    with pytest.raises(IRVerificationError, match="operands have different types "
                                                  "tile<float32, 4> and tile<float16, 4>"):
        verify(_fn(ops))


def test_region_without_terminator_and_wrong_yield():
    cond = Value(TileType(D.bool_, ()), 0)
    r = Value(I32, 1)
    one = Value(I32, 2)
    then = Block([], [Op("constant", (), (one,), {"value": 1}), Op("yield", (one,), (), {})])
    missing = Block([], [])
    ops = [Op("constant", (), (cond,), {"value": True}),
           Op("if", (cond,), (r,), {}, (then, missing), LOC)]
    with pytest.raises(IRVerificationError, match="its if region does not end with yield"):
        verify(_fn(ops))
    f = Value(TileType(D.float32, ()), 3)
    wrong = Block([], [Op("constant", (), (f,), {"value": 1.0}), Op("yield", (f,), (), {})])
    ops[1] = Op("if", (cond,), (r,), {}, (then, wrong), LOC)
    with pytest.raises(IRVerificationError, match=r"yields \['float32'\], expected \['int32'\]"):
        verify(_fn(ops))


def test_unknown_op_and_misplaced_terminators():
    with pytest.raises(IRVerificationError, match="unknown op"):
        verify(_fn([Op("frobnicate", (), (), {}, (), LOC)]))
    with pytest.raises(IRVerificationError, match="a terminator must be the last op"):
        verify(_fn([Op("break", (), (), {}, (), LOC), Op("constant", (), (Value(I32, 0),),
                                                           {"value": 0})]))
    cond = Value(TileType(D.bool_, ()), 0)
    stray = Block([], [Op("break", (), (), {}, (), LOC)])
    other = Block([], [Op("yield", (), (), {})])
    with pytest.raises(IRVerificationError, match="'break' outside a loop"):
        verify(_fn([Op("constant", (), (cond,), {"value": True}),
                    Op("if", (cond,), (), {}, (stray, other), LOC)]))
    arr = Value(ArrayType(D.float32, 1), 0)
    with pytest.raises(IRVerificationError, match="the function body cannot end with"):
        verify(_fn([Op("yield", (), (), {}, (), LOC)], [Param("x", arr, 0)]))
