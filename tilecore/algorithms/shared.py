"""What every device-scope algorithm's host side does the same way: one kernel
object per (tile function, block size), where its arrays live, the temporary
storage buffer, and the dtype check of an array argument."""
from __future__ import annotations

from typing import Any, Sequence

import tilecore as ct

from ..dispatch.buffers import device_buffer, host_buffer
from ..dispatch.target import Target, device_target, interpreter_target
from ..host.launch import fast_launcher
from ..language.dtypes import DType
from .arrays import Arg, describe, same_side
from .operators import NUMERIC

__all__ = ["kernel_for", "target_of", "temp_buffer", "check_dtype", "Step"]

_kernels: dict[tuple, Any] = {}


def kernel_for(fn: Any, threads: int, vector_width: int = 0, occupancy: int = 0) -> Any:
    """The kernel object of tile kernel `fn` launched with `threads` threads per
    block and the kernel options `vector_width` and `occupancy` (0: the
    compiler's), made once: its compiled specializations and fast launchers live
    on it."""
    key = (fn.pyfunc, threads, vector_width, occupancy)
    k = _kernels.get(key)
    if k is None:
        k = _kernels[key] = ct.kernel(fn.pyfunc, num_threads=threads,
                                      vector_width=vector_width or None,
                                      occupancy=occupancy or None)
    return k


def target_of(args: Sequence[tuple[str, Arg]]) -> Target:
    """The interpreter when the named arrays are host arrays, else their GPU."""
    if same_side(args):
        return interpreter_target()
    return device_target(next(a.device_id for _, a in args if a.device_id >= 0))


def temp_buffer(temp_storage: Any, host: bool, device_id: int):
    """The bytes of `temp_storage`, which must live where the data do: on the
    host, or on the data's GPU `device_id` (-1: not known)."""
    t = describe(temp_storage, "temp_storage")
    if t.host != host:
        raise TypeError('Invalid argument "temp_storage": it is a '
                        + ("host NumPy array but the data are GPU arrays" if t.host else
                           "GPU array but the data are host NumPy arrays (the interpreter)"))
    if host:
        return host_buffer(t.obj)
    if device_id >= 0 and t.device_id >= 0 and t.device_id != device_id:
        raise ValueError(f'Invalid argument "temp_storage": it is on GPU {t.device_id} but the '
                         f"data are on GPU {device_id}")
    return device_buffer(t.fields)


def check_dtype(a: Arg, name: str, allowed: Sequence[DType] = NUMERIC) -> None:
    """TypeError naming argument `name` unless its dtype is one of `allowed`."""
    if a.dtype not in allowed:
        raise TypeError(f'Invalid argument "{name}": dtype {a.dtype.name} is not supported '
                        f"(expected one of {[d.name for d in allowed]})")


class Step:
    """One launch of a cached plan: its grid, kernel and trailing arguments
    (fixed per shape), and the kernel's fast launcher for them once a launch
    has made one (kept per launch, as DeviceScan's: the kernel objects are
    shared by every signature of a plan)."""

    __slots__ = ("grid", "kernel", "tail", "fast")

    def __init__(self, grid: tuple, kernel: Any, tail: tuple) -> None:
        self.grid, self.kernel, self.tail = grid, kernel, tail
        self.fast: Any = None

    def go(self, stream: Any, head: tuple) -> None:
        """Launch with the call's values `head` and the fixed tail."""
        args = head + self.tail
        fast = self.fast
        if fast is None or not fast(stream, self.grid, args):
            ct.launch(stream, self.grid, self.kernel, args)   # (tests replace ct.launch)
            self.fast = fast_launcher(self.kernel)
