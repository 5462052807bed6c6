"""Textual form of the IR, for dumps, error reports and tests."""
from __future__ import annotations

from .core import Block, Function, Op

__all__ = ["format_function"]


def _attr(v) -> str:
    if hasattr(v, "name") and hasattr(v, "itemsize"):
        return v.name
    if hasattr(v, "value") and type(v).__module__.endswith("enums"):
        return f"{type(v).__name__}.{v.name}"
    return repr(v)


def _op(op: Op, indent: str, out: list[str]) -> None:
    res = ", ".join(f"{r!r}: {r.type}" for r in op.results)
    lhs = f"{res} = " if res else ""
    args = ", ".join(repr(o) for o in op.operands)
    attrs = ", ".join(f"{k}={_attr(v)}" for k, v in op.attrs.items())
    attrs = f" {{{attrs}}}" if attrs else ""
    out.append(f"{indent}{lhs}{op.name}({args}){attrs}")
    for i, region in enumerate(op.regions):
        bargs = ", ".join(f"{a!r}: {a.type}" for a in region.args)
        out.append(f"{indent}  ^region{i}({bargs}):")
        _block(region, indent + "    ", out)


def _block(block: Block, indent: str, out: list[str]) -> None:
    for op in block.ops:
        _op(op, indent, out)


def format_function(fn: Function) -> str:
    params = ", ".join(f"{p.name}: {p.value!r}: {p.value.type}" for p in fn.params)
    out = [f"func @{fn.name}({params}) {{"]
    _block(fn.body, "  ", out)
    out.append("}")
    return "\n".join(out)
