"""`tilecore.launch`: check the call, pick the target, run.

NumPy arrays run on the CPU interpreter; device arrays (DLPack or
__cuda_array_interface__) run on the GPU, or in the interpreter when
TILECORE_INTERPRET=1 (read when a kernel specialization is first launched). The target is decided from the arguments' types, each
type inspected once (reading a protocol attribute such as a torch tensor's
__cuda_array_interface__ is far too slow for every launch).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import config
from ..kernel import Kernel
from .classify import check_arg_count, normalize_grid

__all__ = ["launch", "fast_launcher"]

_SIDE_BY_TYPE: dict[type, str] = {}
_ROUTES: dict[tuple, str] = {}
_DEVICE_TYPE_ROOTS = ("torch", "cupy")


def _side(value: Any) -> str:
    """'host' (NumPy), 'device' (a GPU array) or 'other' (scalars, dtypes, ...),
    decided once per type. Tensors of torch are 'device' by type: a CPU tensor
    is then refused with a message naming the argument."""
    cls = type(value)
    side = _SIDE_BY_TYPE.get(cls)
    if side is None:
        if issubclass(cls, np.ndarray):
            side = "host"
        elif cls.__module__.split(".")[0] in _DEVICE_TYPE_ROOTS and \
                hasattr(cls, "data_ptr") or hasattr(cls, "data") and \
                cls.__module__.split(".")[0] == "cupy":
            side = "device"
        else:
            from ..runtime.arrays import classify_arg
            kind = classify_arg(value)
            side = kind if kind in ("host", "device") else "other"
        _SIDE_BY_TYPE[cls] = side
    return side


def _route(kernel: Kernel, args: tuple) -> str:
    """'gpu' or 'cpu' for arguments of these types (cached by the types)."""
    types = tuple(map(type, args))
    route = _ROUTES.get(types)
    if route is None:
        sides = {_side(a) for a in args}
        if "host" in sides and "device" in sides:
            raise TypeError(f"Kernel {kernel.__name__}() got both host arrays (NumPy) and "
                            f"device arrays; pass all arrays on the same side")
        route = "gpu" if "device" in sides else "cpu" if "host" in sides else "none"
        _ROUTES[types] = route
    return route


def launch(stream: Any, grid: Any, kernel: Kernel, kernel_args: Any, /, *,
           programmatic_dependent_launch: bool = False) -> None:
    """Queue `kernel` over `grid` (1 to 3 non-negative ints) with `kernel_args` on `stream`.

    A grid with a zero extent runs no block, but the arguments are checked as
    for any launch (and on the GPU the kernel is compiled), so a bad call fails
    the same way whatever the data size. With `programmatic_dependent_launch`
    (as cuTile), a kernel that calls grid_dependency_control_wait() may start
    before the stream's previous kernel has finished, and runs the code before
    that wait meanwhile (sm_90 and newer; elsewhere the option changes nothing)."""
    if programmatic_dependent_launch is not False and type(kernel) is Kernel:
        kernel = kernel.launched_with(programmatic_dependent_launch, "launch")
    if type(kernel) is Kernel:
        cache = kernel.backend_cache
        fast = cache.get("fast_launch")
        if fast is not None:
            if fast(stream, grid, kernel_args):
                return
            # A kernel launched with two kinds of arguments in turn (two specializations,
            # e.g. the two passes of a reduction) keeps both fast launchers.
            prev = cache.get("fast_launch_prev")
            if prev is not None and prev(stream, grid, kernel_args):
                cache["fast_launch"], cache["fast_launch_prev"] = prev, fast
                return
    else:
        raise TypeError(f'Invalid argument "kernel" of launch(): expected a @tilecore.kernel, '
                        f"got {type(kernel).__name__}")
    config.validate_environment()
    grid3 = normalize_grid(grid)
    args = check_arg_count(kernel, kernel_args)
    route = _route(kernel, args)
    if route == "none":  # no arrays at all: run where the stream says
        route = "cpu" if stream is None else "gpu"
    if route == "gpu":
        launch_gpu(stream, grid3, kernel, args)
        return
    from .cpu import launch_cpu
    launch_cpu(kernel, grid3, args)


def fast_launcher(kernel: Kernel) -> Any:
    """The kernel's current fast launcher (the one its latest GPU launch took or
    installed, as a rule), or None. A caller that repeats the same launches
    (the device-scope algorithms' cached paths) keeps one per launch and calls
    it first, `fast(stream, grid, args)`, launching with `launch` when it
    returns False: the kernel's own two slots hold the last two argument kinds
    only, and a kernel shared by several signatures (DeviceScan's, one per
    method and operator) sees more. Any fast launcher may be called with any
    arguments: it guards every fact its specialization relies on."""
    return kernel.backend_cache.get("fast_launch")


_GPU_LAUNCH: list = []


def launch_gpu(stream, grid, kernel, args) -> None:
    """The GPU launch path, imported on first use (it pulls in the backend)."""
    if not _GPU_LAUNCH:
        from .gpu import launch_gpu as gpu_launch
        _GPU_LAUNCH.append(gpu_launch)
    _GPU_LAUNCH[0](stream, grid, kernel, args)
