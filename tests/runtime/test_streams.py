"""stream_handle accepts every stream kind tilecore documents and names the
argument otherwise."""
import pytest
from cuda.bindings import driver as drv
from cuda.bindings import runtime as cudart

from tilecore.runtime import streams
from tilecore.runtime.streams import stream_handle


class ProtocolStream:
    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


CupyStream = type("Stream", (), {"__module__": "cupy.cuda.stream",
                                 "__init__": lambda self, p: setattr(self, "ptr", p),
                                 "ptr": 0})
TorchStream = type("Stream", (), {"__module__": "torch.cuda.streams",
                                  "__init__": lambda self, p: setattr(self, "cuda_stream", p),
                                  "cuda_stream": 0})


def test_supported_kinds():
    assert stream_handle(None) == 0
    assert stream_handle(0) == 0
    assert stream_handle(0x5555_0000_1000) == 0x5555_0000_1000
    assert stream_handle(ProtocolStream(77)) == 77
    assert stream_handle(drv.CUstream(123)) == 123
    assert stream_handle(cudart.cudaStream_t(456)) == 456
    assert stream_handle(CupyStream(0xABC)) == 0xABC
    assert stream_handle(TorchStream(0xDEF)) == 0xDEF


def test_extractor_cached_per_type():
    stream_handle(ProtocolStream(1))
    assert streams._extractors[ProtocolStream] is streams._protocol
    assert stream_handle(ProtocolStream(2)) == 2


def test_negative_int():
    with pytest.raises(TypeError) as e:
        stream_handle(-1)
    assert str(e.value) == ('Invalid argument "stream": a raw stream handle must be a '
                            "non-negative int, got -1")


@pytest.mark.parametrize("bad,type_name", [(1.5, "builtins.float"), (True, "builtins.bool"),
                                           ("s", "builtins.str")])
def test_unsupported(bad, type_name):
    with pytest.raises(TypeError) as e:
        stream_handle(bad)
    assert str(e.value) == ('Invalid argument "stream": expected None, an int handle, an object '
                            "with __cuda_stream__, a CuPy stream or a PyTorch stream, got "
                            f"{type_name}")
