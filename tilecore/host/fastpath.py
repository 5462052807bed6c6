"""Generated launch stubs: the per-call work of a cached GPU launch, as one
straight-line Python function per (kernel, argument signature).

After a specialization has launched once through the general path, its
arguments' kinds are known: which are PyTorch tensors or CuPy arrays (with
which dtype, rank, alignment and unit stride), which are int32 or float32
scalars, which are constants. The stub re-checks exactly those facts (the
guards) and reads the flat parameter values with no loops, dict lookups or
isinstance chains. Any failed guard returns None and the launch takes the
general path, which may install a new stub.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

__all__ = ["make_stub"]

Stub = Callable[[Sequence[Any]], Optional[tuple]]


def _array_lines(i: int, value: Any, dtype, ndim: int, aligned: bool,
                 unit: bool, device: int, ns: dict) -> Optional[list[str]]:
    """Guards and reads for an array argument, or None if its kind has no stub."""
    cls = type(value)
    root = cls.__module__.split(".")[0]
    a = f"a{i}"
    ns[f"T{i}"] = cls
    lines = [f"if type({a}) is not T{i}: return None"]
    if root == "torch":
        ns[f"D{i}"] = value.dtype
        lines += [f"if {a}.dtype is not D{i} or {a}.get_device() != {device}: return None",
                  f"p{i} = {a}.data_ptr()", f"sh{i} = {a}.shape", f"st{i} = {a}.stride()"]
        item_div = ""
    elif root == "cupy":
        ns[f"D{i}"] = value.dtype
        lines += [f"m{i} = {a}.data",
                  f"if {a}.dtype != D{i} or m{i}.device_id != {device}: return None",
                  f"p{i} = m{i}.ptr", f"sh{i} = {a}.shape", f"st{i} = {a}.strides"]
        item_div = f" // {dtype.itemsize}"
    else:
        return None
    lines.append(f"if len(sh{i}) != {ndim}: return None")
    strides = [f"st{i}[{d}]{item_div}" for d in range(ndim)]
    if aligned:
        checks = [f"p{i} & 15"] + [f"({s} * {dtype.itemsize}) & 15" for s in strides[:-1]]
        lines.append(f"if {' or '.join(checks)}: return None")
    else:
        checks = [f"p{i} & 15 == 0"] + [f"({s} * {dtype.itemsize}) & 15 == 0"
                                          for s in strides[:-1]]
        lines.append(f"if {' and '.join(checks)}: return None  # now aligned: respecialize")
    if ndim:
        lines.append(f"if ({strides[-1]} == 1) is not {unit}: return None")
    return lines


def make_stub(key: tuple, args: Sequence[Any], device: int, bits: bool) -> Optional[Stub]:
    """The stub for `args` of specialization `key` (see gpu._scan), or None
    when some argument has no fast form (then every launch takes the general path)."""
    if bits:
        return None  # raw-bit scalars need conversion: general path
    ns: dict = {}
    body: list[str] = []
    values: list[str] = []
    for i, (part, value) in enumerate(zip(key, args)):
        a = f"a{i}"
        if isinstance(part, tuple) and part[0] == "c":
            ns[f"C{i}"] = value
            ns[f"CT{i}"] = type(value)
            body.append(f"if type({a}) is not CT{i} or {a} != C{i}: return None")
        elif not isinstance(part, tuple):      # a run-time scalar
            if part.name == "int32":
                body.append(f"if type({a}) is not int or not -2147483648 <= {a} < 2147483648: "
                            f"return None")
            elif part.name == "float32":
                body.append(f"if type({a}) is not float: return None")
            else:
                return None
            values.append(a)
        else:
            dtype, ndim, aligned, unit = part
            lines = _array_lines(i, value, dtype, ndim, aligned, unit, device, ns)
            if lines is None:
                return None
            body += lines
            item_div = f" // {dtype.itemsize}" if type(value).__module__.startswith("cupy") else ""
            values += [f"p{i}"] + [f"sh{i}[{d}]" for d in range(ndim)] + \
                      [f"st{i}[{d}]{item_div}" for d in range(ndim)]
    names = ", ".join(f"a{i}" for i in range(len(args)))
    src = ["def stub(args):", f"    {names}{',' if len(args) == 1 else ''} = args"]
    src += [f"    {line}" for line in body]
    src.append(f"    return ({', '.join(values)}{',' if len(values) == 1 else ''})")
    exec("\n".join(src), ns)  # noqa: S102 - generated from the argument kinds above
    return ns["stub"]
