"""Per-device facts (architecture, SM count, shared-memory limit) and its
primary context.

tilecore runs in the device's primary context, the one the CUDA runtime (and
so CuPy and PyTorch) use too, so memory from those libraries is valid in our
launches. `Device.make_current()` is called on every launch: it compares the
current context with ours and only switches when they differ.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from . import driver as cu
from .driver import check, driver

__all__ = ["Device", "get_device", "device_count", "current_device_ordinal"]


@dataclass(frozen=True)
class Device:
    """One GPU: `arch` is the NVRTC target ("sm_90"), `max_shared_optin` the
    most dynamic shared memory a block may opt into, in bytes."""

    ordinal: int
    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    max_shared_optin: int
    handle: int = field(repr=False, compare=False)    # CUdevice
    context: int = field(repr=False, compare=False)   # retained primary CUcontext

    @property
    def arch(self) -> str:
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"

    def make_current(self) -> None:
        """Make this device's primary context current on the calling thread,
        with one cheap query when it already is."""
        api = driver()
        err, ctx = api.current_context()
        if err or ctx != self.context:
            check(api.set_current_context(self.context))


_devices: dict[int, Device] = {}
_lock = threading.Lock()


def device_count() -> int:
    """Number of CUDA devices the driver reports."""
    return check(driver().device_count())


def _open(ordinal: int) -> Device:
    api = driver()
    count = device_count()
    if not 0 <= ordinal < count:
        raise ValueError(f"Invalid device ordinal {ordinal}: this machine has {count} "
                         f"CUDA device(s)")
    dev = check(api.device_get(ordinal))

    def get(attr: int) -> int:
        return int(check(api.device_attribute(attr, dev)))

    name = check(api.device_name(dev))
    ctx = check(api.primary_context(dev))
    return Device(
        ordinal=ordinal,
        name=name,
        compute_capability=(get(cu.DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                            get(cu.DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)),
        sm_count=get(cu.DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
        max_shared_optin=get(cu.DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
        handle=dev,
        context=ctx,
    )


def get_device(ordinal: int) -> Device:
    """The `Device` for a CUDA ordinal, opened once and cached (its primary
    context stays retained for the life of the process)."""
    dev = _devices.get(ordinal)
    if dev is None:
        with _lock:
            dev = _devices.get(ordinal)
            if dev is None:
                dev = _devices[ordinal] = _open(ordinal)
    return dev


def current_device_ordinal() -> int:
    """Ordinal of the device of the calling thread's current context, 0 when
    no context is current (the CUDA runtime's default device)."""
    api = driver()
    if check(api.current_context()) == 0:
        return 0
    return check(api.context_device())
