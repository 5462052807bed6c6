"""The GPU's clock state through NVML (libnvidia-ml.so.1, loaded with ctypes:
no new dependency), so that measure.py can discard timing samples taken while
the SM clock was throttled.

What counts as throttling (`THROTTLE_REASONS`): the clock-event reasons that
lower the SM clock below what the same kernel gets on a healthy GPU, so that a
sample taken under them says more about the GPU's state than about the kernel:

- ``sw_power_cap``      0x004  the driver lowered clocks to stay under the power limit
- ``hw_slowdown``       0x008  hardware slowdown (clocks cut by 2x or more)
- ``sw_thermal``        0x020  the driver lowered clocks for temperature
- ``hw_thermal``        0x040  hardware thermal slowdown
- ``hw_power_brake``    0x080  external power brake (clocks cut by 2x or more)

The hardware reasons (HARD_REASONS) always make a sample throttled. Under the
software ones the driver trims the clock a little at a time, as it does under
any sustained memory-bound load on an H100 at its power limit: such a sample is
throttled only when the SM clock is below SOFT_CLOCK_FLOOR (75%) of its maximum,
so that steady power capping, which every sample shares, does not discard them
all (with a 50 ms pause each).

Not throttling: ``gpu_idle`` (0x001, set between kernels: nothing is running),
``applications_clocks`` (0x002, clocks the administrator chose), ``sync_boost``
(0x010), ``display_clocks`` (0x100), and the newer ``board_limit`` (0x200) and
``reliability`` (0x400), which are set by the board's configuration and hold
for every sample alike. Bit values: NVML API reference, "NvmlClocksEventReasons"
(docs.nvidia.com/deploy/nvml-api/group__nvmlClocksEventReasons.html).

The reasons come from nvmlDeviceGetCurrentClocksEventReasons (drivers R535 and
newer), else from the older name of the same call,
nvmlDeviceGetCurrentClocksThrottleReasons. Everything here answers None (or
"" for `Device.throttling`) when the library, the driver or the device is
missing, as on a machine without a GPU; `unavailable_reason()` says why.
"""
from __future__ import annotations

import ctypes
import threading
from typing import Optional

__all__ = ["REASON_NAMES", "THROTTLE_REASONS", "HARD_REASONS", "SOFT_CLOCK_FLOOR", "Device",
           "device", "available", "unavailable_reason", "reason_names"]

REASON_NAMES: dict[int, str] = {
    0x001: "gpu_idle",
    0x002: "applications_clocks",
    0x004: "sw_power_cap",
    0x008: "hw_slowdown",
    0x010: "sync_boost",
    0x020: "sw_thermal",
    0x040: "hw_thermal",
    0x080: "hw_power_brake",
    0x100: "display_clocks",
    0x200: "board_limit",
    0x400: "reliability",
}

THROTTLE_REASONS = 0x004 | 0x008 | 0x020 | 0x040 | 0x080
# the reasons that cut the clock by 2x or more: a sample under them is always throttled
HARD_REASONS = 0x008 | 0x040 | 0x080
# under the software ones (power cap, thermal) the driver trims the clock a little at a
# time, as it does for any sustained memory-bound load: a sample counts as throttled
# only when the SM clock is below this share of its maximum (NVBench likewise measures
# the clock over a sample and discards it below a share of the default clock)
SOFT_CLOCK_FLOOR = 0.75

_LIBRARY = "libnvidia-ml.so.1"
_CLOCK_SM = 1            # nvmlClockType_t NVML_CLOCK_SM
_SUCCESS = 0

_lock = threading.Lock()
_state: dict = {}        # "lib" (CDLL) or "error" (str), set once


def _library() -> Optional[ctypes.CDLL]:
    """The initialized NVML library, or None (the reason kept for unavailable_reason)."""
    if "lib" in _state or "error" in _state:
        return _state.get("lib")
    with _lock:
        if "lib" in _state or "error" in _state:
            return _state.get("lib")
        try:
            lib = ctypes.CDLL(_LIBRARY)
        except OSError as e:
            _state["error"] = f"{_LIBRARY} could not be loaded ({e})"
            return None
        init = getattr(lib, "nvmlInit_v2", None) or getattr(lib, "nvmlInit", None)
        if init is None:
            _state["error"] = f"{_LIBRARY} has no nvmlInit"
            return None
        code = init()
        if code != _SUCCESS:
            _state["error"] = f"nvmlInit failed with NVML error {code}"
            return None
        _state["lib"] = lib
        return lib


def available() -> bool:
    """Whether NVML loaded and initialized."""
    return _library() is not None


def unavailable_reason() -> str:
    """Why NVML is unavailable ("" when it is available)."""
    _library()
    return _state.get("error", "")


def reason_names(mask: int) -> list[str]:
    """The names of the reasons set in `mask`, lowest bit first (unknown bits as hex)."""
    names = [name for bit, name in REASON_NAMES.items() if mask & bit]
    unknown = mask & ~sum(REASON_NAMES)
    if unknown:
        names.append(hex(unknown))
    return names


class Device:
    """One GPU as NVML sees it."""

    def __init__(self, lib: ctypes.CDLL, handle: ctypes.c_void_p):
        self._lib = lib
        self._handle = handle
        self._reasons_fn = getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            getattr(lib, "nvmlDeviceGetCurrentClocksThrottleReasons", None)

    def clock_event_reasons(self) -> Optional[int]:
        """The bit mask of current clock-event reasons (REASON_NAMES), or None."""
        if self._reasons_fn is None:
            return None
        mask = ctypes.c_ulonglong(0)
        if self._reasons_fn(self._handle, ctypes.byref(mask)) != _SUCCESS:
            return None
        return int(mask.value)

    def _clock(self, function: str) -> Optional[int]:
        fn = getattr(self._lib, function, None)
        mhz = ctypes.c_uint(0)
        if fn is None or fn(self._handle, _CLOCK_SM, ctypes.byref(mhz)) != _SUCCESS:
            return None
        return int(mhz.value)

    def sm_clock_mhz(self) -> Optional[int]:
        """The current SM clock in MHz, or None."""
        return self._clock("nvmlDeviceGetClockInfo")

    def max_sm_clock_mhz(self) -> Optional[int]:
        """The highest SM clock the GPU may run at, in MHz, or None."""
        return self._clock("nvmlDeviceGetMaxClockInfo")

    def throttling(self) -> str:
        """The throttling reasons in force now, comma-separated ("" when none, or
        when NVML cannot tell): any of HARD_REASONS, or a software reason
        while the SM clock is below SOFT_CLOCK_FLOOR of its maximum (or the
        clock cannot be read)."""
        mask = (self.clock_event_reasons() or 0) & THROTTLE_REASONS
        if not mask:
            return ""
        if not mask & HARD_REASONS:
            clock, top = self.sm_clock_mhz(), self.max_sm_clock_mhz()
            if clock is not None and top and clock >= SOFT_CLOCK_FLOOR * top:
                return ""
            where = f" (SM clock {clock} of {top} MHz)" if clock is not None and top else ""
            return ",".join(reason_names(mask)) + where
        return ",".join(reason_names(mask))


def device(index: int = 0, pci_bus_id: Optional[str] = None) -> Optional[Device]:
    """The NVML device with this PCI bus id ("0000:1B:00.0", as CUDA reports it:
    CUDA's and NVML's device orders differ unless CUDA_DEVICE_ORDER=PCI_BUS_ID),
    else NVML's device `index`; None when NVML or the device is unavailable."""
    lib = _library()
    if lib is None:
        return None
    handle = ctypes.c_void_p()
    if pci_bus_id:
        by_bus = getattr(lib, "nvmlDeviceGetHandleByPciBusId_v2", None) or \
            getattr(lib, "nvmlDeviceGetHandleByPciBusId", None)
        if by_bus is not None and \
                by_bus(pci_bus_id.encode(), ctypes.byref(handle)) == _SUCCESS:
            return Device(lib, handle)
    by_index = getattr(lib, "nvmlDeviceGetHandleByIndex_v2", None) or \
        getattr(lib, "nvmlDeviceGetHandleByIndex", None)
    if by_index is None or by_index(ctypes.c_uint(index), ctypes.byref(handle)) != _SUCCESS:
        return None
    return Device(lib, handle)
