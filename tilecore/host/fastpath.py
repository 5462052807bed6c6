"""Generated fast launchers: the whole per-call work of a cached GPU launch,
as one straight-line Python function per (kernel, argument signature).

After a specialization has launched once through the general path, its
arguments' kinds are known: which are PyTorch tensors or CuPy arrays (with
which dtype, rank, alignment, unit stride and whole vectors), which are
int32 or float32 scalars, which are constants. The generated function
re-checks exactly those facts (the guards), reads the flat parameter values
with no loops, dict lookups or isinstance chains, checks that the arrays are
ones whose device and overlap the general path has checked, and calls
the kernel's launcher. `tilecore.launch` calls it first; any failed guard
returns False and the launch takes the general path, which may install a
new one.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from .classify import normalize_grid
from ..runtime.streams import stream_handle

__all__ = ["make_fast_launch"]

FastLaunch = Callable[[Any, Any, Any], bool]


def _array_lines(i: int, value: Any, dtype, ndim: int, aligned: bool,
                 unit: bool, whole: bool, device: int, ns: dict) -> Optional[list[str]]:
    """Guards and reads for an array argument, or None if its kind has no fast form."""
    cls = type(value)
    root = cls.__module__.split(".")[0]
    a = f"a{i}"
    ns[f"T{i}"] = cls
    lines = [f"if type({a}) is not T{i}: return False"]
    if root == "torch":
        ns[f"D{i}"] = value.dtype
        lines += [f"if {a}.dtype is not D{i} or {a}.get_device() != {device}: return False",
                  f"p{i} = {a}.data_ptr()", f"sh{i} = {a}.shape", f"st{i} = {a}.stride()"]
        item_div = ""
    elif root == "cupy":
        ns[f"D{i}"] = value.dtype
        lines += [f"m{i} = {a}.data",
                  f"if {a}.dtype != D{i} or m{i}.device_id != {device}: return False",
                  f"p{i} = m{i}.ptr", f"sh{i} = {a}.shape", f"st{i} = {a}.strides"]
        item_div = f" // {dtype.itemsize}"
    else:
        return None
    lines.append(f"if len(sh{i}) != {ndim}: return False")
    strides = [f"st{i}[{d}]{item_div}" for d in range(ndim)]
    if aligned:
        checks = [f"p{i} & 15"] + [f"({s} * {dtype.itemsize}) & 15" for s in strides[:-1]]
        lines.append(f"if {' or '.join(checks)}: return False")
    else:
        checks = [f"p{i} & 15 == 0"] + [f"({s} * {dtype.itemsize}) & 15 == 0"
                                          for s in strides[:-1]]
        lines.append(f"if {' and '.join(checks)}: return False  # now aligned: respecialize")
    if ndim:
        lines.append(f"if ({strides[-1]} == 1) is not {unit}: return False")
        lines.append(f"if (sh{i}[{ndim - 1}] * {dtype.itemsize} & 15 == 0) is not {whole}: "
                     f"return False")
    return lines


_GRID_AND_LAUNCH = """\
    if layout not in VALIDATED: return False
    if type(grid) is tuple and len(grid) == 1 and type(grid[0]) is int and 0 < grid[0] < 2147483648:
        gx, gy, gz = grid[0], 1, 1
    else:
        gx, gy, gz = GRID(grid)
    if stream is None: h = 0
    elif type(stream) is int and stream >= 0: h = stream
    else: h = HANDLE(stream)
    err = LAUNCH(h, gx, gy, gz, values)
    if err: FAIL(err, (gx, gy, gz))
    return True"""


def make_fast_launch(key: tuple, args: Sequence[Any], device: int, validated: dict,
                     launch: Callable, fail: Callable) -> Optional[FastLaunch]:
    """The fast launcher for `args` of specialization `key` (see gpu._scan), or
    None when some argument has no fast form (then every launch takes the
    general path). `validated` holds the arrays' (pointer, shape, strides)
    whose device and overlap the general path has checked; `launch(stream, gx, gy, gz, values)` returns
    a CUresult and `fail(err, grid)` raises the launch error."""
    ns: dict = {"VALIDATED": validated, "LAUNCH": launch, "FAIL": fail, "GRID": normalize_grid,
                "HANDLE": stream_handle}
    body: list[str] = []
    values: list[str] = []
    layout: list[str] = []  # the arrays' pointers, shapes and strides
    for i, (part, value) in enumerate(zip(key, args)):
        a = f"a{i}"
        if isinstance(part, tuple) and part[0] == "c":
            ns[f"C{i}"] = value
            ns[f"CT{i}"] = type(value)
            body.append(f"if type({a}) is not CT{i} or {a} != C{i}: return False")
        elif not isinstance(part, tuple):      # a run-time scalar
            if part.name == "int32":
                body.append(f"if type({a}) is not int or not -2147483648 <= {a} < 2147483648: "
                            f"return False")
            elif part.name == "float32":
                body.append(f"if type({a}) is not float: return False")
            else:
                return None                    # raw-bit or 64-bit scalars: general path
            values.append(a)
        else:
            dtype, ndim, aligned, unit, whole = part
            lines = _array_lines(i, value, dtype, ndim, aligned, unit, whole, device, ns)
            if lines is None:
                return None
            body += lines
            item_div = f" // {dtype.itemsize}" if type(value).__module__.startswith("cupy") else ""
            fields = [f"p{i}"] + [f"sh{i}[{d}]" for d in range(ndim)] + \
                [f"st{i}[{d}]{item_div}" for d in range(ndim)]
            values += fields
            layout += fields
    names = ", ".join(f"a{i}" for i in range(len(args)))
    src = ["def fast_launch(stream, grid, args):",
           f"    if type(args) is not tuple or len(args) != {len(args)}: return False"]
    if args:
        src.append(f"    {names}{',' if len(args) == 1 else ''} = args")
    src += [f"    {line}" for line in body]
    src.append(f"    values = ({', '.join(values)}{',' if len(values) == 1 else ''})")
    src.append(f"    layout = ({', '.join(layout)}{',' if len(layout) == 1 else ''})")
    src.append(_GRID_AND_LAUNCH)
    exec("\n".join(src), ns)  # noqa: S102 - generated from the argument kinds above
    return ns["fast_launch"]
