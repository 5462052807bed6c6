"""Errors found by a kernel on the GPU (a check that Python makes at run
time, such as a `range()` step that is not positive), reported by the host
as a `TileRuntimeError` that names the kernel line, while the CUDA context
stays usable: a kernel never traps (`__trap()` would make every later CUDA
call in the process fail).

How it works:
- Each device has one error record (`_Record`, mirrored by
  `include/tilecore/errors.cuh`) in page-locked host memory mapped into the
  device's address space (one page pinned for the life of the process), and
  one 32-bit claim counter in the device's memory, both allocated when the
  first kernel is loaded on the device. The device only loads and stores the
  record: atomics on mapped host memory are not atomic for the host, and not
  allowed at all on a GPU without host-native atomics (a PCIe H100).
- A module whose kernel contains checks gets, when loaded, the record's and
  the counter's device addresses and a module number in its
  `tc_error_channel` global (one copy at load time; nothing per launch). The
  record is free while the counter equals the record's `taken` count (how
  many records the host has read). A failing block claims it by moving the
  counter from `taken` to `taken + 1` (a device-scope compare-and-swap: the
  first block wins; failures until the host has read the record are
  dropped), writes the module, its block index and the offending value,
  fences, and then sets `ready` = 1 + the check's index in the kernel's table
  (`CompiledKernel.checks`: the message and the kernel line). Every thread of
  the block then returns.
- Every launcher holds the address of its device's `ready` word. A launch
  reads that one word (no driver call): while it is set, the launch is not
  made and returns PENDING_DEVICE_ERROR, and `LoadedKernel.fail` raises the
  recorded error. Reading the record frees it with one 8-byte store to host
  memory (`ready` = 0 and `taken` + 1; no driver call), so the next launch
  works and the next failure is recorded.

The error is asynchronous, like CUDA's own launch errors: the launch that
failed returns normally and its error is raised by the first tilecore launch
on that device (of any kernel, on any stream) made after the failing kernel
has finished, or by `synchronize()`. Kernels replayed from a CUDA graph report
the same way. The failing kernel's blocks that passed the check ran to
completion; those that failed stopped at the check.
"""
from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from ..errors import Loc, TileLaunchError, TileRuntimeError
from .driver import MEMHOSTALLOC_DEVICEMAP, CudaError, check, driver, has_gpu

__all__ = ["DeviceErrors", "errors_for", "connect", "synchronize", "CHANNEL_SYMBOL"]

CHANNEL_SYMBOL = b"tc_error_channel"  # the module global of errors.cuh


class _Record(ctypes.Structure):
    """tc::ErrorRecord of errors.cuh."""

    _fields_ = [("ready", ctypes.c_uint32), ("taken", ctypes.c_uint32),
                ("module", ctypes.c_uint32), ("block", ctypes.c_uint32 * 3),
                ("value", ctypes.c_int64)]


class _Channel(ctypes.Structure):
    """tc::ErrorChannel of errors.cuh."""

    _fields_ = [("record", ctypes.c_uint64), ("claimed", ctypes.c_uint64),
                ("module", ctypes.c_uint32), ("unused", ctypes.c_uint32)]


class _Pinned(ctypes.Structure):
    """A device's page-locked host memory: its record, and the source of the
    copies to its memory (`DeviceErrors.upload`)."""

    _fields_ = [("record", _Record), ("staging", ctypes.c_char * ctypes.sizeof(_Channel))]


# module number - 1 -> (kernel name, its checks); a loaded module stays loaded for the
# life of the process, and so does its entry
_modules: list[tuple[str, tuple]] = []
_devices: dict[int, "DeviceErrors"] = {}  # primary context -> its record
_lock = threading.Lock()


@dataclass(frozen=True)
class _Failure:
    """A device-side error read from a record."""

    kernel: str
    message: str          # as the interpreter words it, with the block
    loc: Optional[Loc]

    def error(self, note: str) -> TileRuntimeError:
        """The TileRuntimeError, with `note` saying how it was found."""
        return TileRuntimeError(f'{self.message}; kernel "{self.kernel}" failed on the GPU, '
                                f"{note}", self.loc)


def _failure(module: int, index: int, block: tuple, value: int) -> _Failure:
    """What check `index` of module number `module` reported."""
    if not 0 < module <= len(_modules) or not 0 <= index < len(_modules[module - 1][1]):
        # only a stray write into the record can get here
        return _Failure("?", f"A kernel reported an unknown device-side error (module {module}, "
                             f"check {index}, block {block}, value {value})", None)
    kernel, checks = _modules[module - 1]
    c = checks[index]
    return _Failure(kernel, f"{c.message.format(value=value)} (block {block})", c.loc)


class DeviceErrors:
    """One device's error record: `host` and `device` are its two addresses,
    `flag` the address of its `ready` word (what launchers read), `claimed`
    the device address of the device's claim counter."""

    def __init__(self, host: int, device: int, claimed: int):
        self.host = host
        self.device = device
        self.claimed = claimed
        self.flag = host + _Record.ready.offset
        self._record = _Record.from_address(host)
        # `ready` and `taken`, written together by one 8-byte store (little-endian: `ready`
        # is the low word), so that no block can claim the record before `ready` is 0
        self._ready_taken = ctypes.c_uint64.from_address(host + _Record.ready.offset)
        self._staging = host + _Pinned.staging.offset
        self._lock = threading.Lock()
        self._last: Optional[_Failure] = None

    def upload(self, dptr: int, data: bytes) -> None:
        """Copy `data` to the device memory at `dptr` from the page-locked
        staging area: cuMemcpyHtoD from page-locked memory has finished when it
        returns, so every kernel launched afterwards, on any stream, sees the
        data (one from pageable memory may still be in flight). The caller
        holds the module's `_lock` (the staging area is shared). Raises
        CudaError."""
        assert len(data) <= _Pinned.staging.size, "the staging area holds a channel"
        ctypes.memmove(self._staging, data, len(data))
        source = (ctypes.c_char * len(data)).from_address(self._staging)
        check(driver().memcpy_htod(dptr, source))

    def pending(self) -> bool:
        """Whether a device-side error waits to be reported."""
        return bool(self._record.ready)

    def _take(self) -> Optional[_Failure]:
        if not self._record.ready:
            return None
        with self._lock:  # also orders the reads below after the read of `ready` above
            r = self._record
            ready = r.ready
            if not ready:  # another thread took it
                return None
            failure = _failure(r.module, ready - 1, tuple(r.block), r.value)
            self._ready_taken.value = ((r.taken + 1) & 0xFFFF_FFFF) << 32  # frees the record
            self._last = failure
            return failure

    def take(self, note: str) -> Optional[TileRuntimeError]:
        """The recorded error with `note` (None when there is none), and clear
        the record so that the device may report the next one."""
        failure = self._take()
        return None if failure is None else failure.error(note)

    def pending_error(self, launching: str) -> TileRuntimeError:
        """The error to raise for a launch of `launching` that found the flag
        set and was not made. If another thread took the record meanwhile, its
        error is raised here too: this launch was not made either."""
        failure = self._take() or self._last
        assert failure is not None, "the flag was set, so an error was recorded"
        return failure.error(f'found before launching "{launching}", which was not launched')


def errors_for(device: Any) -> DeviceErrors:
    """The error record of `device` (a runtime Device, whose primary context is
    current), allocated on first use. Raises CudaError."""
    errors = _devices.get(device.context)
    if errors is None:
        with _lock:
            errors = _devices.get(device.context)
            if errors is None:
                api = driver()
                size = ctypes.sizeof(_Pinned)
                host = check(api.mem_host_alloc(size, MEMHOSTALLOC_DEVICEMAP))
                ctypes.memset(host, 0, size)
                claimed = check(api.mem_alloc(ctypes.sizeof(ctypes.c_uint32)))
                errors = DeviceErrors(host, check(api.mem_host_device_pointer(host)), claimed)
                errors.upload(claimed, bytes(ctypes.sizeof(ctypes.c_uint32)))  # = taken
                _devices[device.context] = errors
    return errors


def connect(module: int, errors: DeviceErrors, kernel: str, checks: Sequence) -> None:
    """Point the loaded `module` (of `kernel`, whose run-time checks are
    `checks`, by index) at its device's error record. Raises CudaError, or
    TileLaunchError when the module's channel is not errors.cuh's."""
    api = driver()
    dptr, size = check(api.module_global(module, CHANNEL_SYMBOL))
    if size != ctypes.sizeof(_Channel):
        raise TileLaunchError(f'Kernel "{kernel}": its {CHANNEL_SYMBOL.decode()} has {size} '
                              f"bytes, expected {ctypes.sizeof(_Channel)}")
    with _lock:
        _modules.append((kernel, tuple(checks)))
        channel = _Channel(errors.device, errors.claimed, len(_modules), 0)
        errors.upload(dptr, bytes(channel))


def synchronize(stream: Any = None) -> None:
    """Wait until the GPU has finished the work queued on `stream` (None: all
    work of the current device, every stream), then raise the first device-side
    error a tilecore kernel recorded since the last one was reported, on any
    device (a TileRuntimeError naming the kernel line), clearing it.

    Launch errors are asynchronous: a failing kernel's launch returns normally,
    and its error is raised by the next tilecore launch on the device made after
    it finished, or by this call. Without a GPU (interpreter launches finish
    before `launch` returns) it does nothing."""
    if not has_gpu():
        return
    from .device import current_device_ordinal, get_device
    from .streams import stream_handle
    api = driver()
    get_device(current_device_ordinal()).make_current()
    try:
        if stream is None:
            check(api.ctx_synchronize())
        else:
            check(api.stream_synchronize(stream_handle(stream)))
    except CudaError as e:
        from .launch import error_hint
        hint = error_hint(e.name)
        raise TileLaunchError(f"synchronize() failed with {e.name}" +
                              (f": {hint}" if hint else "")) from None
    for errors in list(_devices.values()):
        error = errors.take("reported by synchronize()")
        if error is not None:
            raise error
