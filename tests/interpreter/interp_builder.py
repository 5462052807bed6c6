"""A tiny hand builder of IR Functions for the interpreter tests, plus
`eval_op`, which runs one op on given operand arrays."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Optional, Sequence

import numpy as np

from tilecore.errors import Loc
from tilecore.interpreter import RULES
from tilecore.interpreter.context import BlockContext
from tilecore.ir.core import Block, Function, Op, Param, Value
from tilecore.ir.types import ArrayType, TileType
from tilecore.language.dtypes import DType, bool_

TEST_LOC = Loc("kernel.py", 3, 4, 10, "kernel")


def tile(dtype: DType, *shape: int) -> TileType:
    return TileType(dtype, tuple(shape))


class FnBuilder:
    """Builds a Function op by op; `region()` opens a nested block."""

    def __init__(self, name: str = "kernel"):
        self.name = name
        self.params: list[Param] = []
        self._next_id = 0
        self._blocks = [Block()]

    def value(self, ty) -> Value:
        v = Value(ty, self._next_id)
        self._next_id += 1
        return v

    def array(self, name: str, dtype: DType, ndim: int) -> Value:
        return self._param(name, ArrayType(dtype, ndim))

    def scalar(self, name: str, dtype: DType) -> Value:
        return self._param(name, TileType(dtype, ()))

    def _param(self, name: str, ty) -> Value:
        v = self.value(ty)
        self.params.append(Param(name, v, len(self.params)))
        return v

    def op(self, name: str, operands: Sequence[Value], result_types: Sequence = (),
           regions: Sequence[Block] = (), **attrs):
        """Append an op; returns its single result, a tuple of results, or None."""
        results = tuple(self.value(t) for t in result_types)
        self._blocks[-1].ops.append(Op(name, tuple(operands), results, attrs,
                                       tuple(regions), TEST_LOC))
        if not results:
            return None
        return results[0] if len(results) == 1 else results

    @contextmanager
    def region(self, *arg_types):
        blk = Block(args=[self.value(t) for t in arg_types])
        self._blocks.append(blk)
        try:
            yield blk
        finally:
            self._blocks.pop()

    # Shorthands for the ops most tests use.
    def const(self, value, dtype: DType) -> Value:
        return self.op("constant", [], [tile(dtype)], value=value)

    def binary(self, fn: str, a: Value, b: Value) -> Value:
        return self.op("binary", [a, b], [a.type], fn=fn)

    def compare(self, fn: str, a: Value, b: Value) -> Value:
        return self.op("compare", [a, b], [TileType(bool_, a.type.shape)], fn=fn)

    def load(self, arr: Value, index: Sequence[Value], shape: tuple, **attrs) -> Value:
        attrs.setdefault("order", tuple(range(len(shape))))
        attrs.setdefault("steps", shape)
        attrs.setdefault("check_bounds", True)
        return self.op("load", [arr, *index], [TileType(arr.type.dtype, shape)],
                       shape=shape, **attrs)

    def store(self, arr: Value, t: Value, index: Sequence[Value], **attrs) -> None:
        shape = t.type.shape
        attrs.setdefault("order", tuple(range(len(shape))))
        attrs.setdefault("steps", shape)
        attrs.setdefault("check_bounds", True)
        self.op("store", [arr, t, *index], [], shape=shape, **attrs)

    def build(self) -> Function:
        return Function(self.name, self.params, self._blocks[0], TEST_LOC, self._next_id)


def eval_op(name: str, operands: Sequence[tuple[np.ndarray, DType]],
            result: Optional[TileType], **attrs) -> np.ndarray:
    """Run one op on the given (array, dtype) operands, checking its result
    against `result` the way the interpreter does; return the result array."""
    values = [Value(TileType(dt, np.shape(a)), i) for i, (a, dt) in enumerate(operands)]
    res = Value(result, len(values)) if result is not None else None
    op = Op(name, tuple(values), (res,) if res else (), attrs, (), TEST_LOC)
    env = {v: np.asarray(a) for v, (a, _) in zip(values, operands)}
    ctx = BlockContext((0, 0, 0), (1, 1, 1), {}, RULES, env)
    ctx.run_block(Block(ops=[op]), ())
    return env[res] if res else None
