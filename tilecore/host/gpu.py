"""Launching a kernel on the GPU: classify the arguments, find (or build and
load) the specialization, pack the flat parameters and launch.

The cached path is kept lean: one pass over the arguments builds both the
specialization key (plain tuples, no objects) and the flat parameter values,
then one dict lookup and one driver call. Argument kinds and array specs are
only built when a key is new, and the device and overlap checks only for arrays
whose (pointer, shape, strides) have not passed them before. Repeated launches
with known argument kinds and checked arrays go through a fast launcher
(`fastpath`) that only re-checks the facts the specialization relies on.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np

from .. import config
from ..backend.cuda import ArraySpec, array_facts
from ..frontend.specialize import ArrayArg, ConstArg, ScalarArg, needs_wide_index
from ..kernel import Kernel
from ..language import dtypes as D
from ..language.dtypes import DType
from ..ir.effects import written_params
from ..runtime.arrays import (DeviceArray, array_fields, check_no_overlap, check_same_device,
                              check_written_arrays)
from ..runtime.device import current_device_ordinal, device_count, get_device
from ..runtime.launch import LoadedKernel
from ..runtime.params import scalar_bits
from ..runtime.streams import stream_handle
from .classify import scalar_kind
from . import spec_cache
from .compile import build
from .fastpath import make_fast_launch

__all__ = ["launch_gpu"]

_NUMBER = (bool, int, float, np.generic)  # np.generic: ml_dtypes scalars (bfloat16, ...) too
_MAX_VALIDATED = 256  # argument sets remembered per kernel (device) and plan (overlap)


@dataclass
class _Plan:
    loaded: Optional[LoadedKernel]  # None: TILECORE_INTERPRET=1 sends this to the interpreter
    bit_scalars: tuple[tuple[int, DType], ...]  # (flat position, dtype) of raw-bit scalars
    written: frozenset[str]  # the array arguments the kernel writes
    written_at: frozenset[int]  # ... and their positions
    # the arrays' (pointer, shape, strides) whose overlap and write checks passed
    checked: dict = field(default_factory=dict)


def _scalar_dtype(name: str, value: Any) -> DType:
    t = type(value)
    if t is int and -2**31 <= value < 2**31:
        return D.int32
    if t is float:
        return D.float32
    return scalar_kind(name, value).dtype


def _scan(kernel: Kernel, args: Sequence[Any]):
    """(key, flat values, device arrays by name) in one pass over the arguments."""
    key, flat, arrays = [], [], []
    consts = kernel.constant_params
    for name, value in zip(kernel.param_names, args):
        if name in consts or isinstance(value, DType):
            key.append(("c", type(value), value))
        elif isinstance(value, _NUMBER):
            key.append(_scalar_dtype(name, value))
            flat.append(value)
        else:
            fields = array_fields(value, name)
            ptr, shape, strides, dtype = fields[0], fields[1], fields[2], fields[3]
            key.append((dtype, len(strides), *array_facts(ptr, shape, strides, dtype.itemsize),
                        needs_wide_index(shape, strides)))
            flat.append(ptr)
            flat.extend(shape)
            flat.extend(strides)
            arrays.append((name, fields))
    return tuple(key), flat, arrays


def _kinds(kernel: Kernel, key: tuple, args: Sequence[Any]):
    """Argument kinds and array specs of a specialization key."""
    kinds, specs = [], {}
    for i, (part, value) in enumerate(zip(key, args)):
        if isinstance(part, DType):
            kinds.append(ScalarArg(part))
        elif part[0] == "c":
            kinds.append(ConstArg(value))
        else:
            dtype, ndim, aligned, unit, whole, wide = part
            kinds.append(ArrayArg(dtype, ndim, wide))
            specs[i] = ArraySpec(aligned16=aligned, unit_stride=unit, whole_vectors=whole)
    return kinds, specs


def _device_arrays(fields) -> list[tuple[str, DeviceArray]]:
    return [(name, DeviceArray(f[0], tuple(f[1]), tuple(f[2]), f[3], f[4],
                               len(f) > 5 and f[5])) for name, f in fields]


def _device_of(fields) -> int:
    arrays = _device_arrays(fields)
    ordinal = check_same_device(arrays)
    return ordinal if ordinal >= 0 else current_device_ordinal()


def _check_access(fields, written: frozenset[str]) -> None:
    """The arrays the kernel writes are writable, free of self-overlap and
    share no memory with another argument (arrays only read may overlap)."""
    arrays = _device_arrays(fields)
    check_written_arrays(arrays, written)
    check_no_overlap(arrays, written)


def compiled_for(kernel: Kernel, kinds: list, specs: dict, arch: str
                 ) -> tuple[Any, frozenset[int]]:
    """(CompiledKernel, positions of the arrays it writes) of one specialization.
    tilecore's own kernels (the algorithms) come from a warm disk cache by a key
    computed without lowering them (spec_cache.py); anything else, or a miss,
    lowers and builds as before (build's own key and cache)."""
    hit = spec_cache.lookup(kernel, kinds, specs, arch)
    if hit is not None:
        return hit
    written_at = written_params(kernel.ir_for(kinds))
    compiled = build(kernel, kinds, specs, arch)
    spec_cache.remember(kernel, kinds, specs, arch, compiled, written_at)
    return compiled, written_at


def _make_plan(kernel: Kernel, key: tuple, args: Sequence[Any], ordinal: int) -> _Plan:
    kinds, specs = _kinds(kernel, key, args)
    if config.interpret():
        written_at = written_params(kernel.ir_for(kinds))
        written = frozenset(kernel.param_names[i] for i in written_at)
        return _Plan(None, (), written, written_at)
    device = get_device(ordinal)
    arch = config.arch() or device.arch
    compiled, written_at = compiled_for(kernel, kinds, specs, arch)
    written = frozenset(kernel.param_names[i] for i in written_at)
    loaded = LoadedKernel(compiled.cubin, compiled.entry, compiled.block_threads,
                          compiled.smem_bytes, compiled.param_format, compiled.cluster_size,
                          kernel.__name__, device, small_l1=compiled.small_l1,
                          pdl=compiled.pdl and config.pdl(), checks=compiled.checks)
    bits, pos = [], 0
    for kind in kinds:
        if isinstance(kind, ArrayArg):
            pos += 1 + 2 * kind.ndim
        elif isinstance(kind, ScalarArg):
            if kind.dtype.is_float and kind.dtype.itemsize <= 2:
                bits.append((pos, kind.dtype))
            pos += 1
    return _Plan(loaded, tuple(bits), written, written_at)


def launch_gpu(stream: Any, grid: tuple[int, int, int], kernel: Kernel,
               args: Sequence[Any]) -> None:
    """Launch `kernel` on the device holding its array arguments (the general
    path: `tilecore.launch` first tries the kernel's fast launcher)."""
    state = kernel.backend_cache
    key, flat, arrays = _scan(kernel, args)
    # The arrays' (pointer, shape, strides): the device they share is remembered per
    # kernel; the overlap and write checks, which depend on what the kernel writes, per plan.
    layout = tuple(v for _, f in arrays for v in (f[0], *f[1], *f[2]))
    devices = state.setdefault("devices", {})
    read_only = tuple(name for name, f in arrays if len(f) > 5 and f[5])
    ordinal = devices.get(layout)
    if ordinal is None:
        ordinal = _device_of(arrays)
        if len(devices) >= _MAX_VALIDATED:
            devices.clear()
        devices[layout] = ordinal
    plan = state.get((ordinal, key))
    if plan is None:
        plan = state[(ordinal, key)] = _make_plan(kernel, key, args, ordinal)
    checked_as = layout + read_only if read_only else layout
    if checked_as not in plan.checked:
        _check_access(arrays, plan.written)
        if len(plan.checked) >= _MAX_VALIDATED:
            plan.checked.clear()
        plan.checked[checked_as] = True
    if plan.loaded is None:
        from .cpu import launch_cpu
        from .device_copies import from_host, to_host
        launch_cpu(kernel, grid, args, to_host, from_host)
        return
    handle = stream_handle(stream)
    if 0 in grid:  # an empty grid runs no block (the arguments were checked above)
        return
    if plan.bit_scalars:
        for pos, dtype in plan.bit_scalars:
            flat[pos] = scalar_bits(dtype, flat[pos])
    else:
        _install_fast_launch(state, ordinal, key, args, plan)
    plan.loaded.launch(handle, grid, tuple(flat))


def _install_fast_launch(state: dict, ordinal: int, key: tuple, args: Sequence[Any],
                         plan: _Plan) -> None:
    """Make the fast launcher for these argument kinds the kernel's current one
    (built once per (device, key, argument types): it reads per-library attributes)."""
    fast = state.setdefault("fast_by_kinds", {})
    kinds = (ordinal, key, tuple(map(type, args)))
    if kinds not in fast:
        fast[kinds] = make_fast_launch(key, args, ordinal, plan.checked, plan.loaded.launcher,
                                       plan.loaded.fail, only_device=device_count() == 1,
                                       written=plan.written_at)
    current = state.get("fast_launch")
    if current is not fast[kinds]:
        state["fast_launch_prev"] = current   # host/launch.py tries it second
        state["fast_launch"] = fast[kinds]
