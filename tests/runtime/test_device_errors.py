"""The device error record (runtime/device_errors.py) without a GPU: loading
connects a kernel with checks to its device's record, a record written as
errors.cuh writes it is raised by the next launch (general and fast paths,
which then launch nothing) or by `synchronize()`, and reading it clears it.
Through cuda.bindings against a recording stand-in, and through the C
extension against a stand-in driver library built here (in a subprocess, so
that the real driver stays the one this process uses)."""
import ctypes
import json
import shutil
import struct
import subprocess
import sys
import textwrap

import pytest
from cuda.bindings import driver as real

from tilecore.backend.cuda.rules_control import RANGE_STEP_MESSAGE, DeviceCheck
from tilecore.errors import Loc, TileLaunchError, TileRuntimeError
from tilecore.host.fastpath import make_fast_launch
from tilecore.language import dtypes as D
from tilecore.runtime import device as device_mod
from tilecore.runtime import device_errors
from tilecore.runtime import launch as launch_mod
from tilecore.runtime.bindings_driver import BindingsDriver
from tilecore.runtime.driver import PENDING_DEVICE_ERROR, native_module
from tilecore.runtime.launch import LoadedKernel
from tilecore.testing.fake_driver import build_fake_libcuda

OK = real.CUresult.CUDA_SUCCESS
CTX, MODULE = 0xC0, 0x30D
DEVICE_OFFSET = 0x7000_0000_0000  # device address = host address + this (as a GPU may map it)
CHANNEL_BYTES = 24  # tc::ErrorChannel
LOC = Loc("/nonexistent/kernels.py", 12, 4, function="loop")  # no source line to show
CHECKS = (DeviceCheck("first check, got {value}", Loc("/nonexistent/kernels.py", 7, 4,
                                                      function="loop")),
          DeviceCheck(RANGE_STEP_MESSAGE, LOC))


class FakeDriver:
    """The cuda.bindings.driver functions LoadedKernel, the launchers and
    device_errors call; records them. Its device memory (allocations and the
    module's channel) is host memory, so that a test can play the device."""

    CUfunction_attribute = real.CUfunction_attribute

    def __init__(self, sync_result=OK):
        self.calls, self.memory, self.sync_result = [], [], sync_result
        self.pinned = []                           # (address, size) of page-locked memory
        self.channel = self._buffer(CHANNEL_BYTES)  # the module's tc_error_channel

    def _buffer(self, size):
        buf = ctypes.create_string_buffer(b"\xff" * size, size)  # not zeroed
        self.memory.append(buf)
        return ctypes.addressof(buf)

    def cuCtxGetCurrent(self):
        return (OK, CTX)

    def cuModuleLoadData(self, image):
        return (OK, MODULE)

    def cuModuleGetFunction(self, module, entry):
        return (OK, 0xF00)

    def cuMemHostAlloc(self, size, flags):
        self.calls.append(("host_alloc", size, flags))
        ptr = self._buffer(size)
        self.pinned.append((ptr, size))
        return (OK, ptr)

    def cuMemHostGetDevicePointer(self, ptr, flags):
        return (OK, ptr + DEVICE_OFFSET)

    def cuMemAlloc(self, size):
        self.calls.append(("alloc", size))
        return (OK, self._buffer(size))

    def cuModuleGetGlobal(self, module, name):
        self.calls.append(("global", module, name))
        return (OK, self.channel, CHANNEL_BYTES)

    def cuMemcpyHtoD(self, dst, src, size):
        source = ctypes.addressof(src)
        pinned = any(p <= source and source + size <= p + n for p, n in self.pinned)
        self.calls.append(("htod", dst, bytes(src), size, "pinned" if pinned else "pageable"))
        ctypes.memmove(dst, source, size)
        return (OK,)

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        self.calls.append(("launch", f, (gx, gy, gz)))
        return (OK,)

    def cuCtxSynchronize(self):
        self.calls.append(("sync",))
        return (self.sync_result,)

    def cuStreamSynchronize(self, stream):
        self.calls.append(("sync", stream))
        return (self.sync_result,)

    def cuGetErrorString(self, code):
        return (OK, b"")


class FakeDevice:
    name, arch, max_shared_optin, context = "FakeGPU", "sm_90", 227 * 1024, CTX

    def make_current(self):
        pass


@pytest.fixture
def drv(monkeypatch):
    fake = FakeDriver()
    api = BindingsDriver(fake)
    for mod in (launch_mod, device_errors):
        monkeypatch.setattr(mod, "driver", lambda: api)
    monkeypatch.setattr(device_errors, "_devices", {})
    monkeypatch.setattr(device_errors, "_modules", [])
    return fake


def load(name="loop", checks=CHECKS):
    return LoadedKernel(b"CUBIN", f"tc_{name}", 128, 0, "@i", 1, name, FakeDevice(),
                        checks=checks)


def fail_on_gpu(errors, check, block, value, module=1):
    """Play a failing block's thread 0 in tc::report_error: claim the record by
    moving the device's counter from `taken` to `taken` + 1, write it, set
    `ready`. Whether it claimed the record (else its failure is dropped)."""
    record = device_errors._Record.from_address(errors.host)
    claimed = ctypes.c_uint32.from_address(errors.claimed)
    taken = record.taken
    if claimed.value != taken:
        return False
    claimed.value = (taken + 1) % 2 ** 32
    record.module = module
    record.block[:] = block
    record.value = value
    record.ready = check + 1
    return True


def record_words(errors):
    """(ready, taken, the device's claim counter)."""
    record = device_errors._Record.from_address(errors.host)
    return record.ready, record.taken, ctypes.c_uint32.from_address(errors.claimed).value


def test_a_kernel_with_checks_is_connected_to_its_devices_record(drv):
    k = load()
    plain = load("plain", checks=())
    assert plain.errors is k.errors                       # one record per device
    host, claimed = k.errors.host, k.errors.claimed
    assert drv.calls == [
        ("host_alloc", 56, 2),                            # DEVICEMAP, once: record + staging
        ("alloc", 4),                                     # the claim counter, in device memory
        ("htod", claimed, bytes(4), 4, "pinned"),         # zeroed, by a copy done on return
        ("global", MODULE, b"tc_error_channel"),
        ("htod", drv.channel, struct.pack("<QQII", host + DEVICE_OFFSET, claimed, 1, 0), 24,
         "pinned"),
    ]                                                     # nothing for the kernel without checks
    assert k.errors.device == host + DEVICE_OFFSET
    assert record_words(k.errors) == (0, 0, 0)
    assert bytes((ctypes.c_char * 32).from_address(host)) == bytes(32)
    assert k.launcher._error is not None and plain.launcher._error is not None
    second = load("second")                               # the next module: number 2
    assert drv.calls[-1] == ("htod", drv.channel,
                             struct.pack("<QQII", host + DEVICE_OFFSET, claimed, 2, 0), 24,
                             "pinned")
    assert second.errors is k.errors


def test_the_next_launch_raises_it_and_is_not_made(drv):
    k = load()
    plain = load("plain", checks=())
    k.launch(0, (4, 1, 1), (7,))
    assert fail_on_gpu(k.errors, 1, (3, 0, 2), -5)
    assert not fail_on_gpu(k.errors, 0, (1, 0, 0), 0)     # a later failure is dropped
    assert k.errors.pending()
    with pytest.raises(TileRuntimeError) as e:
        plain.launch(0, (4, 1, 1), (7,))
    assert str(e.value) == (
        f"{RANGE_STEP_MESSAGE.format(value=-5)} (block (3, 0, 2)); kernel \"loop\" failed on the "
        f'GPU, found before launching "plain", which was not launched\n'
        f'  File "/nonexistent/kernels.py", line 12, col 5, in loop:')
    assert e.value.loc == LOC
    assert record_words(k.errors) == (0, 1, 1)            # read: the device may report again
    plain.launch(0, (2, 1, 1), (8,))
    k.launch(0, (1, 1, 1), (9,))
    assert [c[2] for c in drv.calls if c[0] == "launch"] == [(4, 1, 1), (2, 1, 1), (1, 1, 1)]


def _require_extension() -> None:
    """The C extension is part of the package (`pip install -e .` builds it): a
    missing one fails the test. Only TILECORE_NATIVE=0, the user's choice to run
    without it, skips."""
    from tilecore import config
    if not config.native():
        pytest.skip("TILECORE_NATIVE=0 turns the C extension off")
    assert native_module() is not None, "the _cudriver extension was not built"


@pytest.mark.parametrize("native", [True, False], ids=["C", "Python"])
def test_fast_launchers_raise_it(drv, native):
    if native:
        _require_extension()
    k = load()
    fast = make_fast_launch((D.int32,), (5,), 0, {}, k.launcher, k.fail, native=native)
    assert fast(None, (2,), (5,)) is True
    assert fail_on_gpu(k.errors, 0, (1, 0, 0), 0)
    with pytest.raises(TileRuntimeError, match=r"^first check, got 0 \(block \(1, 0, 0\)\); "
                                               r'kernel "loop" failed on the GPU, found before '
                                               r'launching "loop"'):
        fast(None, (2,), (5,))
    assert fast(None, (3,), (5,)) is True
    assert [c[2] for c in drv.calls if c[0] == "launch"] == [(2, 1, 1), (3, 1, 1)]


def test_the_launcher_returns_the_pending_code_without_launching(drv):
    k = load()
    assert fail_on_gpu(k.errors, 1, (0, 0, 0), 0)
    assert k.launcher.launch(0, 1, 1, 1, (1,)) == PENDING_DEVICE_ERROR
    assert k.launcher.launch(0, 1, 1, 1, (1,)) == PENDING_DEVICE_ERROR  # until it is read
    assert not [c for c in drv.calls if c[0] == "launch"]


def test_a_thread_that_finds_it_taken_raises_it_too(drv):
    """Two threads see the flag; one reads the record, the other one's launch
    was not made either and gets the same error."""
    k = load()
    assert fail_on_gpu(k.errors, 1, (2, 0, 0), 0)
    first = k.errors.take("reported by synchronize()")
    assert "reported by synchronize()" in first.message
    second = k.errors.pending_error("loop")
    assert second.message == first.message.replace(
        "reported by synchronize()", 'found before launching "loop", which was not launched')


def test_each_read_frees_the_record_for_the_next_failure(drv):
    """While a record waits, later failures are dropped; reading it frees it
    for the next one, also where the 32-bit counters wrap around."""
    k = load()
    start = 2 ** 32 - 2
    device_errors._Record.from_address(k.errors.host).taken = start
    ctypes.c_uint32.from_address(k.errors.claimed).value = start
    for n, value in enumerate([-1, -2, -3]):
        assert fail_on_gpu(k.errors, 1, (n, 0, 0), value)
        assert not fail_on_gpu(k.errors, 0, (7, 0, 0), 7)
        error = k.errors.take("reported by synchronize()")
        assert error.message.startswith(f"{RANGE_STEP_MESSAGE.format(value=value)} "
                                        f"(block ({n}, 0, 0));")
        after = (start + n + 1) % 2 ** 32
        assert record_words(k.errors) == (0, after, after)
    assert k.errors.take("reported by synchronize()") is None


def test_an_unknown_record_is_reported_as_such(drv):
    k = load()
    assert fail_on_gpu(k.errors, 5, (0, 0, 0), 3, module=42)  # only a stray write does this
    with pytest.raises(TileRuntimeError, match=r"^A kernel reported an unknown device-side error "
                                               r"\(module 42, check 5, block \(0, 0, 0\), "
                                               r"value 3\)"):
        k.launch(0, (1, 1, 1), (1,))


@pytest.fixture
def gpu_present(monkeypatch):
    monkeypatch.setattr(device_errors, "has_gpu", lambda: True)
    monkeypatch.setattr(device_mod, "current_device_ordinal", lambda: 0)
    monkeypatch.setattr(device_mod, "get_device", lambda ordinal: FakeDevice())


def test_synchronize_waits_then_raises_and_clears(drv, gpu_present):
    k = load()
    device_errors.synchronize()
    assert fail_on_gpu(k.errors, 1, (0, 1, 0), 0)
    with pytest.raises(TileRuntimeError) as e:
        device_errors.synchronize(0x1234)
    assert e.value.message == (f"{RANGE_STEP_MESSAGE.format(value=0)} (block (0, 1, 0)); "
                               f'kernel "loop" failed on the GPU, reported by synchronize()')
    device_errors.synchronize()
    assert [c for c in drv.calls if c[0] == "sync"] == [("sync",), ("sync", 0x1234), ("sync",)]
    k.launch(0, (1, 1, 1), (1,))


def test_synchronize_names_a_failed_wait(drv, gpu_present):
    drv.sync_result = real.CUresult.CUDA_ERROR_ILLEGAL_ADDRESS
    with pytest.raises(TileLaunchError) as e:
        device_errors.synchronize()
    assert str(e.value) == ("synchronize() failed with CUDA_ERROR_ILLEGAL_ADDRESS: a kernel "
                            "(possibly an earlier one) accessed invalid memory; the context is "
                            "now unusable")


def test_synchronize_without_a_gpu_does_nothing(monkeypatch):
    monkeypatch.setattr(device_errors, "has_gpu", lambda: False)
    device_errors.synchronize()
    device_errors.synchronize(0x1234)


def test_the_c_extension_agrees_on_the_pending_code():
    _require_extension()
    native = native_module()
    assert native.PENDING_DEVICE_ERROR == PENDING_DEVICE_ERROR


# ---- the C extension against a stand-in driver library ---------------------------------

FAKE_LIBCUDA = r"""
int launches = 0, syncs = 0;
u64 last_source = 0;  /* of the last cuMemcpyHtoD */
unsigned char channel[24];
static void *current = 0;
int cuCtxGetCurrent(void **c) { *c = current; return 0; }
int cuCtxSetCurrent(void *c) { current = c; return 0; }
int cuLaunchKernel() { launches++; return 0; }
int cuLaunchKernelEx() { launches++; return 0; }
int cuMemHostAlloc(void **p, size_t n, unsigned f) { *p = malloc(n); memset(*p, 0xff, n); return 0; }
int cuMemHostGetDevicePointer_v2(u64 *d, void *p, unsigned f) { *d = (u64)p; return 0; }
int cuMemAlloc_v2(u64 *d, size_t n) { *d = (u64)malloc(n); memset((void *)*d, 0xff, n); return 0; }
int cuModuleGetGlobal_v2(u64 *d, size_t *n, void *m, const char *name) {
    *d = (u64)channel; *n = strcmp(name, "tc_error_channel") ? 0 : 24; return 0;
}
int cuMemcpyHtoD_v2(u64 d, const void *s, size_t n) {
    memcpy((void *)d, s, n); last_source = (u64)s; return 0;
}
int cuCtxSynchronize(void) { syncs++; return 0; }
int cuStreamSynchronize(void *s) { syncs++; return 0; }
"""

C_DRIVER_SCRIPT = textwrap.dedent(r"""
    import ctypes, json, struct, sys
    from tilecore.runtime import driver as rt
    rt.LIBCUDA = sys.argv[1]                        # before the driver is first loaded
    import tilecore
    from tilecore.backend.cuda.rules_control import RANGE_STEP_MESSAGE, DeviceCheck
    from tilecore.errors import Loc, TileRuntimeError
    from tilecore.host.fastpath import make_fast_launch
    from tilecore.language import dtypes as D
    from tilecore.runtime import device_errors
    from tilecore.runtime.device import get_device
    from tilecore.runtime.launch import LoadedKernel
    lib = ctypes.CDLL(sys.argv[1])
    launches = ctypes.c_int.in_dll(lib, "launches")
    out = {}
    check = DeviceCheck(RANGE_STEP_MESSAGE, Loc("k.py", 6, 4, function="k"))
    k = LoadedKernel(b"CUBIN", "tc_k", 32, 0, "@i", 1, "k", get_device(0), checks=(check,))
    out["launcher"] = type(k.launcher).__name__
    channel = bytes((ctypes.c_ubyte * 24).in_dll(lib, "channel"))
    out["channel"] = list(struct.unpack("<QQII", channel))
    out["record"] = [k.errors.host, k.errors.device, k.errors.claimed]
    claimed = ctypes.c_uint32.from_address(k.errors.claimed)
    out["claimed"] = claimed.value
    out["source"] = ctypes.c_uint64.in_dll(lib, "last_source").value - k.errors.host
    k.launch(0, (2, 1, 1), (7,))
    fast = make_fast_launch((D.int32,), (7,), 0, {}, k.launcher, k.fail)
    out["fast"] = [type(fast).__name__, fast(None, (2,), (7,))]
    out["launches"] = [launches.value]
    record = device_errors._Record.from_address(k.errors.host)
    def fail_on_gpu(value):                        # as in tc::report_error
        assert claimed.value == record.taken
        claimed.value += 1
        record.module, record.value, record.ready = 1, value, 1
    errors = []
    for report in (lambda: fast(None, (2,), (7,)), lambda: k.launch(0, (1, 1, 1), (7,)),
                   tilecore.synchronize):
        fail_on_gpu(-len(errors))
        try:
            report()
            errors.append(None)
        except TileRuntimeError as e:
            errors.append(e.message)
        out["launches"].append(launches.value)
    out["errors"] = errors
    out["words"] = [record.ready, record.taken, claimed.value]
    out["after"] = [fast(None, (2,), (7,)), launches.value, ctypes.c_int.in_dll(lib, "syncs").value]
    print(json.dumps(out))
""")


@pytest.mark.skipif(native_module() is None, reason="the _cudriver extension was not built")
@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_the_c_launcher_and_fast_launcher_report_it(tmp_path):
    lib = build_fake_libcuda(tmp_path, FAKE_LIBCUDA)
    done = subprocess.run([sys.executable, "-c", C_DRIVER_SCRIPT, str(lib)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    host, device, claimed = out["record"]
    assert out["launcher"] == "Launcher"
    assert out["channel"] == [device, claimed, 1, 0]
    assert out["claimed"] == 0                # the counter was zeroed
    assert out["source"] == device_errors._Pinned.staging.offset  # copies come from pinned memory
    assert out["fast"] == ["FastLaunch", True]
    note = 'kernel "k" failed on the GPU, '
    found = note + 'found before launching "k", which was not launched'
    assert out["errors"] == [
        f"{RANGE_STEP_MESSAGE.format(value=0)} (block (0, 0, 0)); {found}",
        f"{RANGE_STEP_MESSAGE.format(value=-1)} (block (0, 0, 0)); {found}",
        f"{RANGE_STEP_MESSAGE.format(value=-2)} (block (0, 0, 0)); {note}reported by synchronize()",
    ]
    assert out["words"] == [0, 3, 3]         # read three times, free
    assert out["launches"] == [2, 2, 2, 2]   # none of the reporting launches was made
    assert out["after"] == [True, 3, 1]
