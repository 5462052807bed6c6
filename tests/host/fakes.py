"""Stand-ins shared by the fast-launcher tests: a torch-like tensor with just
the attributes the fast launchers read, a specialization key for it, and a
recorder in place of the driver launcher."""
from tilecore.language import dtypes as D


class FakeTensor:
    """Just the attributes of a torch.Tensor that the fast launchers read."""

    def __init__(self, ptr, shape, strides, dtype="float32", device=0):
        self.ptr, self.shape, self.strides_, self.dtype, self.device = \
            ptr, shape, strides, dtype, device

    def data_ptr(self):
        return self.ptr

    def stride(self):
        return self.strides_

    def get_device(self):
        return self.device

    @property
    def is_cuda(self):
        return self.device >= 0


FakeTensor.__module__ = "torch.fake"

KEY = ((D.float32, 2, True, True, True), D.int32, D.float32, ("c", int, 64))


class Recorder:
    def __init__(self, result=0):
        self.calls, self.result, self.failed = [], result, []

    def launch(self, stream, gx, gy, gz, values):
        self.calls.append((stream, (gx, gy, gz), values))
        return self.result

    def fail(self, err, grid):
        self.failed.append((err, grid))
        raise RuntimeError(f"launch failed: {err}")
