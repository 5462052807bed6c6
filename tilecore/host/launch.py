"""`tilecore.launch`: check the call, pick the target, run.

NumPy arrays run on the CPU interpreter; device arrays (DLPack or
__cuda_array_interface__) run on the GPU, or in the interpreter when
TILECORE_INTERPRET=1.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import config
from ..kernel import Kernel
from .classify import check_arg_count, is_device_array, normalize_grid

__all__ = ["launch"]


def launch(stream: Any, grid: Any, kernel: Kernel, kernel_args: Any, /) -> None:
    """Queue `kernel` over `grid` (1 to 3 positive ints) with `kernel_args` on `stream`."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f'Invalid argument "kernel" of launch(): expected a @tilecore.kernel, '
                        f"got {type(kernel).__name__}")
    grid3 = normalize_grid(grid)
    args = check_arg_count(kernel, kernel_args)
    has_numpy = any(isinstance(a, np.ndarray) for a in args)
    has_device = any(is_device_array(a) for a in args)
    if has_numpy and has_device:
        raise TypeError(f"Kernel {kernel.__name__}() got both NumPy arrays (CPU) and device "
                        f"arrays; pass all arrays on the same side")
    if has_numpy or (not has_device and stream is None) or config.interpret():
        from .cpu import launch_cpu
        if has_device:
            from .device_copies import to_host, from_host
            launch_cpu(kernel, grid3, args, to_host, from_host)
        else:
            launch_cpu(kernel, grid3, args)
        return
    from .gpu import launch_gpu
    launch_gpu(stream, grid3, kernel, args)
