"""Suite-wide test set-up.

- Tests marked `gpu` skip cleanly without a GPU.
- Three targets for every kernel: each interpreter launch made by a test
  (`tilecore.launch` with NumPy arrays) is also compiled through NVRTC to
  cubins for sm_80 and sm_90, and, when a GPU is present, run on it with the
  same inputs; its outputs must equal the interpreter's (bitwise for
  integers, within rounding for floats). Tests of interpreter-only behaviour
  opt out with `@pytest.mark.interpreter_only`; `@pytest.mark.float_scratch(
  "status", ...)` names kernel parameters that are scratch holding float bits
  in integer words (a scan's packed status words): the GPU's reductions round
  them in another association than the interpreter's, so they are not
  compared (the results they lead to are).
"""
import concurrent.futures
import ctypes

import numpy as np
import pytest

COMPILE_ARCHS = ("sm_80", "sm_90")
_COMPILER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="nvrtc")


def pytest_collection_modifyitems(config, items):
    from tilecore.runtime.driver import has_gpu
    if has_gpu():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU and driver")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _float_tolerance(dtype, scale: float) -> tuple[float, float]:
    """(rtol, atol) between GPU and interpreter results: the CUDA math library
    and NumPy differ by a few ulps in transcendental functions, reductions add
    in another order (an error relative to the magnitudes summed, hence the
    atol scaled by the largest result), and a one-ulp difference can flip a
    rounding of a narrow float."""
    size = np.dtype(dtype).itemsize
    if size >= 8:
        return 1e-12, 1e-13 * scale
    if size == 4:
        return 1e-5, 1e-5 * scale
    return 1.6e-2, 1e-6 + 4e-3 * scale


def _compare(name: str, gpu: np.ndarray, cpu: np.ndarray) -> None:
    if gpu.dtype.kind in "biu" or gpu.dtype == np.bool_:
        mismatch = np.flatnonzero(gpu.ravel() != cpu.ravel())
        assert mismatch.size == 0, (f"GPU and interpreter differ in array {name!r} at flat "
                                    f"indices {mismatch[:8]}: {gpu.ravel()[mismatch[:8]]} vs "
                                    f"{cpu.ravel()[mismatch[:8]]}")
        return
    g = gpu.astype(np.float64)
    c = cpu.astype(np.float64)
    assert np.array_equal(np.isnan(g), np.isnan(c)), f"NaN positions differ in array {name!r}"
    finite = np.abs(c[np.isfinite(c)])
    rtol, atol = _float_tolerance(gpu.dtype, 1.0 + (float(finite.max()) if finite.size else 0.0))
    ok = np.isclose(g, c, rtol=rtol, atol=atol) | np.isnan(g)
    bad = np.flatnonzero(~ok.ravel())
    assert bad.size == 0, (f"GPU and interpreter differ in array {name!r} at flat indices "
                           f"{bad[:8]}: {g.ravel()[bad[:8]]} vs {c.ravel()[bad[:8]]}")


def _byte_bounds(a: np.ndarray) -> tuple[int, int]:
    try:
        return np.lib.array_utils.byte_bounds(a)
    except AttributeError:  # NumPy < 2
        return np.byte_bounds(a)


def _same_layout_copy(a: np.ndarray) -> np.ndarray:
    """A copy of `a` with the same strides and offset within its memory span
    (ndarray.copy() would make it contiguous)."""
    if not a.size:
        return a.copy()
    lo, hi = _byte_bounds(a)
    span = np.ctypeslib.as_array((ctypes.c_ubyte * (hi - lo)).from_address(lo)).copy()
    return np.ndarray(a.shape, a.dtype, buffer=span, offset=a.ctypes.data - lo,
                      strides=a.strides)


def _device_copy(cp, value: np.ndarray):
    """A device copy of the whole memory span of `value` (so views keep their
    strides and offset) and the DeviceArray describing `value` inside it."""
    from tilecore.language.dtypes import from_numpy
    from tilecore.runtime.arrays import DeviceArray
    lo, hi = _byte_bounds(value) if value.size else (value.ctypes.data,) * 2
    span = np.ctypeslib.as_array((ctypes.c_ubyte * max(hi - lo, 1)).from_address(lo)) \
        if hi > lo else np.zeros(16, np.uint8)
    buf = cp.asarray(span.copy())
    strides = tuple(s // value.itemsize for s in value.strides)
    arr = DeviceArray(buf.data.ptr + (value.ctypes.data - lo), value.shape, strides,
                      from_numpy(value.dtype), buf.device.id)
    return buf, lo, arr


def _run_on_gpu(kernel, grid, inputs, outputs, scratch=()) -> None:
    import cupy as cp
    from tilecore.host.gpu import launch_gpu
    args, copies = [], []
    for value in inputs:
        if isinstance(value, np.ndarray):
            buf, lo, arr = _device_copy(cp, value)
            args.append(arr)
            copies.append((buf, lo, value))
        else:
            args.append(value)
            copies.append(None)
    launch_gpu(None, grid, kernel, args)
    cp.cuda.runtime.deviceSynchronize()
    names = list(kernel.signature.parameters)
    for name, entry, cpu in zip(names, copies, outputs):
        if entry is None or not entry[2].size or 0 in entry[2].strides or name in scratch:
            continue  # stride 0: a broadcast input (never written), huge when unrolled
        buf, lo, host = entry
        raw = cp.asnumpy(buf)
        got = np.ndarray(host.shape, host.dtype, buffer=raw, offset=host.ctypes.data - lo,
                         strides=host.strides)
        _compare(name, np.array(got), np.asarray(cpu))


@pytest.fixture(autouse=True)
def _three_targets(request, monkeypatch):
    """Wrap the interpreter launch: compile for COMPILE_ARCHS, and on a GPU
    machine re-run the kernel there and compare."""
    if request.node.get_closest_marker("interpreter_only"):
        yield
        return
    import tilecore
    from tilecore.host import cpu
    from tilecore.runtime.driver import has_gpu
    original = cpu.launch_cpu
    marker = request.node.get_closest_marker("float_scratch")
    scratch = frozenset(marker.args if marker else ())

    def checked(kernel, grid, args, to_host=None, from_host=None):
        inputs = [_same_layout_copy(a) if isinstance(a, np.ndarray) else a for a in args]
        original(kernel, grid, args, to_host, from_host)
        if to_host is not None:
            return
        # NVRTC releases the GIL: the first arch compiles in a worker thread
        # while this one compiles the others (about 2x on a cold cache)
        first = _COMPILER.submit(tilecore.compile, kernel, inputs, arch=COMPILE_ARCHS[0])
        try:
            for arch in COMPILE_ARCHS[1:]:
                tilecore.compile(kernel, inputs, arch=arch)
        finally:
            first.result()
        if has_gpu():
            _run_on_gpu(kernel, grid, inputs, args, scratch)

    monkeypatch.setattr(cpu, "launch_cpu", checked)
    yield
