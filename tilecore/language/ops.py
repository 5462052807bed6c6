"""The tile-code functions of the language, with cuTile Python's signatures.

These are declarations: calling one from host code raises TypeError. Inside a
kernel the front end binds the call's arguments against the signature written
here (so defaults and argument names live in one place) and lowers it to IR.
"""
from __future__ import annotations

from .dtypes import float32, int32
from .enums import MemoryOrder, MemoryScope, PaddingMode, RoundingMode

__all__ = [
    "cdiv", "bid", "num_blocks", "num_tiles", "load", "prefetch", "store", "gather", "scatter",
    "arange", "zeros", "ones", "full", "astype", "bitcast", "reshape", "permute", "transpose",
    "broadcast_to", "expand_dims", "sum", "prod", "max", "min", "argmax", "argmin",
    "minimum", "maximum", "where", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin",
    "cos", "tan", "sinh", "cosh", "tanh", "floor", "ceil", "abs", "isnan", "pow", "atan2",
    "add", "sub", "mul", "truediv", "floordiv", "mod", "negative", "bitwise_and",
    "bitwise_or", "bitwise_xor", "bitwise_not", "equal", "not_equal", "less", "less_equal",
    "greater", "greater_equal", "TILE_FUNCTIONS",
    "atomic_add", "atomic_max", "atomic_min", "atomic_and", "atomic_or", "atomic_xor",
    "atomic_xchg", "atomic_cas",
    "cumsum", "cumprod", "scan", "reduce",
    "grid_dependency_control_wait", "grid_dependency_control_launch_dependents",
]

TILE_FUNCTIONS: dict[str, object] = {}


def _tile_only(fn):
    """Register `fn` as a tile-code function; calling it on the host is an error."""
    name = fn.__name__

    def host_call(*args, **kwargs):
        raise TypeError(f"tilecore.{name}() can only be called from tile code "
                        f"(inside a @tilecore.kernel or a function it calls)")

    host_call.__name__ = name
    host_call.__qualname__ = name
    host_call.__doc__ = fn.__doc__
    host_call.__wrapped__ = fn  # the signature the front end binds against
    host_call.__module__ = "tilecore"
    TILE_FUNCTIONS[name] = host_call
    return host_call


def cdiv(a, b, /):
    """Ceiling division of integers; usable in host code and tile code."""
    return -(-a // b)


# --- blocks and tile space -------------------------------------------------
@_tile_only
def bid(axis, /):
    """Index of the current block along grid axis 0, 1 or 2 (int32)."""


@_tile_only
def num_blocks(axis, /):
    """Number of blocks of the grid along axis 0, 1 or 2 (int32)."""


@_tile_only
def num_tiles(array, /, axis, shape, order="C"):
    """Number of tiles of `shape` along tile-space `axis` of `array` (int32)."""


# --- memory ------------------------------------------------------------------
@_tile_only
def load(array, /, index, shape, *, order="C", padding_mode=PaddingMode.UNDETERMINED,
         latency=None, allow_tma=None, check_bounds=True, memory_order=MemoryOrder.WEAK,
         memory_scope=MemoryScope.NONE):
    """Load the tile of `shape` at tile-space `index`; out-of-bounds elements are padded.
    memory_order RELAXED or ACQUIRE (with a memory_scope) makes each element a strong
    read, for data other blocks write while the kernel runs."""


@_tile_only
def prefetch(array, /, index, shape, *, order="C"):
    """A hint (tilecore's extension; cuTile has no such op): the elements that
    `load(array, index, shape, order=order)` would read will be read soon, so
    bring them into the L2 cache. No result and no effect on any value: elements
    outside the array are skipped (a tile wholly outside prefetches nothing), and
    it orders no other access. Arguments are checked as load's."""


@_tile_only
def grid_dependency_control_wait():
    """Wait until the kernel before this one in the stream has finished and its
    writes are visible. Only a launch with `programmatic_dependent_launch=True`
    lets a kernel start before its predecessor has finished, and there the
    statements before this wait may run while the predecessor still runs (they
    must not read what it writes, nor write what it reads). Without that option,
    or where there is no such launch (below sm_90, the interpreter), the whole
    kernel runs after its predecessor and this returns at once."""


@_tile_only
def grid_dependency_control_launch_dependents():
    """Let the next kernel of the stream, if launched with
    `programmatic_dependent_launch=True`, start before this one has finished
    (once every block of this kernel has called this or exited). It does not
    make this kernel's writes visible: the next kernel still sees them only
    after its own `grid_dependency_control_wait()`. Repeated calls do nothing more."""


@_tile_only
def store(array, /, index, tile, *, order="C", latency=None, allow_tma=None,
          check_bounds=True, memory_order=MemoryOrder.WEAK, memory_scope=MemoryScope.NONE):
    """Store `tile` at tile-space `index`; out-of-bounds elements are dropped.
    memory_order RELAXED or RELEASE (with a memory_scope) makes each element a strong
    write; RELEASE publishes every earlier write of the block with it."""


@_tile_only
def gather(array, indices, /, *, mask=None, padding_value=0, check_bounds=True, latency=None):
    """Load the elements at element `indices` (a tile or a tuple of tiles, one per axis)."""


@_tile_only
def scatter(array, indices, value, /, *, mask=None, check_bounds=True, latency=None):
    """Store `value` at element `indices`; out-of-bounds or masked-off writes are dropped."""


# --- factories -------------------------------------------------------------------
@_tile_only
def arange(size, /, *, dtype=int32):
    """1-d tile 0, 1, ..., size-1 (size a compile-time power of two)."""


@_tile_only
def zeros(shape, dtype=float32):
    """Tile of `shape` filled with 0."""


@_tile_only
def ones(shape, dtype=float32):
    """Tile of `shape` filled with 1."""


@_tile_only
def full(shape, fill_value, dtype=None):
    """Tile of `shape` filled with `fill_value` (a scalar); dtype None takes the
    fill value's dtype (a number: its loosely typed constant dtype)."""


# --- conversions and shapes ---------------------------------------------------------
@_tile_only
def astype(x, dtype, /):
    """Element-wise conversion to `dtype`."""


@_tile_only
def bitcast(x, dtype, /):
    """The same bits read as `dtype`, element by element; `dtype` must have the
    same width as x's (bool, tfloat32 and float4_e2m1fn are not allowed)."""


@_tile_only
def reshape(x, /, shape):
    """Same elements in row-major order, new shape."""


@_tile_only
def permute(x, /, axes):
    """Permute the axes of `x` (as numpy.transpose)."""


@_tile_only
def transpose(x, /, axis0=None, axis1=None):
    """Swap two axes (the last two by default; a 1-d or 2-d tile needs none)."""


@_tile_only
def broadcast_to(x, /, shape):
    """Broadcast `x` to `shape` with NumPy rules."""


@_tile_only
def expand_dims(x, /, axis):
    """Insert a length-1 axis at `axis`."""


# --- reductions ---------------------------------------------------------------------
@_tile_only
def sum(x, /, axis=None, *, keepdims=False):
    """Sum over `axis` (an int, a tuple of ints, or None for all)."""


@_tile_only
def prod(x, /, axis=None, *, keepdims=False):
    """Product over `axis`."""


@_tile_only
def max(x, /, axis=None, *, keepdims=False):
    """Maximum over `axis` (NaN propagates)."""


@_tile_only
def min(x, /, axis=None, *, keepdims=False):
    """Minimum over `axis` (NaN propagates)."""


@_tile_only
def argmax(x, /, axis=None, *, keepdims=False):
    """Index of the maximum along `axis` (first on ties; int32)."""


@_tile_only
def argmin(x, /, axis=None, *, keepdims=False):
    """Index of the minimum along `axis` (first on ties; int32)."""


# --- element-wise -------------------------------------------------------------------
@_tile_only
def minimum(x, y, /):
    """Element-wise minimum (NaN propagates)."""


@_tile_only
def maximum(x, y, /):
    """Element-wise maximum (NaN propagates)."""


@_tile_only
def where(cond, x, y, /):
    """Element-wise `x` where `cond` else `y`."""


@_tile_only
def pow(x, y, /):
    """Element-wise x ** y."""


@_tile_only
def atan2(x1, x2, /):
    """Element-wise arctangent of x1 / x2 in the right quadrant."""


@_tile_only
def exp(x, /, *, rounding_mode=None):
    """Element-wise e ** x. rounding_mode=RoundingMode.APPROX (float32 only) uses the
    hardware's fast approximation; None and FULL give the accurate result."""


@_tile_only
def exp2(x, /):
    """Element-wise 2 ** x."""


@_tile_only
def log(x, /):
    """Element-wise natural logarithm."""


@_tile_only
def log2(x, /):
    """Element-wise base-2 logarithm."""


@_tile_only
def sqrt(x, /):
    """Element-wise square root."""


@_tile_only
def rsqrt(x, /):
    """Element-wise 1 / sqrt(x)."""


@_tile_only
def sin(x, /):
    """Element-wise sine."""


@_tile_only
def cos(x, /):
    """Element-wise cosine."""


@_tile_only
def tan(x, /):
    """Element-wise tangent."""


@_tile_only
def sinh(x, /):
    """Element-wise hyperbolic sine."""


@_tile_only
def cosh(x, /):
    """Element-wise hyperbolic cosine."""


@_tile_only
def tanh(x, /):
    """Element-wise hyperbolic tangent."""


@_tile_only
def floor(x, /):
    """Element-wise floor."""


@_tile_only
def ceil(x, /):
    """Element-wise ceiling."""


@_tile_only
def abs(x, /):
    """Element-wise absolute value."""


@_tile_only
def isnan(x, /):
    """Element-wise NaN test (bool tile)."""


@_tile_only
def add(x, y, /):
    """x + y."""


@_tile_only
def sub(x, y, /):
    """x - y."""


@_tile_only
def mul(x, y, /):
    """x * y."""


@_tile_only
def truediv(x, y, /, *, rounding_mode=RoundingMode.RN, flush_to_zero=False):
    """x / y, correctly rounded to nearest even by default. Other rounding modes (RZ, RM,
    RP, and the faster FULL and APPROX) and flush_to_zero need float32 operands."""


@_tile_only
def floordiv(x, y, /):
    """x // y (floor, as Python)."""


@_tile_only
def mod(x, y, /):
    """x % y (sign of the divisor, as Python)."""


@_tile_only
def negative(x, /):
    """-x."""


@_tile_only
def bitwise_and(x, y, /):
    """x & y."""


@_tile_only
def bitwise_or(x, y, /):
    """x | y."""


@_tile_only
def bitwise_xor(x, y, /):
    """x ^ y."""


@_tile_only
def bitwise_not(x, /):
    """~x."""


@_tile_only
def equal(x, y, /):
    """x == y."""


@_tile_only
def not_equal(x, y, /):
    """x != y."""


@_tile_only
def less(x, y, /):
    """x < y."""


@_tile_only
def less_equal(x, y, /):
    """x <= y."""


@_tile_only
def greater(x, y, /):
    """x > y."""


@_tile_only
def greater_equal(x, y, /):
    """x >= y."""


# --- atomics -------------------------------------------------------------------------
# Each element of the tile is its own atomic operation; the call as a whole is not
# atomic. Indices as gather/scatter's (one integer tile or scalar per array axis,
# broadcast); out-of-bounds elements do nothing. Each returns the values the elements
# held before (a tile of the indices' shape).
@_tile_only
def atomic_add(array, indices, update, /, *, check_bounds=True,
               memory_order=MemoryOrder.ACQ_REL, memory_scope=MemoryScope.DEVICE):
    """array[indices] += update, atomically per element; returns the old values.
    Integers of 32/64 bits (wrapping), float16, bfloat16, float32, float64."""


@_tile_only
def atomic_max(array, indices, update, /, *, check_bounds=True,
               memory_order=MemoryOrder.ACQ_REL, memory_scope=MemoryScope.DEVICE):
    """array[indices] = max(array[indices], update) per element (32/64-bit integers)."""


@_tile_only
def atomic_min(array, indices, update, /, *, check_bounds=True,
               memory_order=MemoryOrder.ACQ_REL, memory_scope=MemoryScope.DEVICE):
    """array[indices] = min(array[indices], update) per element (32/64-bit integers)."""


@_tile_only
def atomic_and(array, indices, update, /, *, check_bounds=True,
               memory_order=MemoryOrder.ACQ_REL, memory_scope=MemoryScope.DEVICE):
    """array[indices] &= update per element (32/64-bit integers, update of the same dtype)."""


@_tile_only
def atomic_or(array, indices, update, /, *, check_bounds=True,
              memory_order=MemoryOrder.ACQ_REL, memory_scope=MemoryScope.DEVICE):
    """array[indices] |= update per element (32/64-bit integers, update of the same dtype)."""


@_tile_only
def atomic_xor(array, indices, update, /, *, check_bounds=True,
               memory_order=MemoryOrder.ACQ_REL, memory_scope=MemoryScope.DEVICE):
    """array[indices] ^= update per element (32/64-bit integers, update of the same dtype)."""


@_tile_only
def atomic_xchg(array, indices, update, /, *, check_bounds=True,
                memory_order=MemoryOrder.ACQ_REL, memory_scope=MemoryScope.DEVICE):
    """array[indices] = update per element, returning the old values (32/64-bit
    integers, float32, float64)."""


@_tile_only
def atomic_cas(array, indices, expected, desired, /, *, check_bounds=True,
               memory_order=MemoryOrder.ACQ_REL, memory_scope=MemoryScope.DEVICE):
    """Per element: if array[indices] equals `expected` (bit for bit), write `desired`;
    returns the old values (`expected` where the index is out of bounds)."""


# --- scans and custom reductions ----------------------------------------------------
@_tile_only
def cumsum(x, /, axis=0, *, reverse=False, rounding_mode=None, flush_to_zero=False):
    """Inclusive cumulative sum along `axis` (reverse=True: from the end). A bool tile
    sums as int32; integers wrap. Only the default rounding is supported (rounding_mode
    None or RoundingMode.RN, flush_to_zero False)."""


@_tile_only
def cumprod(x, /, axis=0, *, reverse=False, rounding_mode=None, flush_to_zero=False):
    """Inclusive cumulative product along `axis`; as cumsum."""


@_tile_only
def scan(x, /, axis, func, identity, *, reverse=False, exclusive=False):
    """Inclusive scan of a tile, or of a tuple of tiles (broadcast to one shape), along
    `axis` with the combining function `func` (a tile function, a lambda or an operator
    function: two 0-d tiles in, one out; for a tuple of n tiles, 2n in and a tuple of n
    out, the earlier elements' values first). `func` must be associative, not
    commutative; `identity` is its identity (a constant, or a tuple of constants).
    `exclusive` (a tilecore extension): each element gets the fold of the elements
    before it (after it with reverse) and the first one `identity`, which is never
    combined: an exclusive scan of an operator without an identity, seeded by
    overwriting the first element, as CUB's exclusive scans with an initial value."""


@_tile_only
def reduce(x, /, axis, func, identity, *, keepdims=False, sequential=False):
    """Reduction of a tile, or of a tuple of tiles, along `axis` with `func` (as scan).
    The association is the implementation's (tilecore: a fixed in-order tree), unless
    `sequential` (a tilecore extension): then each reduction combines left to right,
    ((x0 func x1) func x2) ..., the one association of a non-associative `func` (float
    sums) that a fold resumed from any earlier partial result reproduces bit for bit
    (DeviceScan's ordered look-back is built on it). Meant for short axes: on the GPU
    a 1-D tile of at most 32 elements folds in one warp, longer axes one thread per
    reduction through shared memory."""
