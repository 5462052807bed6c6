"""DeviceReduce.reduce_by_key: CUB's DeviceReduce::ReduceByKey.

For the runs of consecutive equal keys in d_keys_in[:num_items] (equality is
`==`, as CUB's: a NaN key never equals anything, so every NaN is a run of its
own; -0.0 == 0.0), d_unique_out[r] is the first key of run r,
d_aggregates_out[r] the fold of its values with `op` in item order (never
assumed commutative), and d_num_runs_out[0] the number of runs. Nothing
beyond the first num_runs elements of d_unique_out and d_aggregates_out is
written; num_items == 0 writes d_num_runs_out[0] = 0 and nothing else.

Design (three kernels around two DeviceScan calls, all on `stream`, no host
synchronization, no allocation, no device-to-host read):

    rbk_heads                 flags[i] = item i starts a run        (read keys, write n flags)
    DeviceScan.inclusive_sum  flags -> run number of every item     (exact: the look-back)
    DeviceScan.inclusive_scan_by_key(keys, values, op) -> scanned   (deterministic modes)
    rbk_scatter               heads write keys, run ends write scanned[i], the last item
                              writes num_runs

Cost: about 4 reads of the keys, 1 of the values, 2 reads and 2 writes of the
(int32) flags and 1 write + 1 read of the scanned values (accumulator type),
on top of the outputs, plus 2 x (init + scan) launches; CUB's single pass
reads keys and values once. Temporary storage: n flags (int32; int64 from
2**31 items), n accumulators and the larger of the two scans' storage.
Deterministic: the by-key scan's association depends only on tile numbers
(scan_kernels.py), and every output element is written by exactly one item.

Types, as CUB: the accumulator is the C++ type of op(value, value) (integers
narrower than int accumulate in int32 for add/mul/and/or/xor; float16 and
bfloat16 sums in float32; min/max in the value type), converted to
d_aggregates_out's dtype; keys are converted to d_unique_out's dtype;
d_num_runs_out has any integer dtype. d_unique_out and d_aggregates_out must
hold num_items elements (the most runs there can be; CUB's contract, checked
here since the count is only known on the device).
"""
from __future__ import annotations

from typing import Any

import tilecore as ct

from ..dispatch.buffers import device_buffer, host_buffer
from ..dispatch.target import device_target, interpreter_target
from ..dispatch.temp_storage import Layout
from ..language import dtypes as D
from . import reduce_by_key_kernels as K
from .arrays import Arg, as_1d_output, byte_span, check_1d, check_num_items, describe, \
    same_side
from .operators import NUMERIC, check_operand_dtype, op_name, same_function
from .scan import KEY_DTYPES, DeviceScan, inclusive_temp_bytes

__all__ = ["reduce_by_key"]

THREADS = 256             # threads per block of rbk_heads / rbk_scatter
ITEMS_PER_THREAD = 4      # items per thread: a tile of THREADS * ITEMS_PER_THREAD items
_WIDE = 1 << 31
_INTS = tuple(d for d in NUMERIC if d.is_integer)

_kernels: dict[tuple, Any] = {}


def _kernel(fn, threads: int):
    key = (fn.pyfunc, threads)
    k = _kernels.get(key)
    if k is None:
        k = _kernels[key] = ct.kernel(fn.pyfunc, num_threads=threads)
    return k


def _check_dtype(a: Arg, name: str, allowed) -> None:
    if a.dtype not in allowed:
        raise TypeError(f'Invalid argument "{name}": dtype {a.dtype.name} is not supported '
                        f"(expected one of {[d.name for d in allowed]})")


def _check_overlap(outs, ins) -> None:
    """ValueError when an output's elements overlap an input's or another output's."""
    spans = [(name, a, c, byte_span(a, c)[:2]) for name, a, c in ins + outs if c > 0]
    n_in = len([1 for _, _, c in ins if c > 0])
    for i in range(n_in, len(spans)):
        name, _, _, (lo, hi) = spans[i]
        for j in range(i):
            other, _, _, (lo2, hi2) = spans[j]
            if lo < hi2 and lo2 < hi:
                raise ValueError(f'Invalid argument "{name}": it overlaps "{other}" (expected '
                                 f"separate arrays: reduce_by_key is not in place)")


def reduce_by_key(temp_storage, d_keys_in, d_unique_out, d_values_in, d_aggregates_out,
                  d_num_runs_out, op, num_items, stream=None) -> int:
    """DeviceReduce.reduce_by_key (module docstring)."""
    a_keys = describe(d_keys_in, "d_keys_in")
    a_uniq = describe(d_unique_out, "d_unique_out")
    a_vals = describe(d_values_in, "d_values_in")
    a_aggs = describe(d_aggregates_out, "d_aggregates_out")
    a_runs = as_1d_output(describe(d_num_runs_out, "d_num_runs_out"), "d_num_runs_out")
    named = [("d_keys_in", a_keys), ("d_unique_out", a_uniq), ("d_values_in", a_vals),
             ("d_aggregates_out", a_aggs), ("d_num_runs_out", a_runs)]
    host = same_side(named)
    for name, a in named[:4]:
        check_1d(a, name)
    _check_dtype(a_keys, "d_keys_in", KEY_DTYPES)
    _check_dtype(a_uniq, "d_unique_out", KEY_DTYPES)
    _check_dtype(a_vals, "d_values_in", NUMERIC)
    _check_dtype(a_aggs, "d_aggregates_out", NUMERIC)
    _check_dtype(a_runs, "d_num_runs_out", _INTS)
    n = check_num_items(num_items, a_keys, array="d_keys_in")
    check_num_items(num_items, a_vals, array="d_values_in")
    for name, a in (("d_unique_out", a_uniq), ("d_aggregates_out", a_aggs)):
        if a.size < n:
            raise ValueError(f'Invalid argument "{name}": expected room for num_items = {n} '
                             f"runs (the most there can be), got {a.size} elements")
    op = same_function(op)
    name = op_name(op)
    check_operand_dtype(name, a_vals.dtype, "d_values_in") if name is not None else None
    _check_overlap([("d_unique_out", a_uniq, n), ("d_aggregates_out", a_aggs, n),
                    ("d_num_runs_out", a_runs, 1)],
                   [("d_keys_in", a_keys, n), ("d_values_in", a_vals, n)])
    target = interpreter_target() if host else \
        device_target(next(a.device_id for _, a in named if a.device_id >= 0))

    wide = n >= _WIDE
    flag_dtype = D.int64 if wide else D.int32
    layout = Layout(3)
    if n:
        scan_bytes, acc = inclusive_temp_bytes(target, a_vals.dtype, op, n, by_key=True)
        flag_bytes, _ = inclusive_temp_bytes(target, flag_dtype, "add", n)
        scan_tmp = layout.slot(0).alias(D.uint8, max(scan_bytes, flag_bytes))
        flags = layout.slot(1).alias(flag_dtype, n)
        scanned = layout.slot(2).alias(acc, n)
    needed = layout.size()
    if temp_storage is None:
        return needed
    t = describe(temp_storage, "temp_storage")
    if t.host != host:
        raise TypeError('Invalid argument "temp_storage": it is a '
                        + ("host NumPy array but the data are GPU arrays" if t.host else
                           "GPU array but the data are host NumPy arrays (the interpreter)"))
    buf = host_buffer(t.obj) if host else device_buffer(t.fields)
    layout.map_to_buffer(buf.nbytes)
    if host:
        stream = None
    launch = ct.launch
    runs_out = a_runs.obj
    if n == 0:
        launch(stream, (1,), _kernel(K.rbk_zero, 32), (runs_out,))
        return needed
    tmp_v, flags_v, scanned_v = buf.view(scan_tmp), buf.view(flags), buf.view(scanned)
    threads = THREADS
    tile = threads * ITEMS_PER_THREAD
    grid = (-(-n // tile),)
    keys = a_keys.obj
    launch(stream, grid, _kernel(K.rbk_heads, threads), (keys, flags_v, n, tile, wide))
    DeviceScan.inclusive_sum(tmp_v, flags_v, flags_v, n, stream=stream)
    DeviceScan.inclusive_scan_by_key(tmp_v, keys, a_vals.obj, scanned_v, op, n, stream=stream)
    launch(stream, grid, _kernel(K.rbk_scatter, threads),
           (keys, scanned_v, flags_v, a_uniq.obj, a_aggs.obj, runs_out, n, tile, wide))
    return needed
