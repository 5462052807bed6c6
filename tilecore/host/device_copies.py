"""Copies between device arrays and NumPy for TILECORE_INTERPRET=1."""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["to_host", "from_host"]


def to_host(device_array: Any) -> np.ndarray:
    """A NumPy copy of a CuPy array or a PyTorch tensor."""
    if hasattr(device_array, "get"):  # CuPy
        return np.array(device_array.get())
    if hasattr(device_array, "detach") and hasattr(device_array, "cpu"):  # PyTorch
        t = device_array.detach().cpu()
        if str(t.dtype) == "torch.bfloat16":
            import ml_dtypes
            return t.view(dtype=__import__("torch").int16).numpy().view(ml_dtypes.bfloat16).copy()
        return t.numpy().copy()
    raise TypeError(f"TILECORE_INTERPRET=1 can copy CuPy arrays and PyTorch tensors, got "
                    f"{type(device_array).__name__}")


def from_host(host: np.ndarray, device_array: Any) -> None:
    """Write `host` back into `device_array`."""
    if hasattr(device_array, "set"):  # CuPy
        device_array.set(host)
        return
    import torch
    src = torch.from_numpy(host.view(np.int16)).view(torch.bfloat16) \
        if host.dtype.name == "bfloat16" else torch.from_numpy(host)
    device_array.copy_(src.to(device_array.device))
