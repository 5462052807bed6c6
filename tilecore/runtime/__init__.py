"""Runtime: the CUDA driver (loaded lazily by `runtime.driver.driver()`, through
the C extension `_cudriver` or cuda.bindings),
devices, argument ingestion (device arrays, streams, parameter packing), the
compiled-module cache and the launch path. Importing this package never
touches the driver."""
from .arrays import (DeviceArray, array_fields, as_device_array, check_no_overlap,
                     check_same_device, classify_arg)
from .cache import CompileCache, DiskCache, cache_key, default_cache
from .device import Device, current_device_ordinal, device_count, get_device
from .driver import CudaError, NoDeviceError, check, has_gpu
from .launch import LoadedKernel, launch_error
from .params import POINTER_CODE, ParamBuffer, param_offsets, scalar_bits, struct_code
from .streams import stream_handle

__all__ = [
    "DeviceArray", "array_fields", "as_device_array", "check_no_overlap", "check_same_device",
    "classify_arg",
    "CompileCache", "DiskCache", "cache_key", "default_cache",
    "Device", "current_device_ordinal", "device_count", "get_device",
    "CudaError", "NoDeviceError", "check", "has_gpu",
    "LoadedKernel", "launch_error",
    "POINTER_CODE", "ParamBuffer", "param_offsets", "scalar_bits", "struct_code",
    "stream_handle",
]
