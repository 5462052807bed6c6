"""Launching a kernel on the CPU interpreter (NumPy arrays, or device arrays
copied in and back when TILECORE_INTERPRET=1)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .. import config
from ..frontend.specialize import ConstArg
from ..interpreter import run_function
from ..ir.effects import written_params
from ..kernel import Kernel
from ..runtime.arrays import check_writable, overlap_message
from .classify import classify_non_array, host_array_kind, param_names

__all__ = ["launch_cpu", "check_host_arrays"]


def check_host_arrays(named: list[tuple[str, np.ndarray]], written: frozenset[str]) -> None:
    """The data model's rules for the arrays of a launch: an array the kernel
    writes (`written`) must be writable, free of self-overlap, and share no
    memory with any other argument; arrays it only reads may be read-only,
    broadcast views or the same array twice."""
    for name, a in named:
        if name in written:
            check_writable(name, not a.flags.writeable, a.shape, a.strides, a.itemsize)
    for i, (na, a) in enumerate(named):
        for nb, b in named[i + 1:]:
            if (na in written or nb in written) and a.size and b.size and \
                    np.shares_memory(a, b):
                raise ValueError(overlap_message(na, nb, na if na in written else nb))


def launch_cpu(kernel: Kernel, grid: tuple[int, int, int], args: Sequence[Any],
               to_host=None, from_host=None) -> None:
    """Run `kernel` in the interpreter. `to_host`/`from_host` copy device arrays
    to NumPy and back (TILECORE_INTERPRET=1 with device arguments): the arrays
    the kernel writes are copied back."""
    names = param_names(kernel)
    kinds, run_args, arrays, copies = [], [], [], []
    for index, (name, value) in enumerate(zip(names, args)):
        kind = classify_non_array(kernel, name, value)
        if kind is None:
            host = value
            if not isinstance(value, np.ndarray):
                if to_host is None:
                    raise TypeError(f'Invalid kernel argument "{name}": the interpreter needs '
                                    f"NumPy arrays, got {type(value).__name__}")
                host = to_host(value)
                copies.append((index, value, host))
            kind = host_array_kind(name, host)
            arrays.append((name, host))
            run_args.append(host)
        elif not isinstance(kind, ConstArg):
            run_args.append(value)
        kinds.append(kind)
    fn = kernel.ir_for(kinds)
    written = written_params(fn)
    check_host_arrays(arrays, frozenset(names[i] for i in written))
    # run_args follow the Python parameter order minus constants: the IR's parameter order.
    run_function(fn, grid, run_args, block_order=config.block_order())
    for index, device, host in copies:
        if index in written:
            from_host(host, device)
