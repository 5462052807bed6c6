"""Launching a kernel on the CPU interpreter (NumPy arrays, or device arrays
copied in and back when TILECORE_INTERPRET=1)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .. import config
from ..frontend.specialize import ArrayArg, ConstArg
from ..interpreter import run_function
from ..kernel import Kernel
from ..language import dtypes as D
from .classify import classify_non_array, param_names

__all__ = ["launch_cpu", "check_no_overlap_host"]


def _array_kind(name: str, a: np.ndarray) -> ArrayArg:
    try:
        return ArrayArg(D.from_numpy(a.dtype), a.ndim)
    except TypeError:
        raise TypeError(f'Invalid kernel argument "{name}": NumPy dtype {a.dtype} has no '
                        f"tilecore dtype") from None


def check_no_overlap_host(named: list[tuple[str, np.ndarray]]) -> None:
    """Array arguments must not share memory (the data model leaves it undefined)."""
    for i, (na, a) in enumerate(named):
        for nb, b in named[i + 1:]:
            if a.size and b.size and np.shares_memory(a, b):
                raise ValueError(f'Kernel arguments "{na}" and "{nb}" overlap in memory; array '
                                 f"arguments must not overlap")


def launch_cpu(kernel: Kernel, grid: tuple[int, int, int], args: Sequence[Any],
               to_host=None, from_host=None) -> None:
    """Run `kernel` in the interpreter. `to_host`/`from_host` copy device arrays
    to NumPy and back (TILECORE_INTERPRET=1 with device arguments)."""
    names = param_names(kernel)
    kinds, run_args, arrays, copies = [], [], [], []
    for name, value in zip(names, args):
        kind = classify_non_array(kernel, name, value)
        if kind is None:
            host = value
            if not isinstance(value, np.ndarray):
                if to_host is None:
                    raise TypeError(f'Invalid kernel argument "{name}": the interpreter needs '
                                    f"NumPy arrays, got {type(value).__name__}")
                host = to_host(value)
                copies.append((value, host))
            if not host.flags.writeable:
                raise ValueError(f'Invalid kernel argument "{name}": the array is read-only')
            kind = _array_kind(name, host)
            arrays.append((name, host))
            run_args.append(host)
        elif not isinstance(kind, ConstArg):
            run_args.append(value)
        kinds.append(kind)
    check_no_overlap_host(arrays)
    fn = kernel.ir_for(kinds)
    # run_args follow the Python parameter order minus constants: the IR's parameter order.
    run_function(fn, grid, run_args, block_order=config.block_order())
    for device, host in copies:
        from_host(host, device)
