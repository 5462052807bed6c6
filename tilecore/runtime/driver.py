"""Lazy access to the CUDA driver API (cuda.bindings.driver).

Nothing here runs at import time: `import tilecore` must work on machines
without an NVIDIA driver, where the interpreter and `tilecore.compile` are
still useful. The first call to `driver()` loads libcuda and runs cuInit(0)
once; failures become `NoDeviceError` with a message that says what still
works. `check()` turns the (CUresult, *values) tuples that cuda.bindings
returns into values or `CudaError`.
"""
from __future__ import annotations

import threading
from types import ModuleType
from typing import Any, Optional

__all__ = ["NoDeviceError", "CudaError", "driver", "check", "has_gpu", "error_name"]


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


_NO_DEVICE_HINT = ("The NumPy interpreter (NumPy arrays as arguments, or TILECORE_INTERPRET=1) "
                   "and tilecore.compile still work without a GPU.")

_lock = threading.Lock()
_driver: Optional[ModuleType] = None      # cuda.bindings.driver after a successful cuInit
_failure: Optional[str] = None            # why the driver could not be initialized
_has_gpu: Optional[bool] = None


def _init() -> ModuleType:
    from cuda.bindings import driver as drv
    try:
        result = drv.cuInit(0)
    except RuntimeError as e:  # cuda.pathfinder's DynamicLibNotFoundError when libcuda is absent
        raise NoDeviceError(f"No NVIDIA driver was found ({e}). {_NO_DEVICE_HINT}") from None
    err = result[0]
    if err != drv.CUresult.CUDA_SUCCESS:
        raise NoDeviceError(f"The NVIDIA driver could not be initialized "
                            f"(cuInit failed with {error_name(err)}); no usable GPU was found. "
                            f"{_NO_DEVICE_HINT}")
    return drv


def driver() -> ModuleType:
    """The cuda.bindings.driver module, after a one-time cuInit(0).

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
            _has_gpu = check(driver().cuDeviceGetCount()) > 0
        except (NoDeviceError, CudaError):
            _has_gpu = False
    return _has_gpu


def error_name(code: Any) -> str:
    """Symbolic name of a CUresult ("CUDA_ERROR_OUT_OF_MEMORY"), from the enum
    so it works even without a loaded driver."""
    from cuda.bindings import driver as drv
    try:
        return drv.CUresult(int(code)).name
    except ValueError:
        return f"CUresult {int(code)}"


def _error_string(code: Any) -> str:
    if _driver is None:
        return ""
    err, text = _driver.cuGetErrorString(code)
    if err != _driver.CUresult.CUDA_SUCCESS or text is None:
        return ""
    return text.decode() if isinstance(text, bytes) else str(text)


def check(result: tuple) -> Any:
    """Unwrap the tuple a cuda.bindings call returns.

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
