"""A block reduction ends with a barrier only when shared memory may be written
again after it (a later reduction or staged move, or itself in a next loop
trip); the results must not change either way (the three-target harness runs
each kernel here on the GPU too)."""
import numpy as np

import tilecore as ct


@ct.kernel
def two_sums(x, y, N: ct.Constant[int]):
    t = ct.load(x, index=(0, 0), shape=(1, N))
    d = t - ct.sum(t, axis=1, keepdims=True) / N
    ct.store(y, index=(0, 0), tile=d * ct.sum(d * d, axis=1, keepdims=True))


@ct.kernel
def sums_in_a_loop(x, y, N: ct.Constant[int]):
    acc = ct.zeros((1, 1), dtype=ct.float32)
    for i in range(4):
        acc += ct.sum(ct.load(x, index=(i, 0), shape=(1, N)), axis=1, keepdims=True)
    ct.store(y, index=(0, 0), tile=acc)


@ct.kernel
def sum_then_transpose(x, y, z, N: ct.Constant[int]):
    t = ct.load(x, index=(0, 0), shape=(4, N))
    ct.store(z, index=(0,), tile=ct.reshape(ct.sum(t), (1,)))
    ct.store(y, index=(0, 0), tile=ct.permute(t, (1, 0)))


def _barriers(src):
    return [line.split(",")[2].split(">")[0].strip()
            for line in src.splitlines() if "block_allreduce<" in line]


def test_only_the_last_reduction_skips_its_barrier():
    x = np.random.default_rng(0).standard_normal((1, 256)).astype(np.float32)
    y = np.empty_like(x)
    assert _barriers(ct.compile(two_sums, (x, y, 256), arch="sm_90").source) == ["true", "false"]
    ct.launch(None, (1,), two_sums, (x, y, 256))
    d = x.astype(np.float64) - x.mean()
    np.testing.assert_allclose(y, d * (d * d).sum(), rtol=1e-4)


def test_a_reduction_in_a_loop_keeps_its_barrier():
    x = np.random.default_rng(1).standard_normal((4, 128)).astype(np.float32)
    y = np.empty((1, 1), np.float32)
    assert _barriers(ct.compile(sums_in_a_loop, (x, y, 128), arch="sm_90").source) == ["true"]
    ct.launch(None, (1,), sums_in_a_loop, (x, y, 128))
    np.testing.assert_allclose(y[0, 0], x.astype(np.float64).sum(), rtol=1e-5)


def test_a_staged_move_after_a_reduction_keeps_its_barrier():
    x = np.random.default_rng(2).standard_normal((4, 64)).astype(np.float32)
    y, z = np.empty((64, 4), np.float32), np.empty(1, np.float32)
    src = ct.compile(sum_then_transpose, (x, y, z, 64), arch="sm_90").source
    assert _barriers(src) == ["true"]
    ct.launch(None, (1,), sum_then_transpose, (x, y, z, 64))
    np.testing.assert_array_equal(y, x.T)
    np.testing.assert_allclose(z[0], x.astype(np.float64).sum(), rtol=1e-5)
