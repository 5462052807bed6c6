"""Division of a tile by one broadcast value (softmax's e / sum) goes through
tc::DivBy: one correctly rounded reciprocal, then q = a*y and one FMA
correction per element (Markstein), with IEEE division for the dividends and
divisors outside the range where that is exact. The result must be IEEE
round-to-nearest division bit for bit: checked in the interpreter, and on the
GPU over millions of random bit patterns and hand-picked hard cases."""
import ml_dtypes
import numpy as np
import pytest

import tilecore as ct


@ct.kernel
def divide_by_first(x, s, y, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    d = ct.load(s, index=(0,), shape=(1,))
    ct.store(y, index=(bid,), tile=t / d)


DIVISORS = [1.0, 3.0, 0.1, -5.5, 123456.7, 7e-7, 2.0 ** 20, 2.0 ** -20, 1.5 * 2.0 ** 20,
            0.75 * 2.0 ** -20, np.float32(1.9999999).item(), 1.0000001, 1e-40, 3e38, 0.0, -0.0,
            np.inf, np.nan]


def _dividends(n, seed):
    """Random bit patterns over every exponent, then the edges."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    # half of them where the FMA path's check decides: quotients from underflow
    # through 2^-80 (its threshold) to overflow, for every divisor below
    inside = rng.uniform(-110, 128, n // 2)
    x[: n // 2] = (np.exp2(inside) * rng.choice([-1, 1], n // 2)
                   * (1 + rng.random(n // 2))).astype(np.float32)
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 2.0 ** -60, 2.0 ** 100,
                      2.0 ** -80, 2.0 ** -100, -(2.0 ** -80), 2.0 ** 127, -(2.0 ** 127),
                      np.finfo(np.float32).max, -np.finfo(np.float32).max,
                      np.nextafter(np.float32(2.0 ** -80), np.float32(0)), np.float32(3.4e38),
                      np.float32(1.9999999), np.float32(1.0000001)], np.float32)
    x[-len(edges):] = edges
    return x


def _same_bits(got, want):
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    u = f"u{want.itemsize}"
    bad = np.flatnonzero(got[ok].view(u) != want[ok].view(u))
    assert bad.size == 0, f"{bad.size} quotients differ, first at {np.flatnonzero(ok)[bad[:5]]}"


def test_source_uses_divby_for_broadcast_divisors():
    x = np.zeros(1024, np.float32)
    src = ct.compile(divide_by_first, (x, np.ones(1, np.float32), x.copy(), 1024),
                     arch="sm_90").source
    assert "tc::DivBy<float>" in src and ".quick(" in src and ".exact(" in src


@pytest.mark.parametrize("divisor", [3.0, 0.1, 2.0 ** 20 * 1.5, np.inf])
def test_interpreter(divisor):
    x = _dividends(512, 1)
    s = np.array([divisor], np.float32)
    y = np.empty_like(x)
    with np.errstate(all="ignore"):
        ct.launch(None, (2,), divide_by_first, (x, s, y, 256))
        _same_bits(y, x / s[0])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.float16])
def test_gpu_matches_ieee_division_bit_for_bit(dtype):
    torch = pytest.importorskip("torch")
    tdt = {np.float32: torch.float32, ml_dtypes.bfloat16: torch.bfloat16,
           np.float16: torch.float16}[dtype]
    n = 1 << 22
    with np.errstate(over="ignore"):
        x = _dividends(n, 2).astype(dtype)
    host_bits = x.view(np.uint32 if dtype is np.float32 else np.uint16)
    signed = np.int32 if dtype is np.float32 else np.int16
    dx = torch.from_numpy(host_bits.view(signed)).cuda().view(tdt)
    dy = torch.empty_like(dx)
    for divisor in DIVISORS:
        s = np.array([divisor], np.float32).astype(dtype)
        ds = torch.from_numpy(s.view(signed)).cuda().view(tdt)
        ct.launch(None, (n // 1024,), divide_by_first, (dx, ds, dy, 1024))
        got = dy.view(torch.int32 if dtype is np.float32 else torch.int16).cpu().numpy() \
            .view(dtype)
        with np.errstate(all="ignore"):
            want = (x.astype(np.float32) / s.astype(np.float32)[0]).astype(dtype)
        _same_bits(got, want)
