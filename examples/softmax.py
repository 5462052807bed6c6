"""Row softmax in float32 or bfloat16: one block per row, a 2-D tile of
(1, N), reductions along the row, arithmetic in float32.

    python examples/softmax.py
"""
import ml_dtypes
import numpy as np

import tilecore as ct
from _device import backend


@ct.kernel
def softmax(x, y, N: ct.Constant[int]):
    row = ct.bid(0)
    t = ct.load(x, index=(row, 0), shape=(1, N), padding_mode=ct.PaddingMode.NEG_INF)
    t = t.astype(ct.float32)
    e = ct.exp(t - ct.max(t, axis=1, keepdims=True))
    ct.store(y, index=(row, 0), tile=(e / ct.sum(e, axis=1, keepdims=True)).astype(y.dtype))


def main() -> None:
    where, dev, host, stream = backend()
    rng = np.random.default_rng(1)
    for dtype in (np.float32, ml_dtypes.bfloat16):
        if where == "GPU" and dtype is ml_dtypes.bfloat16:
            continue  # CuPy has no bfloat16 arrays; use PyTorch tensors for that on the GPU
        x = rng.standard_normal((8, 300)).astype(dtype)
        y = dev(np.zeros_like(x))
        ct.launch(stream, (8,), softmax, (dev(x), y, 512))
        x64 = x.astype(np.float64)
        ref = np.exp(x64 - x64.max(1, keepdims=True))
        ref /= ref.sum(1, keepdims=True)
        tol = 1e-6 if dtype is np.float32 else 1e-2
        np.testing.assert_allclose(host(y).astype(np.float64), ref, rtol=tol, atol=tol)
        print(f"softmax on the {where}: 8 rows of 300 {np.dtype(dtype).name}, correct")


if __name__ == "__main__":
    main()
