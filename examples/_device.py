"""Where the examples run: the GPU through CuPy when there is one, otherwise the
CPU interpreter (NumPy arrays)."""
from __future__ import annotations

import numpy as np


def backend():
    """(description, to_device, to_host, stream)."""
    from tilecore.runtime.driver import has_gpu
    if has_gpu():
        try:
            import cupy as cp
            return "GPU", cp.asarray, cp.asnumpy, cp.cuda.get_current_stream()
        except ImportError:
            pass
    return "CPU interpreter", np.asarray, np.asarray, None
