"""The lean launch path: a cubin loaded on one device, launched with
pre-built parameter storage.

Per launch `LoadedKernel.launch` does only: make the device's primary
context current (one cheap query when it already is), pack the values into
the persistent `ParamBuffer`, and one cuLaunchKernel (cuLaunchKernelEx for
thread-block clusters) whose kernelParams is the address of a pre-built
`void*[]`. (The driver is called through cuda.bindings: on the H100
machine a ctypes call of cuLaunchKernel measured slower, 7.7 us against
5.8 us.) Driver errors become `TileLaunchError` naming the kernel and
saying what usually causes them.
"""
from __future__ import annotations

import threading
from typing import Any

from ..errors import TileLaunchError
from .device import Device
from .driver import CudaError, check, driver, error_name
from .params import ParamBuffer

__all__ = ["LoadedKernel", "launch_error", "DEFAULT_SMEM_LIMIT"]

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
    "CUDA_ERROR_NO_BINARY_FOR_GPU":
        "the cubin was compiled for another architecture than this device's",
    "CUDA_ERROR_INVALID_IMAGE":
        "the cubin is damaged or was compiled for another architecture",
    "CUDA_ERROR_ILLEGAL_ADDRESS":
        "a kernel (possibly an earlier one) accessed invalid memory; the context is now unusable",
}


def launch_error(kernel: str, code: Any, what: str = "Launch",
                 detail: str = "") -> TileLaunchError:
    """The TileLaunchError for CUresult `code` while doing `what` with
    `kernel`; `detail` describes the configuration (grid, block, ...)."""
    name = error_name(code)
    msg = f'{what} of kernel "{kernel}" failed with {name}'
    hint = _HINTS.get(name)
    if hint:
        msg += f": {hint}"
    if detail:
        msg += f" ({detail})"
    return TileLaunchError(msg)


class LoadedKernel:
    """A kernel entry point of a cubin, loaded into one device's primary context."""

    def __init__(self, cubin: bytes, entry: str, block_threads: int, smem_bytes: int,
                 param_format: str, cluster_size: int, name: str, device: Device):
        self.name = name
        self.device = device
        self.block_threads = block_threads
        self.smem_bytes = smem_bytes
        self.cluster_size = cluster_size
        self.params = ParamBuffer(param_format)
        self._lock = threading.Lock()  # the buffer is shared by all launches
        self._drv = drv = driver()
        if smem_bytes > device.max_shared_optin:
            raise TileLaunchError(
                f'Kernel "{name}" needs {smem_bytes} bytes of shared memory per block, more '
                f"than the {device.max_shared_optin} bytes {device.name} ({device.arch}) offers")
        device.make_current()
        try:
            self._module = check(drv.cuModuleLoadData(cubin))
            self._function = check(drv.cuModuleGetFunction(self._module, entry.encode()))
            if smem_bytes > DEFAULT_SMEM_LIMIT:
                check(drv.cuFuncSetAttribute(
                    self._function,
                    drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    smem_bytes))
        except CudaError as e:
            raise launch_error(name, e.code, "Loading",
                               f"entry {entry!r} on {device.name}, {device.arch}") from None
        self._config = self._cluster_config() if cluster_size > 1 else None

    def _cluster_config(self) -> Any:
        drv = self._drv
        attr = drv.CUlaunchAttribute()
        attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x = self.cluster_size
        attr.value.clusterDim.y = 1
        attr.value.clusterDim.z = 1
        config = drv.CUlaunchConfig()
        config.blockDimX, config.blockDimY, config.blockDimZ = self.block_threads, 1, 1
        config.sharedMemBytes = self.smem_bytes
        config.attrs = [attr]
        config.numAttrs = 1
        return config

    def launch(self, stream_handle: int, grid: tuple[int, int, int], values: tuple) -> None:
        """Launch on the stream with raw handle `stream_handle` over `grid`
        blocks, with `values` (one per parameter, already converted: ints
        for pointers, `scalar_bits` for 16-bit floats)."""
        self.device.make_current()
        gx, gy, gz = grid
        with self._lock:
            self.params.pack(values)
            # A cluster size is a hint: a grid it does not divide runs without clusters.
            if self._config is None or gx % self.cluster_size:
                err = self._drv.cuLaunchKernel(
                    self._function, gx, gy, gz, self.block_threads, 1, 1, self.smem_bytes,
                    stream_handle, self.params.kernel_params, 0)[0]
            else:
                config = self._config
                config.gridDimX, config.gridDimY, config.gridDimZ = gx, gy, gz
                config.hStream = stream_handle
                err = self._drv.cuLaunchKernelEx(config, self._function,
                                                 self.params.kernel_params, 0)[0]
        if err:
            raise launch_error(self.name, err, detail=self._describe(grid))

    def _describe(self, grid: tuple[int, int, int]) -> str:
        text = (f"grid {tuple(grid)}, block {self.block_threads} threads, "
                f"dynamic shared memory {self.smem_bytes} bytes")
        if self.cluster_size > 1:
            text += f", cluster {self.cluster_size}"
        return text
