"""Programmatic dependent launch: every kernel starts by waiting for the
stream's previous grid (griddepcontrol.wait on sm_90 and newer, nothing below),
CompiledKernel.pdl says which builds may be launched that way, and on the GPU
chains of kernels that each read the previous one's output and overwrite its
input keep stream order. The launch attributes are checked in
tests/runtime/test_launch.py."""
import numpy as np
import pytest
from cuda.bindings import nvrtc

import tilecore as ct
from tilecore.backend.cuda.arch import arch_number, supports_clusters, supports_pdl
from tilecore.backend.cuda.nvrtc import INCLUDE_DIR, _cuda_include_dir


@ct.kernel
def shift(x, y, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    ct.store(y, index=(bid,), tile=ct.load(x, index=(bid,), shape=(TILE,)) + 1)


def _body(source: str) -> list[str]:
    start = source.index('extern "C"')
    return source[source.index(") {\n", start) + 4:].splitlines()


def _ptx(source: str, arch: str) -> str:
    """The PTX NVRTC makes of `source` (tilecore itself only ever asks for cubins)."""
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"k.cu", 0, [], [])
    assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS
    opts = [f"-arch=compute_{arch[3:]}".encode(), b"-std=c++17",
            f"-I{INCLUDE_DIR}".encode(), f"-I{_cuda_include_dir()}".encode()]
    try:
        assert nvrtc.nvrtcCompileProgram(prog, len(opts), opts)[0] == \
            nvrtc.nvrtcResult.NVRTC_SUCCESS
        err, size = nvrtc.nvrtcGetPTXSize(prog)
        ptx = b" " * size
        assert nvrtc.nvrtcGetPTX(prog, ptx)[0] == nvrtc.nvrtcResult.NVRTC_SUCCESS
        return ptx.decode()
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


@pytest.mark.parametrize("arch,waits", [("sm_80", False), ("sm_90", True), ("sm_90a", True)])
def test_every_kernel_starts_by_waiting_for_the_previous_grid(arch, waits):
    x = np.zeros(300, np.float32)
    ck = ct.compile(shift, (x, x.copy(), 128), arch=arch)
    assert _body(ck.source)[0] == "  tc::wait_for_prior_grid();"
    assert ck.pdl is waits
    assert ("griddepcontrol.wait" in _ptx(ck.source, arch)) is waits


def test_the_wait_precedes_every_memory_access():
    x = np.zeros(300, np.float32)
    ptx = _ptx(ct.compile(shift, (x, x.copy(), 128), arch="sm_90").source, "sm_90")
    wait = ptx.index("griddepcontrol.wait")
    assert all(ptx.index(op) > wait for op in ("ld.global", "st.global"))


@pytest.mark.parametrize("arch,number,newer", [("sm_80", 80, False), ("sm_86", 86, False),
                                               ("sm_90", 90, True), ("sm_90a", 90, True),
                                               ("sm_100f", 100, True), ("sm_120", 120, True)])
def test_arch_facts(arch, number, newer):
    assert arch_number(arch) == number
    assert supports_pdl(arch) is newer and supports_clusters(arch) is newer


def _loaded(kernel):
    return [p.loaded for p in kernel.backend_cache.values() if getattr(p, "loaded", None)]


def ping_pong(kernel, a, b, steps: int, stream, between=None) -> None:
    """`steps` launches of `kernel` alternating a -> b and b -> a, each reading what
    the previous one wrote, and writing what the previous one read; `between(i)`
    runs after launch i (another library's kernel on the same stream)."""
    n = a.shape[0]
    for i in range(steps):
        src, dst = (a, b) if i % 2 == 0 else (b, a)
        ct.launch(stream, (n // 1024,), kernel, (src, dst, 1024))
        if between is not None:
            between(i)


def test_ping_pong_in_the_interpreter():
    a = np.arange(3 * 1024, dtype=np.float32)
    b = np.full_like(a, np.nan)
    ping_pong(shift, a, b, 5, None)
    np.testing.assert_array_equal(b, np.arange(3 * 1024) + 5)
    ping_pong(shift, b, a, 1, None)
    np.testing.assert_array_equal(a, np.arange(3 * 1024) + 6)


@pytest.mark.gpu
def test_dependent_launches_keep_stream_order():
    """Kernels launched with programmatic dependent launch (the default on sm_90+)
    still see every write of the kernel before them and never overwrite its inputs
    early: 400 launches, each reading the previous one's output and writing the
    buffer it read, on the default stream, a torch stream and with a torch kernel
    (launched without PDL) between two of ours."""
    torch = pytest.importorskip("torch")
    n = 1 << 22
    base = torch.arange(n, device="cuda", dtype=torch.float32) % 4096
    for stream, between in ((None, None), (torch.cuda.Stream(), None),
                            (torch.cuda.current_stream(), "torch")):
        a, b = base.clone(), torch.full_like(base, float("nan"))
        hook = (lambda i: b.mul_(1.0) if i % 2 == 0 else a.mul_(1.0)) if between else None
        with torch.cuda.stream(stream if stream is not None else torch.cuda.current_stream()):
            ping_pong(shift, a, b, 400, stream, hook)
        torch.cuda.synchronize()
        assert torch.equal(a, base + 400), stream
    capability = torch.cuda.get_device_capability()
    assert all(k.pdl is (capability >= (9, 0)) for k in _loaded(shift))


@pytest.mark.gpu
def test_pdl_env_off_launches_in_plain_stream_order(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("TILECORE_PDL", "0")
    plain = ct.kernel(shift.pyfunc)  # a kernel object of its own: loaded under the setting
    a = torch.zeros(4096, device="cuda")
    b = torch.empty_like(a)
    ping_pong(plain, a, b, 10, None)
    torch.cuda.synchronize()
    assert torch.equal(a, torch.full_like(a, 10.0))
    assert [k.pdl for k in _loaded(plain)] == [False]


@pytest.mark.gpu
def test_dependent_launches_in_a_cuda_graph():
    """Captured into a CUDA graph, PDL launches become programmatic edges; replays
    keep the order too."""
    torch = pytest.importorskip("torch")
    n = 1 << 22
    base = torch.arange(n, device="cuda", dtype=torch.float32) % 4096
    a, b = base.clone(), torch.empty_like(base)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        ping_pong(shift, a, b, 2, stream)  # compile and load outside the capture
    torch.cuda.synchronize()
    a.copy_(base)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        ping_pong(shift, a, b, 100, stream)
    for replay in range(3):
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(a, base + 100 * (replay + 1)), replay
