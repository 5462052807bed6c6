"""The lean launch path: a cubin loaded on one device, launched through a
pre-built launcher.

Per launch `LoadedKernel.launch` makes one call into the driver API's
`Launcher` (C when the `_cudriver` extension is built: it packs the values
on the stack, makes the device's primary context current when it is not,
and calls cuLaunchKernel, or cuLaunchKernelEx for thread-block clusters and
programmatic dependent launch, with the GIL released). Driver errors become
`TileLaunchError` naming the kernel and saying what usually causes them; a
device-side error an earlier kernel recorded (runtime/device_errors.py) is
raised instead of launching.

Programmatic dependent launch (PDL, sm_90+): without it a grid's blocks start
only after the previous grid in the stream has completed, so the SMs idle
between two kernels while the first one's last blocks finish, its writes are
flushed and the next grid is dispatched (about 1 us on an H100, 5% of a 20 us
softmax). With it the driver may dispatch the next grid as soon as the previous
grid's blocks have exited; every tilecore kernel starts by waiting for the
previous grid to complete with its writes visible (`tc::wait_for_prior_grid`),
so results are the same as with plain stream order.
"""
from __future__ import annotations

import struct
from typing import Any, Optional, Sequence

from ..errors import TileLaunchError
from . import device_errors
from .device import Device
from .driver import FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, \
    FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, PENDING_DEVICE_ERROR, CudaError, check, \
    driver, error_name
from .params import param_offsets

__all__ = ["LoadedKernel", "launch_error", "error_hint", "DEFAULT_SMEM_LIMIT"]

DEFAULT_SMEM_LIMIT = 48 * 1024  # dynamic shared memory a kernel gets without opting in

_HINTS = {
    "CUDA_ERROR_INVALID_VALUE":
        "a grid dimension is out of range (x must be 1..2147483647, y and z 1..65535), "
        "or the block has too many threads or too much shared memory",
    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES":
        "the block needs more registers than one SM provides; use fewer threads per block",
    "CUDA_ERROR_INVALID_HANDLE":
        "the stream handle is invalid or belongs to another device",
    "CUDA_ERROR_INVALID_CONTEXT":
        "the device's context is not current or was destroyed",
    "CUDA_ERROR_INVALID_CLUSTER_SIZE":
        "the cluster size is not supported or does not divide the grid's x dimension",
    "CUDA_ERROR_CLUSTER_OUT_OF_RESOURCES":
        "a cluster of this size does not fit on the device",
    "CUDA_ERROR_NOT_SUPPORTED":
        "the device or driver does not support a launch attribute this launch uses "
        "(programmatic dependent launch: set TILECORE_PDL=0; clusters: num_ctas=1)",
    "CUDA_ERROR_NO_BINARY_FOR_GPU":
        "the cubin was compiled for another architecture than this device's",
    "CUDA_ERROR_INVALID_IMAGE":
        "the cubin is damaged or was compiled for another architecture",
    "CUDA_ERROR_ILLEGAL_ADDRESS":
        "a kernel (possibly an earlier one) accessed invalid memory; the context is now unusable",
}


def error_hint(name: str) -> Optional[str]:
    """What usually causes the CUDA error `name` ("CUDA_ERROR_INVALID_VALUE"),
    when there is a known cause."""
    return _HINTS.get(name)


def launch_error(kernel: str, code: Any, what: str = "Launch",
                 detail: str = "") -> TileLaunchError:
    """The TileLaunchError for CUresult `code` while doing `what` with
    `kernel`; `detail` describes the configuration (grid, block, ...)."""
    name = error_name(code)
    msg = f'{what} of kernel "{kernel}" failed with {name}'
    hint = error_hint(name)
    if hint:
        msg += f": {hint}"
    if detail:
        msg += f" ({detail})"
    return TileLaunchError(msg)


class LoadedKernel:
    """A kernel entry point of a cubin, loaded into one device's primary context.
    `small_l1` asks the driver for the largest shared-memory carveout, leaving
    L1 at its smallest (for kernels whose blocks each read data of their own);
    `pdl` launches with programmatic dependent launch (for kernels that wait for
    the previous grid themselves, see above). `checks` are the kernel's
    run-time checks (`CompiledKernel.checks`): a kernel with any is connected
    to its device's error record (runtime/device_errors.py). Every launcher
    reads that record's flag and launches nothing while it is set: `fail`
    then raises the recorded error."""

    def __init__(self, cubin: bytes, entry: str, block_threads: int, smem_bytes: int,
                 param_format: str, cluster_size: int, name: str, device: Device,
                 small_l1: bool = False, pdl: bool = False, checks: Sequence = ()):
        self.name = name
        self.device = device
        self.block_threads = block_threads
        self.smem_bytes = smem_bytes
        self.cluster_size = cluster_size
        self.param_format = param_format
        if smem_bytes > device.max_shared_optin:
            raise TileLaunchError(
                f'Kernel "{name}" needs {smem_bytes} bytes of shared memory per block, more '
                f"than the {device.max_shared_optin} bytes {device.name} ({device.arch}) offers")
        offsets = param_offsets(param_format)  # validates the format
        api = driver()
        device.make_current()
        try:
            module = check(api.module_load(cubin))
            function = check(api.module_function(module, entry.encode()))
            if smem_bytes > DEFAULT_SMEM_LIMIT:
                check(api.set_function_attribute(
                    function, FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem_bytes))
            if small_l1:
                check(api.set_function_attribute(
                    function, FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 100))
            errors = device_errors.errors_for(device)
            if checks:
                device_errors.connect(module, errors, name, checks)
        except CudaError as e:
            raise launch_error(name, e.code, "Loading",
                               f"entry {entry!r} on {device.name}, {device.arch}") from None
        self.module, self.function = module, function
        self.errors = errors
        self.launcher = api.Launcher(device.context, function, block_threads, smem_bytes,
                                     max(cluster_size, 1), param_format[1:], offsets,
                                     struct.calcsize(param_format), pdl=pdl,
                                     error_flag=errors.flag)
        self.pdl = pdl
        self._launch = self.launcher.launch

    def launch(self, stream_handle: int, grid: tuple[int, int, int], values: tuple) -> None:
        """Launch on the stream with raw handle `stream_handle` over `grid`
        blocks, with `values` (one per parameter, already converted: ints
        for pointers, `scalar_bits` for 16-bit floats)."""
        err = self._launch(stream_handle, grid[0], grid[1], grid[2], values)
        if err:
            self.fail(err, grid)

    def fail(self, err: int, grid: tuple[int, int, int]) -> None:
        """Raise the error for launch result `err` over `grid`: the device-side
        error an earlier kernel recorded (PENDING_DEVICE_ERROR: this launch was
        not made), else the TileLaunchError."""
        if err == PENDING_DEVICE_ERROR:
            raise self.errors.pending_error(self.name)
        raise launch_error(self.name, err, detail=self._describe(grid))

    def _describe(self, grid: tuple[int, int, int]) -> str:
        text = (f"grid {tuple(grid)}, block {self.block_threads} threads, "
                f"dynamic shared memory {self.smem_bytes} bytes")
        if self.cluster_size > 1:
            text += f", cluster {self.cluster_size}"
        if self.pdl:
            text += ", programmatic dependent launch"
        return text
