"""A `range()` step known only at run time must be positive, as in Python:
the interpreter raises, and compiled kernels check it on the device and end
the launch with a TileRuntimeError naming the loop's line, with the same text
(runtime/device_errors.py); the CUDA context stays usable. Constant steps are
checked by the front end, and their loops carry no check."""
import re

import numpy as np
import pytest

import tilecore as ct
from tilecore.backend.cuda.rules_control import RANGE_STEP_MESSAGE
from tilecore.runtime.driver import has_gpu

ARCHS = ("sm_80", "sm_90")
THIS_FILE = __file__


def _line(marker: str) -> int:
    """1-based line of this file holding `marker` (in a comment) once."""
    with open(THIS_FILE) as f:
        lines = [i + 1 for i, text in enumerate(f) if text.rstrip().endswith(f"# {marker}")]
    assert len(lines) == 1, marker
    return lines[0]


@ct.kernel
def sum_range(out, start, stop, step):
    acc = ct.zeros((16,), ct.int32)
    for i in range(start, stop, step):  # loop:sum_range
        acc = acc + i
    ct.store(out, index=(ct.bid(0),), tile=acc)


@ct.kernel
def nested(out, n, outer_step, inner_step):
    acc = ct.zeros((16,), ct.int32)
    for i in range(0, n, outer_step):  # loop:outer
        if i % 2 == 0:
            for j in range(i, n, inner_step):  # loop:inner
                acc = acc + j
    ct.store(out, index=(0,), tile=acc)


@ct.kernel
def constant_steps(out, n, STEP: ct.Constant[int]):
    acc = ct.zeros((16,), ct.int32)
    s = 2
    for i in range(0, n, s):            # a constant through a variable
        acc = acc + i
    for i in range(0, n, STEP * 3):     # a Constant parameter, folded
        acc = acc + i
    for i in range(0, n, ct.int32(4)):  # a strictly typed constant
        acc = acc + i
    for i in range(n):                  # the default step
        acc = acc + i
    ct.store(out, index=(0,), tile=acc)


def _out():
    return np.zeros(16, np.int32)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_run_time_step_is_checked_before_the_loop(arch):
    compiled = ct.compile(sum_range, (_out(), 0, 10, 3), arch=arch)
    src = compiled.source
    assert '#include "tilecore/errors.cuh"' in src
    step = re.search(r"const tc::Frag<int, 1> (v\d+) = \{\{arg3\}\};  // step", src).group(1)
    check = f"if ({step}.v[0] <= 0) {{ tc::report_error(0u, (long long){step}.v[0]); return; }}"
    assert src.count(check) == 1
    assert src.index(check) < src.index("for (long long")
    assert compiled.checks == (compiled.checks[0],)
    c = compiled.checks[0]
    assert c.message == RANGE_STEP_MESSAGE
    assert (c.loc.filename, c.loc.line, c.loc.col, c.loc.function) == \
        (THIS_FILE, _line("loop:sum_range"), 4, "sum_range")
    assert compiled.cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("arch", ARCHS)
def test_each_loop_has_its_own_check(arch):
    compiled = ct.compile(nested, (_out(), 10, 1, 1), arch=arch)
    assert [(c.loc.line, c.loc.col) for c in compiled.checks] == \
        [(_line("loop:outer"), 4), (_line("loop:inner"), 12)]
    assert "tc::report_error(0u," in compiled.source
    assert "tc::report_error(1u," in compiled.source


@pytest.mark.parametrize("arch", ARCHS)
def test_constant_steps_carry_no_check(arch):
    compiled = ct.compile(constant_steps, (_out(), 10, 1), arch=arch)
    assert compiled.checks == ()
    assert "errors.cuh" not in compiled.source
    assert "report_error" not in compiled.source


def _ptx(source: str, arch: str) -> str:
    """`source` compiled to PTX by NVRTC (which needs no driver)."""
    from cuda.bindings import nvrtc

    from tilecore.backend.cuda.nvrtc import INCLUDE_DIR, _cuda_include_dir
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"kernel.cu", 0, [], [])
    assert not err
    try:
        opts = [f"--gpu-architecture=compute_{arch[3:]}".encode(), b"-std=c++17",
                f"-I{INCLUDE_DIR}".encode(), f"-I{_cuda_include_dir()}".encode()]
        assert nvrtc.nvrtcCompileProgram(prog, len(opts), opts)[0] == 0
        err, size = nvrtc.nvrtcGetPTXSize(prog)
        ptx = b" " * size
        assert nvrtc.nvrtcGetPTX(prog, ptx)[0] == 0
        return ptx.rstrip(b"\0").decode()
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


@pytest.mark.parametrize("arch", ARCHS)
def test_the_check_makes_no_atomic_on_host_memory(arch):
    """A GPU without host-native atomics (a PCIe H100) allows no atomic on
    mapped host memory: the check claims its device's error record with one
    device-scope compare-and-swap on device memory, and only loads and stores
    the record itself (runtime/device_errors.py)."""
    ptx = _ptx(ct.compile(sum_range, (_out(), 0, 10, 3), arch=arch).source, arch)
    atomics = re.findall(r"\b(?:atom|red)\.[\w.:]+", ptx)
    assert len(atomics) == 1 and ".cas." in atomics[0] and ".sys" not in atomics[0], atomics
    assert "membar.sys" in ptx or "fence.sc.sys" in ptx     # the record's fields before `ready`


def test_a_64_bit_step_is_checked_in_64_bits():
    @ct.kernel
    def wide(out, n, step):
        acc = ct.zeros((16,), ct.int64)
        for i in range(0, n, step):
            acc = acc + i
        ct.store(out, index=(0,), tile=acc)

    compiled = ct.compile(wide, (np.zeros(16, np.int64), 10, np.int64(3)), arch="sm_90")
    assert "(long long)v" in compiled.source and len(compiled.checks) == 1
    out = np.zeros(16, np.int64)
    ct.launch(None, (1,), wide, (out, 10, np.int64(2 ** 33)))
    np.testing.assert_array_equal(out, 0)
    with pytest.raises(ct.TileRuntimeError, match=r"got -8589934592 \(block \(0, 0, 0\)\)"):
        ct.launch(None, (1,), wide, (out, 10, np.int64(-2 ** 33)))


@pytest.mark.parametrize("step", [0, -3])
def test_the_interpreter_raises_at_the_loop_line(step):
    out = np.zeros(3 * 16, np.int32)
    with pytest.raises(ct.TileRuntimeError) as e:
        ct.launch(None, (3,), sum_range, (out, 0, 10, step))
    line = _line("loop:sum_range")
    assert str(e.value) == (
        f"{RANGE_STEP_MESSAGE.format(value=step)} (block (0, 0, 0))\n"
        f'  File "{THIS_FILE}", line {line}, col 5, in sum_range:\n'
        f"    for i in range(start, stop, step):  # loop:sum_range\n"
        f"    ^")
    assert isinstance(e.value, RuntimeError)


def test_the_interpreter_checks_even_an_empty_range():
    """Python's range(5, 0, 0) raises although it would run no iteration."""
    with pytest.raises(ct.TileRuntimeError, match="strictly positive, got 0"):
        ct.launch(None, (1,), sum_range, (_out(), 5, 0, 0))


def test_positive_run_time_steps_run():
    out = np.zeros(2 * 16, np.int32)
    ct.launch(None, (2,), sum_range, (out, 1, 10, 4))  # 1 + 5 + 9
    np.testing.assert_array_equal(out, 15)
    out = _out()
    ct.launch(None, (1,), nested, (out, 7, 2, 3))  # i in 0 2 4 6; j from i by 3
    want = sum(j for i in range(0, 7, 2) if i % 2 == 0 for j in range(i, 7, 3))
    np.testing.assert_array_equal(out, want)


# ---- on the GPU -------------------------------------------------------------------------


@ct.kernel
def fill(out, value):
    ct.store(out, index=(ct.bid(0),), tile=ct.full((16,), value, ct.int32))


@ct.kernel
def per_block_step(out, offset, n):
    """Block b's step is b - offset: blocks up to `offset` fail, each with its own value."""
    bid = ct.bid(0)
    acc = ct.zeros((16,), ct.int32)
    for i in range(0, n, bid - offset):
        acc = acc + i
    ct.store(out, index=(bid,), tile=acc)


@ct.kernel
def reduce_in_loop(x, out, n):
    """A block reduction (512 threads: barriers) inside the loop; odd blocks have
    step 1, even ones 0."""
    bid = ct.bid(0)
    total = ct.zeros((1,), ct.float32)
    for i in range(0, n, bid % 2):
        total = total + ct.sum(ct.load(x, index=(i,), shape=(4096,)), axis=0, keepdims=True)
    ct.store(out, index=(bid,), tile=total)


@pytest.fixture
def api(request, monkeypatch):
    """The driver calls made through one implementation (`request.param`), with the
    matching fast launcher (C with the C driver, Python with cuda.bindings); the
    kernels' launch state is rebuilt for it. No device error is left behind."""
    from tilecore.runtime import device_errors
    from tilecore.runtime import driver as rt_driver
    from tilecore.runtime.bindings_driver import BindingsDriver
    if request.param == "native":
        impl = rt_driver.native_module()
        assert impl is not None, "the _cudriver extension was not built"
        impl.open(rt_driver.LIBCUDA)
    else:
        impl = BindingsDriver()
    assert rt_driver.check(impl.init(0)) is None
    monkeypatch.setattr(rt_driver, "_driver", impl)
    monkeypatch.setenv("TILECORE_NATIVE", "1" if request.param == "native" else "0")
    for k in (sum_range, fill, per_block_step, reduce_in_loop):
        k.backend_cache.clear()
    yield request.param
    for errors in device_errors._devices.values():
        errors.take("")


def gpu_test(fn):
    """A GPU test, run through each driver implementation (the `api` fixture)."""
    fn = pytest.mark.parametrize("api", ["native", "bindings"], indirect=True)(fn)
    fn = pytest.mark.skipif(not has_gpu(), reason="needs a GPU")(fn)
    return pytest.mark.gpu(fn)


def _expected(step: int, block: tuple, note: str, kernel: str = "sum_range") -> str:
    line = _line("loop:sum_range")
    return (f"{RANGE_STEP_MESSAGE.format(value=step)} (block {block}); kernel \"{kernel}\" "
            f"failed on the GPU, {note}\n"
            f'  File "{THIS_FILE}", line {line}, col 5, in sum_range:\n'
            f"    for i in range(start, stop, step):  # loop:sum_range\n"
            f"    ^")


@gpu_test
def test_step_zero_fails_the_launch_and_the_context_stays_usable(api):
    cp = pytest.importorskip("cupy")
    out = cp.full(4 * 16, -1, cp.int32)
    ct.launch(None, (4,), sum_range, (out, 0, 10, 1))           # general path
    assert (cp.asnumpy(out) == 45).all()
    fast = sum_range.backend_cache["fast_launch"]
    assert (type(fast).__name__ == "FastLaunch") is (api == "native")
    out.fill(-1)
    ct.launch(None, (4,), sum_range, (out, 0, 10, 0))           # fast path; fails on the GPU
    cp.cuda.Device().synchronize()
    with pytest.raises(ct.TileRuntimeError) as e:               # fast path: reported, not made
        ct.launch(None, (4,), sum_range, (out, 0, 10, 1))
    block = tuple(int(b) for b in e.value.message.split("(block (")[1].split(")")[0].split(", "))
    assert block[0] in range(4) and block[1:] == (0, 0)
    assert str(e.value) == _expected(0, block, 'found before launching "sum_range", which was '
                                               "not launched")
    ct.synchronize()                                            # nothing pending any more
    assert (cp.asnumpy(out) == -1).all()                        # neither launch stored
    ct.launch(None, (4,), sum_range, (out, 0, 10, 1))           # the context works
    ct.launch(None, (4,), sum_range, (out, 2, 9, 3))
    ct.synchronize()
    assert (cp.asnumpy(out) == 2 + 5 + 8).all()


@gpu_test
def test_synchronize_and_other_kernels_report_it(api):
    cp = pytest.importorskip("cupy")
    out = cp.zeros(16, cp.int32)
    ct.launch(None, (1,), sum_range, (out, 0, 10, -2))
    with pytest.raises(ct.TileRuntimeError) as e:
        ct.synchronize()
    assert str(e.value) == _expected(-2, (0, 0, 0), "reported by synchronize()")
    ct.synchronize()
    ct.launch(None, (1,), sum_range, (out, 0, 10, 0))
    cp.cuda.Device().synchronize()
    with pytest.raises(ct.TileRuntimeError) as e:               # the general path of another kernel
        ct.launch(None, (1,), fill, (out, 7))
    assert str(e.value) == _expected(0, (0, 0, 0), 'found before launching "fill", which was '
                                                   "not launched")
    ct.launch(None, (1,), fill, (out, 7))
    ct.synchronize()
    assert (cp.asnumpy(out) == 7).all()


@gpu_test
def test_many_failing_blocks_report_one_consistent_record(api):
    """Blocks 0..500 fail at once with steps -500..0: one of them is reported,
    with its own block index and value (the record is never a mix)."""
    cp = pytest.importorskip("cupy")
    out = cp.zeros(2000 * 16, cp.int32)
    for _ in range(5):
        ct.launch(None, (2000,), per_block_step, (out, 500, 10))
        with pytest.raises(ct.TileRuntimeError) as e:
            ct.synchronize()
        text = e.value.message
        value = int(text.split("got ")[1].split(" ")[0])
        block = int(text.split("(block (")[1].split(",")[0])
        assert 0 <= block <= 500 and value == block - 500, text
    ct.synchronize()
    want = np.array([sum(range(0, 10, b - 500)) if b > 500 else 0 for b in range(2000)])
    got = cp.asnumpy(out).reshape(2000, 16)
    np.testing.assert_array_equal(got[501:], np.repeat(want[501:, None], 16, axis=1))


@gpu_test
def test_failing_blocks_leave_no_barrier_waiting(api):
    cp = pytest.importorskip("cupy")
    x = cp.ones(4 * 4096, dtype=cp.float32)
    out = cp.full(64, -1.0, cp.float32)
    ct.launch(None, (64,), reduce_in_loop, (x, out, 4))
    with pytest.raises(ct.TileRuntimeError, match="got 0"):
        ct.synchronize()
    got = cp.asnumpy(out)
    assert (got[0::2] == -1).all()
    assert (got[1::2] == 4 * 4096).all()


@gpu_test
def test_a_stream_and_a_graph_replay_report_it(api):
    cp = pytest.importorskip("cupy")
    stream = cp.cuda.Stream(non_blocking=True)
    out = cp.zeros(16, cp.int32)
    ct.launch(stream, (1,), sum_range, (out, 0, 10, 1))
    ct.launch(stream, (1,), sum_range, (out, 0, 10, 0))
    with pytest.raises(ct.TileRuntimeError, match="reported by synchronize"):
        ct.synchronize(stream)
    if not hasattr(stream, "begin_capture"):
        return
    stream.begin_capture()
    ct.launch(stream, (1,), sum_range, (out, 0, 10, 0))
    graph = stream.end_capture()
    ct.synchronize()                                    # capturing ran nothing
    graph.launch(stream)
    with pytest.raises(ct.TileRuntimeError, match="got 0"):
        ct.synchronize(stream)
    ct.launch(stream, (1,), sum_range, (out, 0, 10, 3))
    ct.synchronize(stream)
    assert (cp.asnumpy(out) == 18).all()
