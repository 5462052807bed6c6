"""A tiny IR builder for backend tests: hand-built Functions without the front end."""
from __future__ import annotations

from contextlib import contextmanager

from tilecore.errors import Loc
from tilecore.ir.core import Block, Function, Op, Param, Value
from tilecore.ir.types import ArrayType, TileType
from tilecore.language import dtypes as D


class Builder:
    """Appends ops to the current block; `region()` opens nested blocks."""

    def __init__(self, name: str = "k"):
        self.fn = Function(name, [], Block(), loc=Loc("kernel.py", 1, 0))
        self.blocks = [self.fn.body]
        self.line = 1

    def value(self, type) -> Value:
        v = Value(type, self.fn.num_values)
        self.fn.num_values += 1
        return v

    def array(self, name: str, dtype, ndim: int) -> Value:
        v = self.value(ArrayType(dtype, ndim))
        self.fn.params.append(Param(name, v, len(self.fn.params)))
        return v

    def param(self, name: str, dtype) -> Value:
        v = self.value(TileType(dtype, ()))
        self.fn.params.append(Param(name, v, len(self.fn.params)))
        return v

    def op(self, name: str, operands=(), results=(), regions=(), **attrs):
        self.line += 1
        res = tuple(self.value(t) for t in results)
        self.blocks[-1].ops.append(Op(name, tuple(operands), res, attrs, tuple(regions),
                                      Loc("kernel.py", self.line, 4)))
        return res[0] if len(res) == 1 else res

    @contextmanager
    def region(self, block: Block):
        self.blocks.append(block)
        yield block
        self.blocks.pop()

    # conveniences
    def const(self, value, dtype=D.int32) -> Value:
        return self.op("constant", (), (TileType(dtype, ()),), value=value)

    def load(self, arr: Value, index, shape, **attrs) -> Value:
        from tilecore.language.enums import PaddingMode
        a = dict(shape=tuple(shape), order=tuple(range(len(shape))), steps=tuple(shape),
                 padding=PaddingMode.UNDETERMINED, check_bounds=True, latency=None,
                 allow_tma=True)
        a.update(attrs)
        return self.op("load", (arr, *index), (TileType(arr.type.dtype, tuple(a["shape"])),), **a)

    def store(self, arr: Value, tile: Value, index, **attrs) -> None:
        shape = tile.type.shape
        a = dict(shape=tuple(shape), order=tuple(range(len(shape))), steps=tuple(shape),
                 check_bounds=True, latency=None, allow_tma=True)
        a.update(attrs)
        self.op("store", (arr, tile, *index), (), **a)

    def binary(self, fn: str, a: Value, b: Value) -> Value:
        return self.op("binary", (a, b), (a.type,), fn=fn)
