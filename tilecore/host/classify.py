"""Classifying a launch's arguments into specialization kinds, with errors
that name the parameter, the expected and the actual value."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..frontend.specialize import ArrayArg, ConstArg, ScalarArg, needs_wide_index
from ..kernel import Kernel, constant_kind
from ..language import dtypes as D
from ..language.dtypes import DType

__all__ = ["normalize_grid", "check_arg_count", "scalar_kind", "is_device_array",
           "classify_non_array", "param_names", "host_array_kind"]


_GRIDS: dict = {}
_INT_ONLY = {int}


def normalize_grid(grid: Any) -> tuple[int, int, int]:
    """A grid of 1 to 3 non-negative ints as a 3-tuple (valid grids are memoized).

    A zero extent is an empty grid: the launch checks its arguments and runs no
    block (as CuPy and PyTorch do for empty inputs, and Triton for empty grids)."""
    ints = type(grid) is tuple and set(map(type, grid)) == _INT_ONLY
    if ints:
        hit = _GRIDS.get(grid)
        if hit is not None:
            return hit
    grid3 = _check_grid(grid)
    if ints and len(_GRIDS) < 4096:
        _GRIDS[grid] = grid3
    return grid3


def _check_grid(grid: Any) -> tuple[int, int, int]:
    items = (grid,) if isinstance(grid, (int, np.integer)) and not isinstance(grid, bool) \
        else grid
    if not isinstance(items, (tuple, list)) or not 1 <= len(items) <= 3 or not all(
            isinstance(g, (int, np.integer)) and not isinstance(g, bool) for g in items):
        raise TypeError(f'Invalid argument "grid" of launch(): expected a tuple of 1 to 3 '
                        f"non-negative ints, got {grid!r}")
    dims = tuple(int(g) for g in items)
    if any(g < 0 for g in dims):
        raise ValueError(f'Invalid argument "grid" of launch(): expected non-negative ints, '
                         f"got {dims}")
    if dims[0] >= 2**31 or any(g >= 2**16 for g in dims[1:]):
        raise ValueError(f'Invalid argument "grid" of launch(): {dims} exceeds the grid limits '
                         f"(x < 2**31, y and z < 65536)")
    return dims + (1,) * (3 - len(dims))


def param_names(kernel: Kernel) -> list[str]:
    return list(kernel.signature.parameters)


def check_arg_count(kernel: Kernel, args: Any) -> tuple:
    if type(args) is tuple and len(args) == kernel.num_params:
        return args
    if not isinstance(args, (tuple, list)):
        raise TypeError(f'Invalid argument "kernel_args" of launch(): expected a tuple, got '
                        f"{type(args).__name__}")
    if len(args) != kernel.num_params:
        raise TypeError(f"Kernel {kernel.__name__}() takes {kernel.num_params} argument(s) "
                        f"({', '.join(param_names(kernel))}), got {len(args)}")
    return tuple(args)


def scalar_kind(name: str, value: Any) -> ScalarArg:
    """Run-time scalar argument: Python numbers take the loosely typed constant
    rules (int32/int64/uint64, float32, bool_); NumPy scalars keep their dtype."""
    if isinstance(value, (np.generic,)):
        try:
            return ScalarArg(D.from_numpy(value.dtype))
        except TypeError:
            raise TypeError(f'Invalid kernel argument "{name}": NumPy scalar of dtype '
                            f"{value.dtype} has no tilecore dtype") from None
    try:
        return ScalarArg(D.constant_dtype(value))
    except OverflowError as e:
        raise ValueError(f'Invalid kernel argument "{name}": {e}') from None


def is_device_array(value: Any) -> bool:
    from ..runtime.arrays import DeviceArray
    if isinstance(value, DeviceArray):
        return True
    return hasattr(value, "__cuda_array_interface__") or (
        hasattr(value, "__dlpack__") and not isinstance(value, np.ndarray))


def classify_non_array(kernel: Kernel, name: str, value: Any):
    """The kind of a constant or scalar argument; for arrays, None."""
    if name in kernel.constant_params:
        try:
            return constant_kind(value)
        except TypeError as e:
            raise TypeError(f'Invalid kernel argument "{name}": {e}') from None
    if isinstance(value, DType):
        return ConstArg(value)
    if isinstance(value, np.ndarray) or is_device_array(value):
        return None
    if isinstance(value, (bool, int, float, np.generic)):
        return scalar_kind(name, value)
    if isinstance(value, tuple):
        raise TypeError(f'Invalid kernel argument "{name}": tuples cannot be kernel parameters '
                        f"unless the parameter is annotated Constant")
    raise TypeError(f'Invalid kernel argument "{name}": expected an array (NumPy for the '
                    f"interpreter, or a device array with DLPack / __cuda_array_interface__), a "
                    f"number or a dtype, got {type(value).__name__}")


def host_array_kind(name: str, a: np.ndarray) -> ArrayArg:
    """The kind of a NumPy array argument (the interpreter's, or a stand-in for
    a device array in `tilecore.compile`); masked arrays are refused, since
    the kernel would read the raw data and ignore the mask."""
    if isinstance(a, np.ma.MaskedArray):
        raise TypeError(f'Invalid kernel argument "{name}": NumPy masked arrays are not '
                        f"supported (the kernel would read the raw data and ignore the mask); "
                        f"pass {name}.filled(value) or {name}.data")
    try:
        dtype = D.from_numpy(a.dtype)
    except TypeError:
        raise TypeError(f'Invalid kernel argument "{name}": NumPy dtype {a.dtype} has no '
                        f"tilecore dtype") from None
    return ArrayArg(dtype, a.ndim, needs_wide_index(a.shape, [s // a.itemsize for s in a.strides]))
