"""DeviceScan: CUB's device-wide prefix scans, two-phase temporary storage.

Every entry point takes `temp_storage` first and `stream` last; with
`temp_storage=None` it returns the bytes needed (at least 1) and launches
nothing, with a buffer of at least that many bytes it runs and returns the
same number. No call synchronizes, allocates or reads device memory back.

Layers, as in DeviceReduce: the public methods check their arguments and call
`_scan`; `_plan` (scan_plan.py: cached per dtypes, operator, flags, device and
policy source) selects the policy (dispatch.scan_policy) and the kernels;
`_run` checks the temporary storage and runs the plan's `_Launches` for the
call's shape (made once per (n, items, init, in place): the layout's aliases
and each launch's trailing arguments); the kernels are in scan_kernels.py
(their docstring has the algorithms and the determinism argument).

The cached path (hostpath.py, as DeviceReduce's): a call whose arrays' types
and dtypes, operator and init type were seen before (a *signature*, `_Sig`)
re-checks only the count against the arrays' sizes, that d_out is d_in or
shares no byte with d_in (and the keys), the device and the buffer, and
replays the launches; anything unusual takes the general path, which raises
the errors. Each launch keeps the kernel's fast launcher for its arguments
(`tilecore.host.launch.fast_launcher`): the scan's kernel objects are shared
by every method and operator, more argument kinds than a kernel's own two
fast-launch slots hold.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

import tilecore as ct

from ..dispatch.target import Target
from ..dispatch.temp_storage import check_size
from ..language import dtypes as D
from ..language.dtypes import DType
from .shared import check_dtype, target_of, temp_buffer
from .arrays import Arg, byte_span, check_1d, check_num_items, describe
from .hostpath import NARROW, SHAPES_KEPT, Signature, apart_across, epoch, find, remember
from .op_recognition import recognized_operator
from .operators import (NUMERIC, as_scalar, check_operand_dtype, op_accumulator, op_name,
                        same_function, scalar_dtype, sum_accumulator)
from .scan_plan import _WIDE, _Launches, _Plan, _plan

__all__ = ["DeviceScan"]

KEY_DTYPES = NUMERIC + (D.bool_,)


def _in_place(a_in: Arg, a_out: Arg, n: int, out_name: str = "d_out",
              in_name: str = "d_in") -> bool:
    """True when d_out is d_in (the same first element and stride); ValueError
    when their first n elements overlap otherwise."""
    if n == 0:
        return False
    lo_i, hi_i, s_i = byte_span(a_in, n)
    lo_o, hi_o, s_o = byte_span(a_out, n)
    if lo_i >= hi_o or lo_o >= hi_i:
        return False
    if lo_i == lo_o and s_i == s_o and a_in.dtype == a_out.dtype:
        return True
    raise ValueError(f'Invalid argument "{out_name}": it overlaps "{in_name}" without being the '
                     f"same array (an in-place scan passes the same array, of the same dtype, "
                     f"as both)")




def _accumulator(rule: str, name: Optional[str], a_in: Arg, a_out: Arg, init: Any) -> DType:
    """CUB's accumulator types (docs/algorithms.md, DeviceScan)."""
    if rule == "sum":
        return sum_accumulator(a_in.dtype, a_in.dtype)
    if rule == "out":   # the convenience layer: NumPy's cumsum accumulates in the result's type
        return sum_accumulator(a_in.dtype, a_out.dtype)
    if rule == "op":
        return op_accumulator(a_in.dtype, name)
    acc = scalar_dtype(init) or a_out.dtype
    if acc not in NUMERIC:
        raise TypeError(f'Invalid argument "init": dtype {acc.name} is not supported')
    return acc


def _check_eq(eq: Any) -> Any:
    if eq is None:
        return None
    if isinstance(eq, str) or not callable(eq):
        raise TypeError('Invalid argument "equality_op": expected a function of two tiles '
                        f"returning a bool tile, or None, got {type(eq).__name__}")
    return eq


def _scan(temp_storage, d_keys, d_in, d_out, op, init, num_items, stream, *, rule: str,
          exclusive: bool, has_init: bool, eq: Any = None, key: Optional[tuple] = None) -> int:
    """The general path: every argument checked; the call's signature cached
    under `key` (see _cached) once it succeeded."""
    by_key = d_keys is not None
    a_in = describe(d_in, "d_values_in" if by_key else "d_in")
    a_out = describe(d_out, "d_values_out" if by_key else "d_out")
    in_name, out_name = ("d_values_in", "d_values_out") if by_key else ("d_in", "d_out")
    arrays = [(in_name, a_in), (out_name, a_out)]
    check_1d(a_in, in_name)
    check_1d(a_out, out_name)
    check_dtype(a_in, in_name)
    check_dtype(a_out, out_name)
    a_keys = None
    if by_key:
        a_keys = describe(d_keys, "d_keys_in")
        check_1d(a_keys, "d_keys_in")
        check_dtype(a_keys, "d_keys_in", KEY_DTYPES)
        arrays.insert(0, ("d_keys_in", a_keys))
    target = target_of(arrays)
    n = check_num_items(num_items, a_in, array=in_name)
    check_num_items(num_items, a_out, array=out_name)
    if by_key:
        check_num_items(num_items, a_keys, array="d_keys_in")
    op, eq = same_function(op), same_function(eq)
    name = op_name(op)
    acc = _accumulator(rule, name, a_in, a_out, init)
    if name is not None:
        check_operand_dtype(name, acc, "init" if rule == "init" else in_name)
    init_value = as_scalar(init, acc, "init") if has_init else acc.numpy_dtype.type(0)
    eq = _check_eq(eq)
    in_place = _in_place(a_in, a_out, n, out_name, in_name)
    if by_key and _in_place(a_keys, a_out, n, out_name, "d_keys_in"):
        raise ValueError('Invalid argument "d_values_out": it is "d_keys_in" (a by-key scan '
                         "reads the keys while it writes the values: pass another array)")
    plan = _plan(a_in.dtype, acc, *_kind_and_op(name, op, acc), eq, by_key, n >= _WIDE,
                 exclusive, target)
    needed = _run(plan, temp_storage, a_in.host, stream, n, a_in.obj,
                  a_keys.obj if by_key else None, a_out.obj, init_value, has_init, in_place)
    if n < _WIDE:
        fixed = None if rule == "init" else init_value
        remember(_sigs, key, (d_in, d_out) if not by_key else (d_in, d_out, d_keys),
                 lambda libs: _Sig(plan, libs, has_init, fixed))
    return needed


def _run(plan: _Plan, temp_storage: Any, host: bool, stream: Any, n: int, x: Any, keys: Any,
         y: Any, init: Any, has_init: bool, in_place: bool) -> int:
    fits = plan.fits(host)
    # sized for the smallest tile a spilling user operator may step down to (the most
    # tiles: the largest layout); with one candidate, the layout the launch uses
    needed = plan.layout(n, fits[-1])[1]["bytes"]
    if temp_storage is None:
        return needed
    buf = temp_buffer(temp_storage, host, plan.target.device_id)
    check_size(needed, buf.nbytes)
    if n == 0:
        return needed
    items = fits[0] if len(fits) == 1 or plan.recomputes(n, in_place) else \
        _fit(plan, fits, buf, n, x, keys, y, init, has_init, in_place)
    run = plan.launches(n, items, has_init, in_place)
    run.go(stream if not host else None, run.buffer_bound(buf), x, keys, y, init)
    return needed


def _fit(plan: _Plan, fits: tuple[int, ...], buf: Any, n: int, x: Any, keys: Any, y: Any,
         init: Any, has_init: bool, in_place: bool) -> int:
    """The most items per thread (of `fits`) whose single-pass kernel does not
    spill on this GPU, for a user operator: the tuning key says "user"
    whatever the function costs, so its row is set for a light one. The
    kernel is compiled once to find out (the launch then finds it in the
    cache); the choice is kept per plan."""
    threads = plan.policy.threads_for(n)
    key = (threads, n >= _WIDE, in_place)
    items = plan.fitted.get(key)
    if items is None:
        from ..runtime import get_device
        from .. import config
        arch = config.arch() or get_device(plan.target.device_id).arch
        for items in fits:
            run = plan.launches(n, items, has_init, in_place)
            step = run.steps[-1]                    # the single-pass kernel (modes 0, 2, 3)
            args = run.args(-1, run.buffer_bound(buf), x, keys, y, init)
            if ct.compile(step.kernel, args, arch=arch).stack_bytes == 0:
                break
        plan.fitted[key] = items
    return items


# -- the cached path -----------------------------------------------------------------------------

_NO_INIT = object()


class _Sig(Signature):
    """A DeviceScan call signature's cached host work (hostpath.Signature): the
    plan, whether the method has an init and, for the sums, its launch value
    (else each call's init is checked and converted as the general path
    does), d_out's overlap checks (`apart`: d_out's library's, None when d_in
    or the keys are of another library: then only in place is cached) and per
    count the bytes needed and the launches. `call` re-checks what may differ
    between calls of the signature and returns 0 when anything is unusual (the
    caller then takes the general path); `shape` is its count's part, for
    callers that made d_out themselves (cumsum)."""

    __slots__ = ("plan", "has_init", "init", "shapes", "last_init", "last_value", "apart",
                 "keys_apart")

    def __init__(self, plan: _Plan, libs: tuple, has_init: bool, init: Any) -> None:
        super().__init__(libs, plan.target.device_id)
        self.plan, self.has_init, self.init = plan, has_init, init
        ly = libs[1]
        # (a DeviceArray beside CuPy or PyTorch arrays: reduce_by_key's temporaries)
        self.apart = apart_across(libs[0], ly)
        self.keys_apart = apart_across(libs[2], ly) if len(libs) > 2 else None
        # n -> (bytes, _Launches or None for n = 0); in place under ~n (an int key: no tuple)
        self.shapes: dict = {}
        # the last run-time init (a scalar: immutable, so the same object is the same value)
        # and its launch value
        self.last_init: Any = _NO_INIT
        self.last_value: Any = None

    def call(self, temp: Any, keys: Any, x: Any, y: Any, n: Any, stream: Any, init: Any) -> int:
        if type(n) is not int or not 0 <= n < NARROW or self.epoch != epoch():
            return 0
        if y is x:                              # in place
            if self.libs[0].vec(x) < n:
                return 0
            shape = self.shapes.get(~n)
        else:                                   # (overlap, views of one array: the general path)
            apart = self.apart
            if apart is None or not apart(x, y, n):
                return 0
            shape = self.shapes.get(n)
        if keys is not None:
            apart = self.keys_apart
            if apart is None or not apart(keys, y, n):
                return 0
        if self.device >= 0 and not self.on_device((x, y) if keys is None else (x, y, keys)):
            return 0
        if self.init is not None:
            init = self.init
        elif init is self.last_init:
            init = self.last_value
        else:                   # a run-time init, checked and converted as the general path does
            try:
                value = as_scalar(init, self.plan.acc, "init")
            except (TypeError, ValueError):
                return 0
            if not isinstance(init, np.ndarray):    # (a 1-element array may change)
                self.last_init, self.last_value = init, value
            init = value
        if shape is None:
            shape = self.shape(n, y is x)
            if shape is None:
                return 0
        needed, run = shape
        if temp is None:
            return needed
        ptr = self.temp_at(temp, needed)
        if ptr < 0:
            return 0
        if run is not None:
            if self.host:
                run.go(None, run.host_bound_of(temp), x, keys, y, init)
            else:
                run.go(stream, run.bound.get(ptr) or run.bound_at(ptr, self.plan.target.device_id),
                       x, keys, y, init)
        return needed

    def shape(self, n: int, in_place: bool) -> Optional[tuple[int, Optional[_Launches]]]:
        """(bytes needed, the launches: None for n = 0) of n items, made once
        and kept in `shapes`; None when a user operator is not fitted yet at
        this size (the general path fits it: see _fit)."""
        plan = self.plan
        fits = plan.fits(self.host)
        needed = plan.layout(n, fits[-1])[1]["bytes"]
        run = None
        if n:
            items = fits[0] if len(fits) == 1 or plan.recomputes(n, in_place) else \
                plan.fitted.get((plan.policy.threads_for(n), False, in_place))
            if items is None:
                return None
            run = plan.launches(n, items, self.has_init, in_place)
        if len(self.shapes) >= SHAPES_KEPT:
            self.shapes.clear()
        got = self.shapes[~n if in_place else n] = (needed, run)
        return got


_sigs: dict[tuple, _Sig] = {}
# signature tags (the first element of a cached signature's key)
(_INCLUSIVE_SUM, _EXCLUSIVE_SUM, _INCLUSIVE_SCAN, _INCLUSIVE_SCAN_INIT, _EXCLUSIVE_SCAN,
 _INCLUSIVE_SUM_BY_KEY, _EXCLUSIVE_SUM_BY_KEY, _INCLUSIVE_SCAN_BY_KEY, _EXCLUSIVE_SCAN_BY_KEY,
 _RUNNING_SUM, _RUNNING_SUM_EXCLUSIVE) = range(11)


def _cached(tag: int, temp_storage, d_keys, d_in, d_out, num_items, stream, extra: tuple = (),
            init: Any = None) -> tuple[int, Optional[tuple]]:
    """(bytes, key): the cached signature's result for this call (bytes > 0), or
    0 and the key under which the general path will cache it (None when the
    arguments cannot key a signature: not arrays, an unhashable operator).
    The key is hostpath.find's, built inline (every call builds it)."""
    try:
        key = (tag, type(d_in), d_in.dtype, type(d_out), d_out.dtype)
        if d_keys is not None:
            key += (type(d_keys), d_keys.dtype)
        if extra:
            key += extra
        sig = _sigs.get(key)
    except (AttributeError, TypeError):
        return 0, None
    if sig is None:
        return 0, key
    return sig.call(temp_storage, d_keys, d_in, d_out, num_items, stream, init), key


def _init_key(init: Any) -> tuple:
    """What an init contributes to a signature: its type and dtype (they give the
    accumulator)."""
    return type(init), getattr(init, "dtype", None)


class DeviceScan:
    """Device-wide prefix scans with CUB's signatures (see docs/algorithms.md).
    Results are bit-identical run to run for every operator (float sums
    included); `d_out` may be `d_in` (in place)."""

    @staticmethod
    def inclusive_sum(temp_storage, d_in, d_out, num_items, stream=None) -> int:
        """d_out[i] = d_in[0] + ... + d_in[i], accumulated in CUB's type (the C++
        type of in + in: integers narrower than int in int32; float16/bfloat16
        in float32) and converted to d_out's dtype."""
        got, key = _cached(_INCLUSIVE_SUM, temp_storage, None, d_in, d_out, num_items, stream)
        return got or _scan(temp_storage, None, d_in, d_out, "add", None, num_items, stream,
                            rule="sum", exclusive=False, has_init=False, key=key)

    @staticmethod
    def exclusive_sum(temp_storage, d_in, d_out, num_items, stream=None) -> int:
        """d_out[i] = 0 + d_in[0] + ... + d_in[i-1] (d_out[0] = 0)."""
        got, key = _cached(_EXCLUSIVE_SUM, temp_storage, None, d_in, d_out, num_items, stream)
        return got or _scan(temp_storage, None, d_in, d_out, "add", 0, num_items, stream,
                            rule="sum", exclusive=True, has_init=True, key=key)

    @staticmethod
    def inclusive_scan(temp_storage, d_in, d_out, op, num_items, stream=None) -> int:
        """d_out[i] = d_in[0] op ... op d_in[i]. `op`: "add", "mul", "min", "max",
        "and", "or", "xor", the matching Python functions, or a function of two
        tiles (associative; never assumed commutative)."""
        op = same_function(op)
        got, key = _cached(_INCLUSIVE_SCAN, temp_storage, None, d_in, d_out, num_items, stream,
                           (op,))
        return got or _scan(temp_storage, None, d_in, d_out, op, None, num_items, stream,
                            rule="op", exclusive=False, has_init=False, key=key)

    @staticmethod
    def inclusive_scan_init(temp_storage, d_in, d_out, op, init, num_items, stream=None) -> int:
        """d_out[i] = init op d_in[0] op ... op d_in[i]; the accumulator has
        init's dtype (a NumPy scalar), or d_out's for a Python number."""
        op = same_function(op)
        got, key = _cached(_INCLUSIVE_SCAN_INIT, temp_storage, None, d_in, d_out, num_items,
                           stream, (op, *_init_key(init)), init)
        return got or _scan(temp_storage, None, d_in, d_out, op, init, num_items, stream,
                            rule="init", exclusive=False, has_init=True, key=key)

    @staticmethod
    def exclusive_scan(temp_storage, d_in, d_out, op, init, num_items, stream=None) -> int:
        """d_out[0] = init, d_out[i] = init op d_in[0] op ... op d_in[i-1]."""
        op = same_function(op)
        got, key = _cached(_EXCLUSIVE_SCAN, temp_storage, None, d_in, d_out, num_items, stream,
                           (op, *_init_key(init)), init)
        return got or _scan(temp_storage, None, d_in, d_out, op, init, num_items, stream,
                            rule="init", exclusive=True, has_init=True, key=key)

    # --- by key: runs of equal consecutive keys are scanned separately ---------------------
    @staticmethod
    def inclusive_sum_by_key(temp_storage, d_keys_in, d_values_in, d_values_out, num_items,
                             equality_op=None, stream=None) -> int:
        """inclusive_sum within each run of consecutive equal keys (equality_op: a
        function of two key tiles returning a bool tile; None: ==)."""
        eq = same_function(equality_op)
        got, key = _cached(_INCLUSIVE_SUM_BY_KEY, temp_storage, d_keys_in, d_values_in,
                           d_values_out, num_items, stream, (eq,))
        return got or _scan(temp_storage, d_keys_in, d_values_in, d_values_out, "add", None,
                            num_items, stream, rule="sum", exclusive=False, has_init=False, eq=eq,
                            key=key)

    @staticmethod
    def exclusive_sum_by_key(temp_storage, d_keys_in, d_values_in, d_values_out, num_items,
                             equality_op=None, stream=None) -> int:
        """exclusive_sum within each run (the first item of a run gets 0)."""
        eq = same_function(equality_op)
        got, key = _cached(_EXCLUSIVE_SUM_BY_KEY, temp_storage, d_keys_in, d_values_in,
                           d_values_out, num_items, stream, (eq,))
        return got or _scan(temp_storage, d_keys_in, d_values_in, d_values_out, "add", 0,
                            num_items, stream, rule="sum", exclusive=True, has_init=True, eq=eq,
                            key=key)

    @staticmethod
    def inclusive_scan_by_key(temp_storage, d_keys_in, d_values_in, d_values_out, op, num_items,
                              equality_op=None, stream=None) -> int:
        """inclusive_scan within each run of consecutive equal keys."""
        op, eq = same_function(op), same_function(equality_op)
        got, key = _cached(_INCLUSIVE_SCAN_BY_KEY, temp_storage, d_keys_in, d_values_in,
                           d_values_out, num_items, stream, (op, eq))
        return got or _scan(temp_storage, d_keys_in, d_values_in, d_values_out, op, None,
                            num_items, stream, rule="op", exclusive=False, has_init=False, eq=eq,
                            key=key)

    @staticmethod
    def exclusive_scan_by_key(temp_storage, d_keys_in, d_values_in, d_values_out, op, init,
                              num_items, equality_op=None, stream=None) -> int:
        """exclusive_scan within each run (the first item of a run gets init)."""
        op, eq = same_function(op), same_function(equality_op)
        got, key = _cached(_EXCLUSIVE_SCAN_BY_KEY, temp_storage, d_keys_in, d_values_in,
                           d_values_out, num_items, stream, (op, eq, *_init_key(init)), init)
        return got or _scan(temp_storage, d_keys_in, d_values_in, d_values_out, op, init,
                            num_items, stream, rule="init", exclusive=True, has_init=True, eq=eq,
                            key=key)


def running_sum(temp_storage, d_in, d_out, num_items, stream, exclusive: bool) -> int:
    """The convenience layer's two-phase sum (`cumsum`): as inclusive_sum /
    exclusive_sum, but accumulated in d_out's type, as NumPy's cumsum does."""
    tag = _RUNNING_SUM_EXCLUSIVE if exclusive else _RUNNING_SUM
    got, key = _cached(tag, temp_storage, None, d_in, d_out, num_items, stream)
    return got or _scan(temp_storage, None, d_in, d_out, "add", 0 if exclusive else None,
                        num_items, stream, rule="out", exclusive=exclusive, has_init=exclusive,
                        key=key)


def running_sum_signature(d_in, d_out, exclusive: bool) -> Optional[_Sig]:
    """The cached signature of running_sum for arrays like these, or None (the
    convenience layer's cached path runs on it: `_Sig.shape` and the launches'
    `go`)."""
    return find(_sigs, _RUNNING_SUM_EXCLUSIVE if exclusive else _RUNNING_SUM, (d_in, d_out))[0]


def _kind_and_op(name: Optional[str], op: Any, acc: DType) -> tuple[str, Any]:
    """The plan's operator kind and user function: a well-known operator's name
    (given by name, or a user function recognized as one: op_recognition) and
    None, or "user" and the function."""
    kind = name or recognized_operator(op, acc)
    return (kind, None) if kind is not None else ("user", op)


def inclusive_temp_bytes(target: Target, in_dtype: DType, op: Any, num_items: int,
                         by_key: bool = False) -> tuple[int, DType]:
    """(bytes, accumulator) that DeviceScan.inclusive_scan (by_key: the
    inclusive_scan_by_key with the default equality) asks for on `target` for
    `num_items` items of `in_dtype` with `op` ("add" is also inclusive_sum's):
    what its temp_storage=None query returns, without arrays (for algorithms
    built on DeviceScan, such as DeviceReduce.reduce_by_key)."""
    name = op_name(op)
    acc = _accumulator("op", name, Arg(None, True, in_dtype, 0, 1, -1, ()), None, None)
    plan = _plan(in_dtype, acc, *_kind_and_op(name, op, acc), None, by_key,
                 num_items >= _WIDE, False, target)
    return plan.layout(num_items)[0].size(), acc
