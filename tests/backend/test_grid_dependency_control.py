"""cuTile's programmatic dependent launch: `ct.grid_dependency_control_wait()`,
`ct.grid_dependency_control_launch_dependents()` and
`launch(..., programmatic_dependent_launch=True)`. Launched with the option, a
kernel that waits itself loses the automatic wait at its start, so what comes
before its wait may run while the previous kernel still runs; without the
option (or without an explicit wait) it keeps it. Reads written after the wait
never move above it; the interpreter runs both statements as no-ops (kernels
run one after another there); on the GPU, chains of such kernels keep stream
order, captured in a CUDA graph too."""
import numpy as np
import pytest

import tilecore as ct
from tilecore.errors import TileSyntaxError

from test_dependent_launch import _body, _ptx

RNG = np.random.default_rng(31)
TOP = "  tc::wait_for_prior_grid();"


@ct.kernel
def add_after_wait(c, src, dst, TILE: ct.Constant[int]):
    """dst = src + c: c (never written by the previous kernel) is loaded before the
    wait, src (the previous kernel's output) after it; then the next kernel may start."""
    bid = ct.bid(0)
    k = ct.load(c, (bid,), (TILE,))
    ct.grid_dependency_control_wait()
    t = ct.load(src, (bid,), (TILE,))
    ct.store(dst, (bid,), t + k)
    ct.grid_dependency_control_launch_dependents()


@ct.kernel
def no_explicit_wait(x, y, TILE: ct.Constant[int]):
    ct.grid_dependency_control_launch_dependents()
    bid = ct.bid(0)
    ct.store(y, (bid,), ct.load(x, (bid,), (TILE,)) * 2)


def _args(n=4 * 256):
    c = RNG.integers(-50, 50, n).astype(np.float32)
    src = RNG.integers(-50, 50, n).astype(np.float32)
    return c, src, np.full(n, np.nan, np.float32), 256


# --- the interpreter ------------------------------------------------------------------------
@pytest.mark.parametrize("early", [False, True])
def test_results_in_the_interpreter(early):
    c, src, dst, tile = _args(4 * 256 + 17)
    grid = (ct.cdiv(len(c), tile),)
    ct.launch(None, grid, add_after_wait, (c, src, dst, tile), programmatic_dependent_launch=early)
    np.testing.assert_array_equal(dst, src + c)   # the partial last tile too
    x, y = src.copy(), np.zeros_like(src)
    ct.launch(None, (4,), no_explicit_wait, (x, y, 256), programmatic_dependent_launch=early)
    np.testing.assert_array_equal(y[:1024], 2 * src[:1024])


def test_chain_in_the_interpreter():
    """Each launch reads the previous one's output: 7 launches add c seven times."""
    c, a, b, tile = _args()
    start = a.copy()
    for i in range(7):
        src, dst = (a, b) if i % 2 == 0 else (b, a)
        ct.launch(None, (4,), add_after_wait, (c, src, dst, tile),
                  programmatic_dependent_launch=True)
    np.testing.assert_array_equal(b, start + 7 * c)


# --- code --------------------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_option_drops_only_the_automatic_wait(arch):
    args = _args()
    plain = ct.compile(add_after_wait, args, arch=arch).source
    early = ct.compile(add_after_wait, args, arch=arch, programmatic_dependent_launch=True).source
    assert _body(plain)[0] == TOP and plain.count("tc::wait_for_prior_grid();") == 2
    assert _body(early)[0] != TOP and early.count("tc::wait_for_prior_grid();") == 1
    assert early.count("tc::launch_dependent_grids();") == 1
    # c's load before the wait, src's after it, the store after that
    body = "\n".join(_body(early))
    wait = body.index("tc::wait_for_prior_grid();")
    assert body.index("arg0") < wait < body.index("arg1") < body.index("arg2")
    for source in (plain, early):
        ptx = _ptx(source, arch)
        assert ("griddepcontrol.wait" in ptx) is (arch == "sm_90")
        assert ("griddepcontrol.launch_dependents" in ptx) is (arch == "sm_90")


def test_ptx_keeps_the_read_of_the_previous_output_after_the_wait():
    ptx = _ptx(ct.compile(add_after_wait, _args(), arch="sm_90",
                          programmatic_dependent_launch=True).source, "sm_90")
    wait = ptx.index("griddepcontrol.wait")
    loads = [i for i in range(len(ptx)) if ptx.startswith("ld.global", i)]
    assert loads[0] < wait < loads[-1] and ptx.index("st.global") > wait


def test_without_an_explicit_wait_the_option_keeps_the_automatic_one():
    x = np.zeros(1024, np.float32)
    src = ct.compile(no_explicit_wait, (x, x.copy(), 256), arch="sm_90",
                     programmatic_dependent_launch=True).source
    assert _body(src)[0] == TOP


def test_reads_never_move_above_the_wait():
    """hoist_loads moves reads up to their operands, but not over grid_wait."""
    c, src, dst, tile = _args()
    ct.launch(None, (4,), add_after_wait, (c, src, dst, tile))
    fn = next(iter(add_after_wait._ir.values()))
    names = [op.name for op in fn.body.ops]
    assert names.index("grid_wait") < [i for i, n in enumerate(names) if n == "load"][1]
    assert names.index("load") < names.index("grid_wait")


def test_the_early_start_copy_is_made_once():
    k = add_after_wait.for_early_start()
    assert k is add_after_wait.for_early_start() and k is not add_after_wait
    assert k.for_early_start() is k and k.options.early_start
    assert not add_after_wait.options.early_start


# --- errors ------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_bad_option_values(bad):
    args = _args()
    with pytest.raises(TypeError, match='"programmatic_dependent_launch" of launch\\(\\): '
                                        'expected a bool'):
        ct.launch(None, (4,), add_after_wait, args, programmatic_dependent_launch=bad)
    with pytest.raises(TypeError, match='"programmatic_dependent_launch" of compile\\(\\): '
                                        'expected a bool'):
        ct.compile(add_after_wait, args, programmatic_dependent_launch=bad)


def test_host_calls_are_errors():
    with pytest.raises(TypeError, match="can only be called from tile code"):
        ct.grid_dependency_control_wait()
    with pytest.raises(TypeError, match="can only be called from tile code"):
        ct.grid_dependency_control_launch_dependents()


@ct.kernel
def wait_in_a_reduction(x, y):
    t = ct.load(x, (0,), (16,))

    def body(a, b):
        ct.grid_dependency_control_wait()
        return a + b
    ct.store(y, (0,), ct.reduce(t, 0, body, 0.0, keepdims=True))


@ct.kernel
def wait_with_an_argument(x):
    ct.grid_dependency_control_wait(1)


def test_misuse_in_tile_code():
    x = np.zeros(16, np.float32)
    with pytest.raises(TileSyntaxError, match="memory effects are not supported inside"):
        ct.launch(None, (1,), wait_in_a_reduction, (x, np.zeros(1, np.float32)))
    with pytest.raises(Exception, match="grid_dependency_control_wait"):
        ct.launch(None, (1,), wait_with_an_argument, (x,))


# --- on the GPU ---------------------------------------------------------------------------------
def _chain(kernel, c, a, b, steps, stream, early):
    n = a.shape[0]
    for i in range(steps):
        src, dst = (a, b) if i % 2 == 0 else (b, a)
        ct.launch(stream, (n // 1024,), kernel, (c, src, dst, 1024),
                  programmatic_dependent_launch=early)


@pytest.mark.gpu
@pytest.mark.parametrize("early", [True, False])
def test_gpu_chains_keep_stream_order(early):
    """400 launches, each reading the previous one's output after its wait and
    writing the buffer the previous one read: with early start the part before the
    wait overlaps the previous kernel, and the result is still exact."""
    torch = pytest.importorskip("torch")
    n = 1 << 22
    c = (torch.arange(n, device="cuda", dtype=torch.float32) % 7) - 3
    base = torch.arange(n, device="cuda", dtype=torch.float32) % 4096
    a, b = base.clone(), torch.full_like(base, float("nan"))
    _chain(add_after_wait, c, a, b, 400, None, early)
    torch.cuda.synchronize()
    assert torch.equal(a, base + 400 * c)


@pytest.mark.gpu
def test_gpu_chain_in_a_cuda_graph():
    torch = pytest.importorskip("torch")
    n = 1 << 20
    c = (torch.arange(n, device="cuda", dtype=torch.float32) % 5) - 2
    base = torch.arange(n, device="cuda", dtype=torch.float32) % 1024
    a, b = base.clone(), torch.empty_like(base)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        _chain(add_after_wait, c, a, b, 2, stream, True)   # compile and load first
    torch.cuda.synchronize()
    a.copy_(base)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        _chain(add_after_wait, c, a, b, 100, stream, True)
    for replay in range(3):
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(a, base + 100 * (replay + 1) * c), replay


def test_hints_keep_the_early_start():
    """cuTile's replace_hints on the kernel a launch with the option runs keeps it so."""
    from tilecore.tune import replace_hints
    early = replace_hints(add_after_wait.for_early_start(), num_threads=64)
    plain = replace_hints(add_after_wait, num_threads=64)
    assert early.options.early_start and not plain.options.early_start
    assert early.options.num_threads == plain.options.num_threads == 64
    src = ct.compile(early, _args(), arch="sm_90").source
    assert _body(src)[0] != TOP
