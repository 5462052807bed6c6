"""16-bit float loads whose only use is a conversion to float32 are held as
packed words (tc::Packed16) until converted; the values must be exactly the
converted elements, padding and NaN bit patterns included."""
import re

import ml_dtypes
import numpy as np
import pytest

import tilecore as ct

DTYPES = [ml_dtypes.bfloat16, np.float16]


@ct.kernel
def widen(x, y, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid, 0), shape=(1, TILE), padding_mode=ct.PaddingMode.NEG_INF)
    ct.store(y, index=(bid, 0), tile=t.astype(ct.float32) * 2.0)


@ct.kernel
def widen_and_copy(x, y, z, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid, 0), shape=(1, TILE))
    ct.store(y, index=(bid, 0), tile=t.astype(ct.float32))
    ct.store(z, index=(bid, 0), tile=t)


def _inputs(dtype, rows, cols):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((rows, cols)).astype(dtype)
    bits = x.view(np.uint16).reshape(-1)
    bits[:6] = [0x7FC1, 0xFFFF, 0x0001, 0x8000, 0x7F80 if dtype is ml_dtypes.bfloat16 else 0x7C00,
                0x0000]  # NaNs with payloads, the smallest subnormal, -0, +inf, +0
    return x


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", [256, 200])  # whole tiles; a partial last tile (padding)
def test_packed_conversion_is_exact(dtype, cols):
    x = _inputs(dtype, 3, cols)
    y = np.empty((3, cols), np.float32)
    ct.launch(None, (3,), widen, (x, y, 256))
    want = x.astype(np.float32) * np.float32(2)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(want))
    finite = ~np.isnan(want)
    np.testing.assert_array_equal(y[finite].view(np.uint32), want[finite].view(np.uint32))


@ct.kernel
def widen_padded(x, y, TILE: ct.Constant[int], PAD: ct.Constant):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid, 0), shape=(1, TILE), padding_mode=PAD)
    ct.store(y, index=(bid, 0), tile=t.astype(ct.float32))


PADS = [(ct.PaddingMode.NEG_INF, -np.inf), (ct.PaddingMode.ZERO, 0.0),
        (ct.PaddingMode.NEG_ZERO, -0.0), (ct.PaddingMode.NAN, np.nan)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pad,value", PADS)
def test_packed_padding_of_whole_vectors(dtype, pad, value):
    """Rows of 192 items (whole 16-byte vectors) in 256-item tiles: the vectors
    past the end are padded as whole packed words."""
    x = _inputs(dtype, 3, 192)
    y = np.empty((3, 256), np.float32)
    ct.launch(None, (3,), widen_padded, (x, y, 256, pad))
    want = np.full((3, 256), value, np.float32)
    want[:, :192] = x.astype(np.float32)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(want))
    finite = ~np.isnan(want)
    np.testing.assert_array_equal(y[finite].view(np.uint32), want[finite].view(np.uint32))
    src = ct.compile(widen_padded, (x, y, 256, pad), arch="sm_90").source
    assert "tc::Packed16<" in src and "unsigned int pw;" in src
    assert not re.search(r"tc::Vec<__(nv_bfloat16|half), \d+> w;", src)  # no 16-bit elements


@pytest.mark.parametrize("dtype", DTYPES)
def test_source_packs_only_loads_used_by_conversions(dtype):
    x = np.zeros((2, 256), dtype)
    src = ct.compile(widen, (x, np.zeros((2, 256), np.float32), 256), arch="sm_90").source
    assert "tc::Packed16<" in src and "tc::unpack_float(" in src
    src = ct.compile(widen_and_copy, (x, np.zeros((2, 256), np.float32), x.copy(), 256),
                     arch="sm_90").source
    assert "tc::Packed16<" not in src  # also stored as 16-bit: kept as separate elements


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_packed_conversion_is_bitwise(dtype):
    torch = pytest.importorskip("torch")
    tdtype = torch.bfloat16 if dtype is ml_dtypes.bfloat16 else torch.float16
    x = _inputs(dtype, 5, 200)
    dx = torch.from_numpy(x.view(np.int16)).view(tdtype).cuda()
    dy = torch.empty((5, 200), device="cuda", dtype=torch.float32)
    ct.launch(None, (5,), widen, (dx, dy, 256))
    got = dy.cpu().numpy()
    want = x.astype(np.float32) * np.float32(2)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = ~np.isnan(want)
    np.testing.assert_array_equal(got[finite].view(np.uint32), want[finite].view(np.uint32))
