"""The driver API of `runtime.driver` served by cuda.bindings: the fallback
when the C extension `_cudriver` was not built (or TILECORE_NATIVE=0).

Handles cross this boundary as ints in both directions (cuda.bindings
accepts ints for its handle types), so devices, contexts and functions from
either implementation are interchangeable.
"""
from __future__ import annotations

import ctypes
import threading
from types import ModuleType
from typing import Any, Optional

from .driver import PENDING_DEVICE_ERROR
from .params import ParamBuffer

__all__ = ["BindingsDriver", "BindingsLauncher"]

_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9
_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4
_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6


def _ints(result: tuple) -> tuple:
    """(err, handle...) with the handles as ints (None on error)."""
    if result[0]:
        return (result[0],) + (None,) * (len(result) - 1)
    return (result[0],) + tuple(int(v) for v in result[1:])


class BindingsDriver:
    """`runtime.driver.DriverAPI` on top of cuda.bindings.driver (or any
    module with its functions, for tests)."""

    def __init__(self, module: Optional[ModuleType] = None):
        if module is None:
            from cuda.bindings import driver as module
        self.drv = module

    def init(self, flags: int) -> tuple:
        return self.drv.cuInit(flags)

    def device_count(self) -> tuple:
        return self.drv.cuDeviceGetCount()

    def device_get(self, ordinal: int) -> tuple:
        return _ints(self.drv.cuDeviceGet(ordinal))

    def device_attribute(self, attr: int, device: int) -> tuple:
        return self.drv.cuDeviceGetAttribute(self.drv.CUdevice_attribute(attr), device)

    def device_name(self, device: int) -> tuple:
        err, raw = self.drv.cuDeviceGetName(256, device)
        return (err, "" if err else raw.split(b"\0", 1)[0].decode(errors="replace"))

    def primary_context(self, device: int) -> tuple:
        return _ints(self.drv.cuDevicePrimaryCtxRetain(device))

    def current_context(self) -> tuple:
        return _ints(self.drv.cuCtxGetCurrent())

    def set_current_context(self, context: int) -> tuple:
        return self.drv.cuCtxSetCurrent(context)

    def context_device(self) -> tuple:
        return _ints(self.drv.cuCtxGetDevice())

    def pointer_device(self, ptr: int) -> tuple:
        attr = self.drv.CUpointer_attribute(_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
        return _ints(self.drv.cuPointerGetAttribute(attr, ptr))

    def module_load(self, image: bytes) -> tuple:
        return _ints(self.drv.cuModuleLoadData(image))

    def module_function(self, module: int, name: bytes) -> tuple:
        return _ints(self.drv.cuModuleGetFunction(module, name))

    def set_function_attribute(self, function: int, attr: int, value: int) -> tuple:
        return self.drv.cuFuncSetAttribute(function, self.drv.CUfunction_attribute(attr), value)

    def error_string(self, code: int) -> tuple:
        err, text = self.drv.cuGetErrorString(self.drv.CUresult(code))
        if err or text is None:
            return (err or 1, "")
        return (0, text.decode() if isinstance(text, bytes) else str(text))

    def mem_host_alloc(self, size: int, flags: int) -> tuple:
        return _ints(self.drv.cuMemHostAlloc(size, flags))

    def mem_host_device_pointer(self, host_ptr: int) -> tuple:
        return _ints(self.drv.cuMemHostGetDevicePointer(host_ptr, 0))

    def mem_alloc(self, size: int) -> tuple:
        return _ints(self.drv.cuMemAlloc(size))

    def module_global(self, module: int, name: bytes) -> tuple:
        return _ints(self.drv.cuModuleGetGlobal(module, name))

    def memcpy_htod(self, dptr: int, data: Any) -> tuple:
        return self.drv.cuMemcpyHtoD(dptr, data, len(data))

    def ctx_synchronize(self) -> tuple:
        return self.drv.cuCtxSynchronize()

    def stream_synchronize(self, stream: int) -> tuple:
        return self.drv.cuStreamSynchronize(stream)

    def Launcher(self, context: int, function: int, block_threads: int,  # noqa: N802
                 smem_bytes: int, cluster_size: int, codes: str, offsets: tuple,
                 size: int, pdl: bool = False, error_flag: int = 0) -> "BindingsLauncher":
        return BindingsLauncher(self.drv, context, function, block_threads, smem_bytes,
                                cluster_size, codes, pdl, error_flag)


class BindingsLauncher:
    """One kernel's launch configuration and persistent parameter storage;
    the same interface as `_cudriver.Launcher`."""

    def __init__(self, drv: ModuleType, context: int, function: int, block_threads: int,
                 smem_bytes: int, cluster_size: int, codes: str, pdl: bool = False,
                 error_flag: int = 0):
        self.drv = drv
        # the device's error record's `ready` word (runtime/device_errors.py)
        self._error = ctypes.c_uint32.from_address(error_flag) if error_flag else None
        self.context = context
        self.function = function
        self.block_threads = block_threads
        self.smem_bytes = smem_bytes
        self.cluster_size = cluster_size
        self.params = ParamBuffer("@" + codes)
        self._lock = threading.Lock()  # the buffer is shared by all launches
        # launch configurations for grids the cluster size divides and for the others
        self._config_odd = self._launch_config(False, pdl)
        self._config = self._launch_config(True, pdl) if cluster_size > 1 else self._config_odd

    def _launch_config(self, cluster: bool, pdl: bool) -> Any:
        """The cuLaunchKernelEx configuration with these attributes, or None
        for neither (then cuLaunchKernel does)."""
        drv = self.drv
        attrs = []
        if cluster:
            attr = drv.CUlaunchAttribute()
            attr.id = drv.CUlaunchAttributeID(_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
            attr.value.clusterDim.x = self.cluster_size
            attr.value.clusterDim.y = 1
            attr.value.clusterDim.z = 1
            attrs.append(attr)
        if pdl:
            attr = drv.CUlaunchAttribute()
            attr.id = drv.CUlaunchAttributeID(
                _CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
            attr.value.programmaticStreamSerializationAllowed = 1
            attrs.append(attr)
        if not attrs:
            return None
        config = drv.CUlaunchConfig()
        config.blockDimX, config.blockDimY, config.blockDimZ = self.block_threads, 1, 1
        config.sharedMemBytes = self.smem_bytes
        config.attrs = attrs
        config.numAttrs = len(attrs)
        return config

    def pack(self, values: tuple) -> bytes:
        """The parameter block for `values`, as the kernel reads it."""
        with self._lock:
            self.params.pack(values)
            return self.params.raw()

    def launch(self, stream: int, gx: int, gy: int, gz: int, values: tuple) -> int:
        """Make the context current, pack `values` and launch; the CUresult
        (PENDING_DEVICE_ERROR, launching nothing, while the error flag is set)."""
        if self._error is not None and self._error.value:
            return PENDING_DEVICE_ERROR
        drv = self.drv
        err, ctx = drv.cuCtxGetCurrent()
        if err or int(ctx) != self.context:
            err = drv.cuCtxSetCurrent(self.context)[0]
            if err:
                return err
        with self._lock:
            self.params.pack(values)
            # A cluster size is a hint: a grid it does not divide runs without clusters.
            config = self._config if gx % self.cluster_size == 0 else self._config_odd
            if config is None:
                return drv.cuLaunchKernel(self.function, gx, gy, gz, self.block_threads, 1, 1,
                                          self.smem_bytes, stream, self.params.kernel_params,
                                          0)[0]
            config.gridDimX, config.gridDimY, config.gridDimZ = gx, gy, gz
            config.hStream = stream
            return drv.cuLaunchKernelEx(config, self.function, self.params.kernel_params, 0)[0]
