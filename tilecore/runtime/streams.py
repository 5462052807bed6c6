"""Turn a user's stream argument into a raw CUstream handle (an int).

Accepted: None (0, the legacy default stream), an int (a raw handle), any
object with the `__cuda_stream__()` protocol (cuda.core and cuda.bindings
streams, recent CuPy and PyTorch), a CuPy stream (`.ptr`) and a PyTorch
stream (`.cuda_stream`). Each type is inspected once; its extractor is cached
so the launch hot path is a dict lookup and an attribute read.
"""
from __future__ import annotations

import operator
from typing import Any, Callable, Optional

__all__ = ["stream_handle", "handle_attribute"]


def _none(stream: Any) -> int:
    return 0


def _raw_int(stream: int) -> int:
    if stream < 0:
        raise TypeError(f'Invalid argument "stream": a raw stream handle must be a '
                        f"non-negative int, got {stream}")
    return int(stream)


def _protocol(stream: Any) -> int:
    return int(stream.__cuda_stream__()[1])  # (version, handle)


def _in_mro(cls: type, module_prefix: str) -> bool:
    return any(c.__module__.split(".")[0] == module_prefix for c in cls.__mro__)


def _unsupported(stream: Any) -> int:
    raise TypeError(f'Invalid argument "stream": expected None, an int handle, an object with '
                    f"__cuda_stream__, a CuPy stream or a PyTorch stream, got "
                    f"{type(stream).__module__}.{type(stream).__qualname__}")


def handle_attribute(cls: type) -> Optional[str]:
    """The attribute that holds the raw handle of a PyTorch ("cuda_stream") or CuPy
    ("ptr") stream type, else None. Library attributes are plain reads, cheaper than
    the __cuda_stream__ protocol call (the C fast launcher reads them directly)."""
    if _in_mro(cls, "torch") and hasattr(cls, "cuda_stream"):
        return "cuda_stream"
    if _in_mro(cls, "cupy") and hasattr(cls, "ptr"):
        return "ptr"
    return None


def _resolve(cls: type) -> Callable[[Any], int]:
    if cls is type(None):
        return _none
    if issubclass(cls, int) and cls is not bool:
        return _raw_int
    attribute = handle_attribute(cls)
    if attribute is not None:
        return operator.attrgetter(attribute)
    if hasattr(cls, "__cuda_stream__"):
        return _protocol
    return _unsupported


_extractors: dict[type, Callable[[Any], int]] = {}


def stream_handle(stream: Any) -> int:
    """The raw CUstream handle of `stream` as an int (0 for None).

    Raises TypeError naming the "stream" argument for unsupported objects."""
    cls = type(stream)
    f = _extractors.get(cls)
    if f is None:
        f = _extractors[cls] = _resolve(cls)
    return f(stream)
