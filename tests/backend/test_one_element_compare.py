"""`arange(n) == c` (and !=) compiles to a test of the one register and thread
holding element c (layout.Layout.holder, elem's inverse) instead of an index
compared per element: checked exhaustively against the layout rule, and in
kernels against NumPy (interpreter; NVRTC sm_80/sm_90 and the GPU through
tests/conftest.py)."""
import numpy as np
import pytest

import tilecore as ct
from tilecore.backend.cuda.layout import Layout


def _elem(lay: Layout, k: int, t: int) -> int:
    """core.cuh's tc::elem for thread t's register k."""
    if lay.replicated:
        return 0
    return ((k // lay.vec) * lay.threads + t) * lay.vec + k % lay.vec


@pytest.mark.parametrize("n, threads, vk", [
    (1, 32, 4), (8, 32, 4), (32, 32, 4), (64, 32, 4), (256, 128, 4), (8192, 128, 4),
    (4096, 512, 8), (2048, 256, 16), (96, 32, 2)])
def test_holder_inverts_the_layout(n, threads, vk):
    lay = Layout(n, threads, vk)
    holders = {}
    for t in range(threads):
        for k in range(lay.per_thread):
            holders.setdefault(_elem(lay, k, t), (k, -1 if lay.replicated else t))
    for e in range(-2, max(n, threads) * 2):
        assert lay.holder(e) == holders.get(e), e


@ct.kernel
def pick(x, y, o_eq, o_ne, N: ct.Constant[int], C: ct.Constant[int]):
    a = ct.load(x, (0,), (N,))
    b = ct.load(y, (0,), (N,))
    lane = ct.arange(N, dtype=ct.int32)
    ct.store(o_eq, (0,), ct.where(lane == C, a, b))
    ct.store(o_ne, (0,), ct.where(C != lane, a, b))


@pytest.mark.parametrize("n, c", [(1, 0), (1, 1), (8, 0), (8, 7), (8, 8), (256, 3),
                                  (4096, 0), (4096, 1029), (4096, -1), (4096, 5000)])
def test_one_element_compare(n, c):
    x = np.arange(n, dtype=np.int32) + 1000
    y = -np.arange(n, dtype=np.int32)
    o_eq, o_ne = np.zeros_like(x), np.zeros_like(x)
    ct.launch(None, (1,), pick, (x, y, o_eq, o_ne, n, c))
    lane = np.arange(n)
    np.testing.assert_array_equal(o_eq, np.where(lane == c, x, y))
    np.testing.assert_array_equal(o_ne, np.where(lane != c, x, y))


def test_the_compare_names_one_register_and_thread():
    x = np.zeros(4096, np.int32)
    src = ct.compile(pick, (x, x, x, x, 4096, 1029), arch="sm_90").source
    lay = Layout(4096, 512, 4)        # the kernel's 512 threads, 4-item chunks
    k, t = lay.holder(1029)
    assert f"(k == {k} && (int)threadIdx.x == {t})" in src
    assert "tc::op_eq(" not in src and "tc::op_ne(" not in src


@ct.kernel
def pick_narrow(x, o, N: ct.Constant[int]):
    lane = ct.arange(N, dtype=ct.uint8)     # wraps past 255: elements 44 and 300 hold 44
    ct.store(o, (0,), ct.where(lane == 44, ct.load(x, (0,), (N,)), 0))


def test_a_wrapping_arange_keeps_the_per_element_compare():
    x = np.arange(512, dtype=np.int32) + 1
    o = np.zeros_like(x)
    ct.launch(None, (1,), pick_narrow, (x, o, 512))
    np.testing.assert_array_equal(np.flatnonzero(o), [44, 300])
    src = ct.compile(pick_narrow, (x, o, 512), arch="sm_90").source
    assert "tc::op_eq(" in src and "threadIdx.x ==" not in src
