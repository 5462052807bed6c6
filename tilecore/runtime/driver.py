"""Lazy access to the CUDA driver, through one small API with two
implementations.

The API is the handful of driver calls tilecore makes (`DriverAPI` below).
It is served by the C extension `tilecore.runtime._cudriver` when it was
built (it loads libcuda itself: no cuda.bindings import on the warm-start
path, and about half the host time per launch), else by cuda.bindings
(`bindings_driver.BindingsDriver`). TILECORE_NATIVE=0 forces cuda.bindings.
Both return the tuples cuda.bindings returns ((CUresult, values...)), with
plain ints for handles, so `check()` unwraps either.

Nothing here runs at import time: `import tilecore` must work on machines
without an NVIDIA driver, where the interpreter and `tilecore.compile` are
still useful. The first call to `driver()` loads libcuda and runs cuInit(0)
once; failures become `NoDeviceError` with a message that says what still
works.
"""
from __future__ import annotations

import threading
from typing import Any, Optional, Protocol

from .. import config

__all__ = ["NoDeviceError", "CudaError", "DriverAPI", "driver", "check", "has_gpu",
           "error_name", "native_module",
           "DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT", "DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR",
           "DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR",
           "DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
           "FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES",
           "FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT", "MEMHOSTALLOC_DEVICEMAP",
           "PENDING_DEVICE_ERROR"]

# Enumerator values from cuda.h (stable across CUDA versions).
DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT = 9  # percent of the most shared memory
MEMHOSTALLOC_DEVICEMAP = 0x02  # cuMemHostAlloc: map the memory into the device's address space

# What a Launcher's launch returns, launching nothing, while its device's error record
# holds a device-side error not yet reported (runtime/device_errors.py). No CUresult has
# this value; _cudriver.h's TC_PENDING_DEVICE_ERROR is the same.
PENDING_DEVICE_ERROR = 0x40000001

LIBCUDA = "libcuda.so.1"


class NoDeviceError(RuntimeError):
    """No NVIDIA driver or GPU is available to run compiled kernels."""


class CudaError(RuntimeError):
    """A CUDA driver call returned an error; `code` is the CUresult value and
    `name` its symbolic name (e.g. "CUDA_ERROR_INVALID_VALUE")."""

    def __init__(self, code: int, name: str, description: str):
        self.code = code
        self.name = name
        self.description = description
        super().__init__(code, name, description)

    def __str__(self) -> str:
        if self.description:
            return f"{self.name} ({self.description})"
        return self.name

    def __reduce__(self):
        return (type(self), (self.code, self.name, self.description))


class DriverAPI(Protocol):
    """The driver calls tilecore makes. Each returns (CUresult, values...);
    handles (contexts, modules, functions) are ints."""

    def init(self, flags: int) -> tuple: ...
    def device_count(self) -> tuple: ...
    def device_get(self, ordinal: int) -> tuple: ...
    def device_attribute(self, attr: int, device: int) -> tuple: ...
    def device_name(self, device: int) -> tuple: ...
    def primary_context(self, device: int) -> tuple: ...
    def current_context(self) -> tuple: ...
    def set_current_context(self, context: int) -> tuple: ...
    def context_device(self) -> tuple: ...
    def pointer_device(self, ptr: int) -> tuple: ...
    def module_load(self, image: bytes) -> tuple: ...
    def module_function(self, module: int, name: bytes) -> tuple: ...
    def set_function_attribute(self, function: int, attr: int, value: int) -> tuple: ...
    def error_string(self, code: int) -> tuple: ...
    def mem_host_alloc(self, size: int, flags: int) -> tuple: ...
    def mem_host_device_pointer(self, host_ptr: int) -> tuple: ...
    def mem_alloc(self, size: int) -> tuple: ...  # (err, dptr): device memory, not cleared
    def module_global(self, module: int, name: bytes) -> tuple: ...  # (err, dptr, size)
    def memcpy_htod(self, dptr: int, data: Any) -> tuple: ...  # data: any bytes-like object
    def ctx_synchronize(self) -> tuple: ...
    def stream_synchronize(self, stream: int) -> tuple: ...

    def Launcher(self, context: int, function: int, block_threads: int, smem_bytes: int,  # noqa: N802
                 cluster_size: int, codes: str, offsets: tuple, size: int,
                 pdl: bool = False, error_flag: int = 0) -> Any:
        """An object whose `launch(stream, gx, gy, gz, values) -> CUresult` packs
        `values` with the struct `codes` at `offsets`, makes `context` current
        and launches; `pack(values) -> bytes` returns the packed block. `pdl`
        launches with programmatic dependent launch (see runtime/launch.py).
        `error_flag` is the address of a 32-bit word in host memory (0: none);
        while it is not zero, `launch` launches nothing and returns
        PENDING_DEVICE_ERROR (see runtime/device_errors.py)."""


_NO_DEVICE_HINT = ("The NumPy interpreter (NumPy arrays as arguments, or TILECORE_INTERPRET=1) "
                   "and tilecore.compile still work without a GPU.")

_lock = threading.Lock()
_driver: Optional[DriverAPI] = None       # the API after a successful cuInit
_failure: Optional[str] = None            # why the driver could not be initialized
_has_gpu: Optional[bool] = None


def native_module() -> Optional[Any]:
    """The C extension `_cudriver`, or None when it was not built or
    TILECORE_NATIVE=0 turns it off."""
    if not config.native():
        return None
    try:
        from . import _cudriver
    except ImportError:
        return None
    return _cudriver


def _open() -> DriverAPI:
    native = native_module()
    if native is not None:
        native.open(LIBCUDA)  # OSError when the library is absent
        return native
    from .bindings_driver import BindingsDriver
    return BindingsDriver()


def _init() -> DriverAPI:
    try:
        api = _open()
        err = api.init(0)[0]
    except (OSError, RuntimeError) as e:
        # dlopen's error, or cuda.pathfinder's DynamicLibNotFoundError (a RuntimeError)
        raise NoDeviceError(f"No NVIDIA driver was found ({e}). {_NO_DEVICE_HINT}") from None
    if err:
        raise NoDeviceError(f"The NVIDIA driver could not be initialized "
                            f"(cuInit failed with {error_name(err)}); no usable GPU was found. "
                            f"{_NO_DEVICE_HINT}")
    return api


def driver() -> DriverAPI:
    """The driver API, after a one-time cuInit(0).

    Raises NoDeviceError (every time, without retrying) when there is no
    driver or cuInit fails."""
    global _driver, _failure
    if _driver is not None:
        return _driver
    with _lock:
        if _driver is None:
            if _failure is not None:
                raise NoDeviceError(_failure)
            try:
                _driver = _init()
            except NoDeviceError as e:
                _failure = str(e)
                raise
    return _driver


def has_gpu() -> bool:
    """True when a driver is present and reports at least one device (cached)."""
    global _has_gpu
    if _has_gpu is None:
        try:
            _has_gpu = check(driver().device_count()) > 0
        except (NoDeviceError, CudaError):
            _has_gpu = False
    return _has_gpu


def error_name(code: Any) -> str:
    """Symbolic name of a CUresult ("CUDA_ERROR_OUT_OF_MEMORY"), from
    cuda.bindings' enum so it works even without a loaded driver."""
    from cuda.bindings import driver as drv
    try:
        return drv.CUresult(int(code)).name
    except ValueError:
        return f"CUresult {int(code)}"


def _error_string(code: Any) -> str:
    if _driver is None:
        return ""
    err, text = _driver.error_string(int(code))
    return "" if err or not text else str(text)


def check(result: tuple) -> Any:
    """Unwrap the tuple a driver call returns.

    (CUDA_SUCCESS,) -> None; (CUDA_SUCCESS, v) -> v; (CUDA_SUCCESS, a, b) ->
    (a, b). An error code raises CudaError with its name and description."""
    err = result[0]
    if err:
        raise CudaError(int(err), error_name(err), _error_string(err))
    n = len(result)
    if n == 1:
        return None
    if n == 2:
        return result[1]
    return result[1:]
