"""Fast launchers: the whole per-call work of a cached GPU launch for one
(kernel, argument signature).

After a specialization has launched once through the general path, its
arguments' kinds are known: which are PyTorch tensors or CuPy arrays (with
which dtype, rank, alignment, unit stride and whole vectors), which are
run-time scalars of which dtype, which are constants. A fast launcher re-checks
exactly those facts (the guards, the device included), reads the flat
parameter values, checks that the arrays' byte extents are disjoint (or that
the general path has checked their overlap: interleaved views), and
launches. `tilecore.launch` calls it first; any failed guard returns False
and the launch takes the general path, which may install a new one.

Two implementations of one behaviour: `_cudriver.FastLaunch` in C (the
default: it reads torch tensors through DLPack's C exchange API where torch
has one, and it halves the Python-side time) and a straight-line Python
function generated from the same specs (when the C extension is absent or
TILECORE_NATIVE=0).
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from ..language.dtypes import DType
from ..runtime.arrays import DeviceArray
from ..runtime.driver import native_module
from ..runtime.overlap import self_overlaps
from ..runtime.streams import handle_attribute, stream_handle
from .classify import normalize_grid

__all__ = ["scalar_spec", "fast_specs", "make_fast_launch", "extents_disjoint"]

FastLaunch = Callable[[Any, Any, Any], bool]


# The Python numbers the general path specializes as a scalar dtype (gpu._scalar_dtype and
# dtypes.constant_dtype): ints by value, floats as float32, bools as bool_. Any other dtype
# takes only its NumPy scalar type.
_PYTHON_NUMBERS = {"int32": "int32", "int64": "int64", "uint64": "uint64", "float32": "float",
                   "bool_": "bool"}


def scalar_spec(dtype: DType) -> Optional[tuple]:
    """("scalar", NumPy scalar type, Python numbers) for a run-time scalar
    parameter of `dtype`: the fast launchers take exactly the values the
    general path gives this specialization, the NumPy scalar of the dtype or
    a Python number of that class ("int32", "int64", "uint64": ints in the
    ranges constant_dtype gives that dtype; "float", "bool"; "": none) and
    hand the value itself to the launcher, which packs it with the
    parameter's C type as the general path does. None for 16-bit and
    smaller floats (raw bits: the general path converts them)."""
    if dtype.is_float and dtype.itemsize <= 2:
        return None
    return ("scalar", dtype.numpy_dtype.type, _PYTHON_NUMBERS.get(dtype.name, ""))


def fast_specs(key: tuple, args: Sequence[Any], device: int, only_device: bool = False,
               written: frozenset[int] = frozenset()) -> Optional[list[tuple]]:
    """One guard spec per argument of specialization `key` (see gpu._scan), or
    None when some argument has no fast form: ("const", type, value),
    `scalar_spec(dtype)` for a run-time scalar, or (library, type, dtype,
    device, ndim, itemsize, aligned, unit stride, whole vectors, written) for
    "torch" and "cupy" arrays and tilecore's own DeviceArray ("tilecore": the
    device-scope algorithms' views of their temporary storage); `written`
    holds the positions of the arrays the kernel writes, whose elements are
    then checked distinct at every launch.

    With `only_device` (the process sees one GPU) an array's device is -1:
    any CUDA tensor is on it (`is_cuda` is a cheaper check than
    `get_device()`), and so is any CuPy array (no device check at all)."""
    specs = []
    for i, (part, value) in enumerate(zip(key, args)):
        if isinstance(part, tuple) and part[0] == "c":
            specs.append(("const", type(value), value))
        elif not isinstance(part, tuple):      # a run-time scalar
            spec = scalar_spec(part)
            if spec is None:
                return None                    # raw-bit scalars: general path
            specs.append(spec)
        else:
            root = type(value).__module__.split(".")[0]
            if root == "tilecore" and type(value) is not DeviceArray or \
                    root not in ("torch", "cupy", "tilecore"):
                return None
            dtype, ndim, aligned, unit, whole, wide = part
            if wide:
                return None                    # 64-bit indices: rare and long, general path
            on = -1 if only_device else device
            specs.append((root, type(value), value.dtype, on, ndim, dtype.itemsize,
                          aligned, unit, whole, i in written))
    return specs


def make_fast_launch(key: tuple, args: Sequence[Any], device: int, validated: dict,
                     launcher: Any, fail: Callable, *, native: bool = True,
                     only_device: bool = False, written: frozenset[int] = frozenset()
                     ) -> Optional[FastLaunch]:
    """The fast launcher for `args` of specialization `key`, or None when some
    argument has no fast form (then every launch takes the general path).
    `validated` holds the arrays' (pointer, shape, strides) whose overlap the
    general path has checked for this specialization (needed only when their
    extents intersect); an empty grid is left to the general path;
    `launcher.launch(stream, gx, gy, gz, values)` returns a CUresult and
    `fail(err, grid)` raises the launch error.
    `native=False` builds the Python version; `only_device`, `written`: see
    fast_specs."""
    specs = fast_specs(key, args, device, only_device, written)
    if specs is None:
        return None
    mod = native_module() if native else None
    if mod is not None:
        target = launcher if isinstance(launcher, mod.Launcher) else launcher.launch
        return mod.FastLaunch(target, specs, validated, fail, normalize_grid, stream_handle,
                              handle_attribute)
    return _python_fast_launch(specs, validated, launcher.launch, fail)


def _array_lines(i: int, spec: tuple, ns: dict) -> list[str]:
    """Guards and reads for an array argument."""
    root, cls, dtype, device, ndim, item, aligned, unit, whole, written = spec
    a = f"a{i}"
    ns[f"T{i}"], ns[f"D{i}"] = cls, dtype
    lines = [f"if type({a}) is not T{i}: return False"]
    if root == "tilecore":  # a DeviceArray: a tuple of its own fields, strides in elements
        on_device = "" if device < 0 else f" or {a}.device_id != {device}"
        read_only = f" or {a}.readonly" if written else ""
        lines += [f"if {a}.dtype is not D{i}{on_device}{read_only}: return False",
                  f"p{i}, sh{i}, st{i} = {a}.ptr, {a}.shape, {a}.strides"]
        item_div = ""
    elif root == "torch":
        on_device = f"not {a}.is_cuda" if device < 0 else f"{a}.get_device() != {device}"
        lines += [f"if {a}.dtype is not D{i} or {on_device}: return False",
                  f"p{i} = {a}.data_ptr()", f"sh{i} = {a}.shape", f"st{i} = {a}.stride()"]
        item_div = ""
    else:
        on_device = "" if device < 0 else f" or m{i}.device_id != {device}"
        lines += [f"m{i} = {a}.data",
                  f"if {a}.dtype != D{i}{on_device}: return False",
                  f"p{i} = m{i}.ptr"]
        if ndim == 1:  # a contiguous 1-D array: its size, without the shape and strides tuples
            lines += [f"if getattr({a}, '_c_contiguous', False) and {a}.ndim == 1 "
                      f"and {a}.size > 1: sh{i}, st{i} = ({a}.size,), ({item},)",
                      f"else: sh{i}, st{i} = {a}.shape, {a}.strides"]
        else:
            lines += [f"sh{i} = {a}.shape", f"st{i} = {a}.strides"]
        item_div = f" // {item}"
    lines.append(f"if len(sh{i}) != {ndim}: return False")
    if ndim:  # int32 holds every dim and stride (else: a wide specialization)
        lines.append(f"if max(sh{i}) >= 2147483648: return False")
    strides = [f"st{i}[{d}]{item_div}" for d in range(ndim)]
    if ndim:
        lines.append(f"if not all(-2147483648 < s < 2147483648 for s in "
                     f"{_tuple(strides)}): return False")
    if aligned:
        checks = [f"p{i} & 15"] + [f"({s} * {item}) & 15" for s in strides[:-1]]
        lines.append(f"if {' or '.join(checks)}: return False")
    else:
        checks = [f"p{i} & 15 == 0"] + [f"({s} * {item}) & 15 == 0" for s in strides[:-1]]
        lines.append(f"if {' and '.join(checks)}: return False  # now aligned: respecialize")
    if written:  # elements the kernel writes must be distinct (else: the general path)
        lines.append(f"if not DISTINCT(sh{i}, {_tuple(strides)}): return False")
    if ndim:
        lines.append(f"if ({strides[-1]} == 1) is not {unit}: return False")
        lines.append(f"if (sh{i}[{ndim - 1}] * {item} & 15 == 0) is not {whole}: return False")
    return lines


def extents_disjoint(layout: Sequence[int], arrays: Sequence[tuple[int, int]]) -> bool:
    """Whether no two non-empty arrays' byte extents intersect. `layout` holds,
    per array, the pointer, the dims and the element strides; `arrays` gives
    each array's (ndim, itemsize) in the same order."""
    spans: list[tuple[int, int]] = []
    at = 0
    for ndim, item in arrays:
        ptr, dims, strides = layout[at], layout[at + 1:at + 1 + ndim], \
            layout[at + 1 + ndim:at + 1 + 2 * ndim]
        at += 1 + 2 * ndim
        if 0 in dims:
            continue
        first = sum(min(0, (n - 1) * s) for n, s in zip(dims, strides))
        last = sum(max(0, (n - 1) * s) for n, s in zip(dims, strides))
        lo, hi = ptr + first * item, ptr + (last + 1) * item
        if any(lo < h and l < hi for l, h in spans):
            return False
        spans.append((lo, hi))
    return True


def distinct_elements(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether a view's elements are provably distinct by the quick rule of
    runtime/overlap.py, in elements (views it cannot decide take the general
    path, which enumerates them)."""
    return not self_overlaps(shape, strides, 1, exact=False)


_GRID_AND_LAUNCH = """\
    if layout not in VALIDATED and not DISJOINT(layout, ARRAYS): return False
    if type(grid) is tuple and len(grid) == 1 and type(grid[0]) is int and 0 < grid[0] < 2147483648:
        gx, gy, gz = grid[0], 1, 1
    else:
        gx, gy, gz = GRID(grid)
        if not (gx and gy and gz): return False
    if stream is None: h = 0
    elif type(stream) is int and stream >= 0: h = stream
    else: h = HANDLE(stream)
    err = LAUNCH(h, gx, gy, gz, values)
    if err: FAIL(err, (gx, gy, gz))
    return True"""


# what a Python number must be to take a scalar spec's fast path (see scalar_spec)
_PYTHON_GUARDS = {
    "int32": "type({a}) is int and -2147483648 <= {a} < 2147483648",
    "int64": "type({a}) is int and (-9223372036854775808 <= {a} < -2147483648 or "
             "2147483648 <= {a} < 9223372036854775808)",
    "uint64": "type({a}) is int and 9223372036854775808 <= {a} < 18446744073709551616",
    "float": "type({a}) is float", "bool": "type({a}) is bool", "": "",
}


def _tuple(items: list[str]) -> str:
    return f"({', '.join(items)}{',' if len(items) == 1 else ''})"


def _python_fast_launch(specs: list[tuple], validated: dict, launch: Callable,
                        fail: Callable) -> FastLaunch:
    """The fast launcher as one generated straight-line Python function."""
    ns: dict = {"VALIDATED": validated, "LAUNCH": launch, "FAIL": fail, "GRID": normalize_grid,
                "HANDLE": stream_handle, "DISJOINT": extents_disjoint, "DISTINCT": distinct_elements,
                "ARRAYS": [(spec[4], spec[5]) for spec in specs
                           if spec[0] in ("torch", "cupy", "tilecore")]}
    body: list[str] = []
    values: list[str] = []
    layout: list[str] = []  # the arrays' pointers, shapes and strides
    for i, spec in enumerate(specs):
        a = f"a{i}"
        if spec[0] == "const":
            ns[f"CT{i}"], ns[f"C{i}"] = spec[1], spec[2]
            # identity first, as the C launcher's PyObject_RichCompareBool: a NaN
            # constant (a float min/max identity) passed again is the same object
            body.append(f"if type({a}) is not CT{i} or ({a} is not C{i} and {a} != C{i}): "
                        f"return False")
        elif spec[0] == "scalar":
            ns[f"NP{i}"] = spec[1]
            number = _PYTHON_GUARDS[spec[2]].format(a=a)
            body.append(f"if type({a}) is not NP{i}{f' and not ({number})' if number else ''}: "
                        f"return False")
            values.append(a)
        else:
            body += _array_lines(i, spec, ns)
            ndim, item_div = spec[4], (f" // {spec[5]}" if spec[0] == "cupy" else "")
            fields = [f"p{i}"] + [f"sh{i}[{d}]" for d in range(ndim)] + \
                [f"st{i}[{d}]{item_div}" for d in range(ndim)]
            values += fields
            layout += fields
    src = ["def fast_launch(stream, grid, args):",
           f"    if type(args) is not tuple or len(args) != {len(specs)}: return False"]
    if specs:
        src.append(f"    {', '.join(f'a{i}' for i in range(len(specs)))}"
                   f"{',' if len(specs) == 1 else ''} = args")
    src += [f"    {line}" for line in body]
    src.append(f"    values = {_tuple(values)}")
    src.append(f"    layout = {_tuple(layout)}")
    src.append(_GRID_AND_LAUNCH)
    exec("\n".join(src), ns)  # noqa: S102 - generated from the argument specs above
    return ns["fast_launch"]
