"""tilecore: a tile-programming language for NVIDIA GPUs with cuTile Python's
semantics (`import tilecore as ct`), compiled to CUDA through NVRTC and also
run on the CPU by a NumPy interpreter of the same IR."""
from __future__ import annotations

from .errors import (OutOfBoundsTileWarning, TileCompileError, TileError, TileLaunchError,
                     TileRuntimeError, TileSyntaxError, TileTypeError, TileValueError)
from .host.compile import CompiledKernel, compile
from .host.launch import launch
from .kernel import Kernel, TileFunction, function, kernel
from .language.constants import Constant, ConstantAnnotation
from .language.dtypes import (DType, bfloat16, bool_, float4_e2m1fn, float8_e4m3fn,
                              float8_e5m2, float8_e8m0fnu, float16, float32, float64, int8,
                              int16, int32, int64, promote_types, tfloat32, uint8, uint16,
                              uint32, uint64)
from .language.enums import MemoryOrder, MemoryScope, PaddingMode, RoundingMode
from .language.ops import *  # noqa: F401,F403  (the tile-code functions)
from .language.ops import __all__ as _ops_all
from .language.options import ByTarget
from .runtime.device_errors import synchronize

from ._version import __version__  # noqa: E402


def __getattr__(name: str):
    """`ct.tune` (cuTile's `cuda.tile.tune`: exhaustive_search, ...), imported on
    first use so that `import tilecore` does not load the tuner."""
    if name == "tune":
        import importlib
        return importlib.import_module(".tune", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "__version__", "kernel", "function", "launch", "synchronize", "compile", "CompiledKernel",
    "ByTarget", "Kernel", "TileFunction",
    "Constant", "ConstantAnnotation", "DType", "promote_types",
    "bool_", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
    "float16", "float32", "float64", "bfloat16", "tfloat32", "float8_e4m3fn", "float8_e5m2",
    "float8_e8m0fnu", "float4_e2m1fn", "RoundingMode", "PaddingMode", "MemoryOrder",
    "MemoryScope", "TileError", "TileSyntaxError", "TileTypeError", "TileValueError",
    "TileCompileError", "TileLaunchError", "TileRuntimeError", "OutOfBoundsTileWarning",
] + [n for n in _ops_all if n != "TILE_FUNCTIONS"]
