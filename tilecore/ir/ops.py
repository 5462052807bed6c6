"""The catalog of IR ops: the contract every backend implements.

The front end guarantees the invariants stated here (dtypes already promoted,
shapes already broadcast, axes normalized), so backends never re-derive typing
rules. Both the interpreter and the CUDA code generator keep a rule table
keyed by these names; a test checks that each covers every op.

Notation: operands in parentheses, attrs in braces. "scalar" is a 0-d tile.

constant   () {value}                 -> scalar of the result dtype; value is a Python
                                         bool/int/float already representable in it.
bid        () {axis}                  -> int32 scalar: this block's index on grid axis 0..2.
num_blocks () {axis}                  -> int32 scalar: grid size on that axis.
array_dim  (arr) {axis}               -> scalar of arr's index dtype (int32, or int64 for an
                                         array specialized as wide): arr.shape[axis].
array_stride (arr) {axis}             -> the same: arr.strides[axis], in elements.
iota       () {shape=(n,), dtype}     -> 1-d tile 0, 1, ..., n-1 (integer dtype).
broadcast  (x) {shape}                -> x broadcast to shape (NumPy rules; rank may grow).
reshape    (x) {shape}                -> same elements in row-major order, new shape.
permute    (x) {axes}                 -> numpy.transpose(x, axes).
astype     (x) {dtype}                -> element-wise conversion: float->int truncates toward
                                         zero, int->int wraps (two's complement), float->narrower
                                         float and int->float round to nearest even, ->bool is
                                         x != 0, bool->number is 0/1. tfloat32 keeps 10 mantissa
                                         bits (RN). NaN/inf/out-of-range float->int: an
                                         unspecified value (the GPU saturates), nothing else.
bitcast    (x) {dtype}                -> the same bits read as dtype (same itemsize; no bool,
                                         tfloat32 or float4).
unary      (x) {fn[, rounding]}       -> fn in UNARY_FNS, same dtype and shape, except
                                         isnan -> bool. neg on unsigned wraps. invert: bitwise
                                         not on integers, logical not on bool. exp may carry
                                         rounding=RoundingMode.APPROX (float32 only): the
                                         hardware approximation (results within a few ulps).
binary     (a, b) {fn}                -> fn in BINARY_FNS; a and b have the same dtype and shape;
                                         result has that dtype. Integer floordiv/mod follow
                                         Python (floor; the remainder has the divisor's sign);
                                         float mod likewise (Python's %); integer floordiv and
                                         mod by zero give 0. lshift/rshift: a count outside
                                         [0, bits) gives 0 (rshift of a signed int: its sign's
                                         fill); rshift is arithmetic for signed ints.
                                         pow on integers: exponent >= 0. minimum/maximum
                                         propagate NaN. truediv is only emitted for floats.
compare    (a, b) {fn}                -> fn in COMPARE_FNS, a and b same dtype/shape -> bool tile.
where      (cond, a, b)               -> cond is bool; all three have the same shape; a and b
                                         the same dtype.
reduce     (x) {fn, axes, keepdims}   -> fn in REDUCE_FNS over the sorted tuple `axes`
                                         (non-empty); same dtype as x (the front end casts
                                         bool to int32 first). max/min propagate NaN; sum/prod
                                         of integers wrap.
argreduce  (x) {fn, axis, keepdims}   -> fn in ('argmax', 'argmin'); axis is an int, or None
                                         for the flattened tile (then keepdims keeps all dims
                                         as 1); int32 result; ties pick the first index; a NaN
                                         counts as larger than everything for argmax and smaller
                                         for argmin (so the first NaN wins), as NumPy does.
scan       (*xs) {axis, reverse, identities[, exclusive]} region [combine(*lhs, *rhs)]
                                      -> one tile per x: the inclusive scan along `axis` (an
                                         int). xs: n >= 1 tiles of one shape (the front end
                                         broadcasts them), each of its own dtype; `identities`
                                         holds one number per x, representable in its dtype
                                         (the identity of combine: no combined value
                                         depends on it, backends may use it as a neutral
                                         value). The
                                         region's 2n block arguments are 0-d values of the xs'
                                         dtypes (the earlier group, then the later one) and it
                                         ends with `yield` of n 0-d values of those dtypes; it
                                         is closed (uses only its arguments and values it
                                         defines) and holds only constant, astype, unary,
                                         binary, compare, where, bid, num_blocks, and
                                         reshape/broadcast of one-element values. Element i
                                         along the axis is combine(...combine(x0, x1)..., xi)
                                         associated in any way: combine must be associative,
                                         need not be commutative (its left operand always
                                         holds the earlier elements). reverse: the same from
                                         the end of the axis (element i combines elements
                                         n-1 down to i; the left operand holds later ones).
                                         exclusive (true when present): element i combines
                                         the elements before it (after it with reverse) and
                                         the first (last) is `identities`, never combined.
fold       (*xs) {axis, keepdims, identities} region [combine(*lhs, *rhs)]
                                      -> one tile per x: the combination of all elements along
                                         `axis` in their order (any association), shaped as
                                         `reduce` shapes its result; xs, identities and the
                                         region as for `scan`.
load       (arr, *index) {shape, order, steps, padding, check_bounds, latency, allow_tma}
                                      -> tile of arr.dtype with `shape` (len = arr.ndim).
                                         index: one int32 or int64 scalar per tile axis (exact:
                                         never narrowed). Element t[k...]
                                         (tile axes k) reads arr at array axis order[k],
                                         coordinate index[k] * steps[k] + t_k. Out-of-bounds
                                         elements (coordinate < 0 or >= dim; a tile wholly
                                         outside reads only padding) take the padding value of
                                         `padding` (a PaddingMode: UNDETERMINED -> NaN for
                                         floats, the dtype's max for ints, True for bool).
                                         check_bounds=False: the front end promises in-bounds.
                                         Optional {memory_order, memory_scope} (absent: WEAK):
                                         RELAXED or ACQUIRE with BLOCK/DEVICE/SYS make each
                                         element a strong read; ACQUIRE orders every later
                                         access of the block after the whole tile's reads.
prefetch   (arr, *index) {shape, order, steps}
                                      -> no result: a hint that the elements a load with the
                                         same operands and attrs would read are read soon
                                         (backends may bring them into L2, or do nothing).
                                         Touches no element outside the array (a tile wholly
                                         outside prefetches nothing), never faults, changes no
                                         value and orders no access: passes keep it (it is
                                         not dead code) but need not order other accesses
                                         around it, and it is no write of arr.
grid_wait  ()                         -> no result: waits until the grid before this one in
                                         the stream has finished and its writes are visible
                                         (programmatic dependent launch). A fence: no access
                                         moves above it. A kernel that has one starts with no
                                         automatic wait when launched for early start.
grid_launch_dependents ()             -> no result: lets the stream's next grid start before
                                         this one finishes; orders no access.
store      (arr, tile, *index) {shape, order, steps, check_bounds, latency, allow_tma}
                                      -> no result; same addressing as load; out-of-bounds
                                         elements are dropped (a tile wholly outside writes
                                         nothing). tile.dtype == arr.dtype. Optional
                                         {memory_order, memory_scope}: RELAXED or RELEASE make
                                         each element a strong write; RELEASE orders every
                                         earlier access of the block before them.
gather     (arr, pad, *indices[, mask]) {has_mask, check_bounds[, raw]}
                                      -> tile of arr.dtype with the shape of the indices.
                                         One integer index tile per array axis, all of the same
                                         shape and dtype (int32 or int64); `pad` is a scalar of
                                         arr.dtype. An element whose index is < 0 or >= dim on
                                         any axis, or whose mask is False, reads `pad`.
                                         raw=True (Array.get_raw_memory()): one index tile, for
                                         any arr rank, the element offset from arr's base
                                         pointer (the address of element (0, ..., 0)): no
                                         strides, no bounds (check_bounds is False). An enabled
                                         offset outside the memory arr's elements span is
                                         undefined (the interpreter raises). The same attr, with
                                         the same meaning, on scatter, atomic_rmw, atomic_cas.
                                         Optional {memory_order, memory_scope} (raw only:
                                         load_offset), as on load.
scatter    (arr, values, *indices[, mask]) {has_mask, check_bounds[, raw]}
                                      -> no result; values has the indices' shape and
                                         arr.dtype; out-of-bounds or masked-off writes are
                                         dropped. Duplicate indices: one of the values lands.
atomic_rmw (arr, update, *indices[, mask]) {fn, memory_order, memory_scope, check_bounds
                                            [, has_mask, raw]}
                                      -> tile of arr.dtype with the indices' shape: the value
                                         each element held just before its own atomic update
                                         (0 for an out-of-bounds or masked-off element, which
                                         updates nothing). fn in ATOMIC_FNS; indices as gather's;
                                         update has the indices' shape and arr.dtype. Elements
                                         apply one at a time; repeated indices all apply, in an
                                         unspecified order (the interpreter: row-major). add
                                         wraps on integers and rounds once per element on
                                         floats (float16/bfloat16/float32/float64); max/min/
                                         and/or/xor on 32/64-bit integers; xchg also on
                                         float32/float64 (by bits). memory_order is RELAXED,
                                         ACQUIRE, RELEASE or ACQ_REL (RELEASE: every earlier
                                         access of the block is ordered before each element's
                                         update; ACQUIRE: every later one after them all), with
                                         memory_scope BLOCK, DEVICE or SYS.
atomic_cas (arr, expected, desired, *indices[, mask]) {memory_order, memory_scope,
                                            check_bounds[, has_mask, raw]}
                                      -> old values as atomic_rmw; each element whose old value
                                         equals `expected` bit for bit becomes `desired`. An
                                         out-of-bounds or masked-off element returns
                                         `expected`. expected and desired: the indices' shape
                                         and arr.dtype (32/64-bit integers, float32, float64).
if         (cond) regions [then, else]-> results = values yielded by the region that runs.
for        (lb, ub, step, *init) region [body(iv, *carried)]
                                      -> iv runs lb, lb+step, ... while iv < ub (step > 0);
                                         results are the carried values when the loop ends
                                         (normally, or the `break` operands).
while      (*init) region [body(*carried)]
                                      -> runs body until it executes `break`; results are the
                                         break operands.
yield      (*values)                  -> ends an if-region (its results) or a loop body (the
                                         next iteration's carried values).
continue   (*values)                  -> next iteration of the innermost loop with these
                                         carried values (may appear inside nested if-regions).
break      (*values)                  -> leaves the innermost loop; values are its results.

A region ends with exactly one terminator (yield/continue/break) as its last op,
except the function body, which has none.
"""
from __future__ import annotations

__all__ = ["OPS", "UNARY_FNS", "BINARY_FNS", "COMPARE_FNS", "REDUCE_FNS", "ARG_REDUCE_FNS",
           "TERMINATORS", "FLOAT_ONLY_UNARY", "ATOMIC_FNS"]

UNARY_FNS = ("neg", "invert", "abs", "exp", "exp2", "log", "log2", "sqrt", "rsqrt",
             "sin", "cos", "tan", "sinh", "cosh", "tanh", "floor", "ceil", "isnan")
# Unary functions the front end only emits on float dtypes (it casts ints to float first).
FLOAT_ONLY_UNARY = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tan",
                    "sinh", "cosh", "tanh", "floor", "ceil", "isnan")
BINARY_FNS = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "atan2",
              "minimum", "maximum", "bitand", "bitor", "bitxor", "lshift", "rshift")
COMPARE_FNS = ("eq", "ne", "lt", "le", "gt", "ge")
REDUCE_FNS = ("sum", "prod", "max", "min")
ARG_REDUCE_FNS = ("argmax", "argmin")
TERMINATORS = ("yield", "continue", "break")
ATOMIC_FNS = ("add", "max", "min", "and", "or", "xor", "xchg")

OPS = ("constant", "bid", "num_blocks", "array_dim", "array_stride", "iota", "broadcast",
       "reshape", "permute", "astype", "bitcast", "unary", "binary", "compare", "where", "reduce",
       "argreduce", "scan", "fold", "load", "prefetch", "grid_wait",
       "grid_launch_dependents", "store", "gather", "scatter", "atomic_rmw",
       "atomic_cas", "if", "for", "while") + TERMINATORS
