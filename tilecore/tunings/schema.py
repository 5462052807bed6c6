"""The tuning-table schema: every algorithm's tunable parameters, their ranges
and constraints, the tuning-key fields rows may match on, and the provenance
every table carries. Defined here once: the loader validates tables against
it, `override_policy` validates overrides against it, and the tuner
(`python -m tilecore.tune`, later) reads its search space from it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

__all__ = ["Param", "KeyField", "Constraint", "AlgorithmSchema", "SCHEMAS", "SCHEMA_VERSION",
           "PROVENANCE_FIELDS", "OPTIONAL_PROVENANCE_FIELDS", "TuningError", "schema_for", "validate_params"]

SCHEMA_VERSION = 1


class TuningError(ValueError):
    """A tuning table or override that does not follow the schema; the message
    names the file, line and field."""


# How many values of a non-power-of-two range a tuner may try one by one; wider
# ranges need an explicit `grid`.
MAX_RANGE_CANDIDATES = 64


@dataclass(frozen=True)
class Param:
    """A policy field: its valid range (`check`, used by the loader and
    `override_policy`) and what the tuner does with it (`candidates`,
    `tuned`, `applies`).

    grid: the values a tuner tries, in order (empty: the powers of two in
    range for a power-of-two field, else the whole range, which must then be
    at most MAX_RANGE_CANDIDATES values). tuned: False keeps the field at the
    current policy's value in every search. applies(key, fields): whether the
    field changes the kernels for tuning key `key` given the policy's other
    fields (None: always); a search space drops the field where it does not
    apply, so no two candidates differ only in a field nobody reads. It may
    read only fields listed before it in the schema (the space decides the
    fields in that order), and must read the same fields whatever their
    values."""
    name: str
    lo: int
    hi: int
    power_of_two: bool
    doc: str
    grid: tuple[int, ...] = ()
    tuned: bool = True
    applies: Optional[Callable[[dict, dict], bool]] = None

    def __post_init__(self) -> None:
        for v in self.grid:
            problem = self.check(v)
            if problem:
                raise TuningError(f"Param {self.name!r}: grid value {v!r}: {problem}")
        if list(self.grid) != sorted(set(self.grid)):
            raise TuningError(f"Param {self.name!r}: grid must be strictly increasing, "
                              f"got {self.grid}")
        if (self.tuned and not self.grid and not self.power_of_two
                and self.hi - self.lo + 1 > MAX_RANGE_CANDIDATES):
            raise TuningError(f"Param {self.name!r}: a tuned range of {self.hi - self.lo + 1} "
                              f"values needs an explicit grid (at most "
                              f"{MAX_RANGE_CANDIDATES} values are tried one by one)")

    def check(self, value) -> Optional[str]:
        """None when `value` is valid, else what is wrong with it."""
        if isinstance(value, bool) or not isinstance(value, int):
            return f"expected an integer, got {value!r}"
        if not self.lo <= value <= self.hi:
            return f"expected a value in {self.lo}..{self.hi}, got {value}"
        if self.power_of_two and value & (value - 1):
            return f"expected a power of two in {self.lo}..{self.hi}, got {value}"
        return None

    def candidates(self) -> list[int]:
        """The values a tuner tries, in increasing order: the grid, else the
        powers of two in range, else the whole (short) range."""
        if self.grid:
            return list(self.grid)
        if self.power_of_two:
            out, v = [], 1
            while v <= self.hi:
                if v >= self.lo:
                    out.append(v)
                v *= 2
            return out
        return list(range(self.lo, self.hi + 1))

    def active(self, key: dict, fields: dict) -> bool:
        """Whether a search for tuning key `key` tries values of this field,
        given the policy's fields listed before it in the schema."""
        return self.tuned and (self.applies is None or self.applies(key, fields))


@dataclass(frozen=True)
class KeyField:
    """A field of an algorithm's tuning key. A field that is not `required`
    refines rows (a row may name it, the calls' keys always carry it) but may
    be missing from a tuner's key: its rows then apply whatever its value."""
    name: str
    values: tuple
    doc: str
    required: bool = True

    def accepts(self, value: Any) -> bool:
        """Whether `value` is one of the field's values, of its type too (YAML's
        `1` is not `true`, nor `true` a value size of 1)."""
        return any(type(value) is type(v) and value == v for v in self.values)


@dataclass(frozen=True)
class Constraint:
    """A condition on a complete policy (all fields merged)."""
    doc: str
    holds: Callable[[dict], bool]


@dataclass(frozen=True)
class AlgorithmSchema:
    algorithm: str
    params: tuple[Param, ...]
    key_fields: tuple[KeyField, ...]
    constraints: tuple[Constraint, ...]

    def param(self, name: str) -> Optional[Param]:
        return next((p for p in self.params if p.name == name), None)

    def key_field(self, name: str) -> Optional[KeyField]:
        return next((k for k in self.key_fields if k.name == name), None)

    def row_match(self, key: dict) -> dict:
        """The `match` of a row written for a call of tuning `key`: its required
        fields (a tuner times one scan of two, and its rows apply to both)."""
        return {k: v for k, v in key.items()
                if (f := self.key_field(k)) is None or f.required}

    def tuned_params(self) -> tuple[Param, ...]:
        """The fields a tuner searches, in the order it decides them."""
        return tuple(p for p in self.params if p.tuned)


# Provenance of every table, and optionally of each row: who set the values, how.
PROVENANCE_FIELDS = {
    "gpu": "the GPU the values were measured on ('none' for hand-set values)",
    "date": "when (YYYY-MM-DD)",
    "method": "how they were found (e.g. 'optuna, 200 trials', 'hand-set default')",
    "gain": "measured gain over the default policy (a fraction, e.g. 0.04), or null",
}

# Provenance a tuner writes beside the required fields (optional: hand-set tables lack it).
OPTIONAL_PROVENANCE_FIELDS = {
    "cc": "compute capability of the GPU, e.g. 90",
    "driver": "CUDA driver version, e.g. '13.0'",
    "nvrtc": "NVRTC version, e.g. '13.0'",
    "tilecore": "tilecore version",
    "trials": "trials the search measured",
    "sizes": "per input size (items): bandwidth of the old and new policy in GB/s and the "
             "speedup, e.g. {16777216: {old_gbs: 2500.0, new_gbs: 2600.0, speedup: 1.04}}",
    "score": "the search's score of the new policy over the old (weighted speedup)",
}

_DTYPE_NAMES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                "float16", "bfloat16", "float32", "float64", "bool_")
_FLOAT_NAMES = ("float16", "bfloat16", "float32", "float64")
_WIDE_NAMES = ("int64", "uint64", "float64")       # 8-byte accumulators

# Tuner grid of the blocks-per-SM oversubscription fields.
_BLOCKS_PER_SM_GRID = (1, 2, 3, 4, 5, 6, 7, 8, 16, 32)


def _scan_exact(key: dict) -> bool:
    """The scan key's operator is exact (algorithms/scan.py `exact_operator`: integer
    add/mul/and/or/xor, min/max of any dtype and user operators on integers), so it
    runs `exact_mode`."""
    return key["op"] in ("min", "max") or (
        key["op"] in ("add", "mul", "and", "or", "xor", "user")
        and key["accum"] not in _FLOAT_NAMES)


def _scan_mode(key: dict, p: dict) -> int:
    """The mode a scan with this key runs (algorithms/scan.py `_plan`)."""
    return p["exact_mode"] if _scan_exact(key) else p["mode"]


def _scan_exclusive_inverse(key: dict, p: dict) -> bool:
    """exclusive_inverse changes exclusive integer add/xor scans, not by key, in
    modes 2, 3 and 4 (algorithms/scan.py `_plan`); the tuning key does not say
    inclusive or exclusive, so a workload of inclusive scans cannot observe it."""
    return (key["op"] in ("add", "xor") and key["accum"] not in _FLOAT_NAMES
            and not key["by_key"] and _scan_mode(key, p) in (2, 3, 4))


def _scan_exclusive_pairs(key: dict, p: dict) -> bool:
    """exclusive_pairs changes exclusive scans of well-known operators, not by key,
    in modes 2, 3 and 4, except those exclusive_inverse already loads unshifted
    (algorithms/scan.py `_plan`)."""
    return (key["op"] != "user" and not key["by_key"] and _scan_mode(key, p) in (2, 3, 4)
            and not (_scan_exclusive_inverse(key, p) and p["exclusive_inverse"] == 1))


def _scan_grid(key: dict, p: dict) -> bool:
    """blocks_per_sm sets the grid: of reduce-then-scan (mode 1), and of modes 2
    and 3's blocks that load ahead (load_ahead 1: algorithms/scan.py `loads_ahead`).
    (Reads load_ahead whatever the mode: the fields an `applies` reads may not
    depend on their values.)"""
    ahead = p["load_ahead"] == 1
    mode = _scan_mode(key, p)
    return mode == 1 or (mode in (2, 3) and ahead)


def _segmented_long(key: dict, p: dict) -> bool:
    """The long kernel and the rows kernel's waves serve well-known operators only
    (not 'arg', not 'user': algorithms/segmented_reduce.py, kind 'known')."""
    return key["op"] not in ("arg", "user")

REDUCE = AlgorithmSchema(
    algorithm="reduce",
    params=(
        Param("block_threads", 32, 1024, True, "threads per block of the tile kernels"),
        Param("items_per_thread", 1, 128, True,
              "input items each thread loads per tile (tile = block_threads * items_per_thread)"),
        Param("blocks_per_sm", 1, 32, False,
              "grid oversubscription: the first pass runs sm_count * blocks_per_sm blocks "
              "(fewer when there are fewer tiles)", grid=_BLOCKS_PER_SM_GRID),
        Param("single_block_max_items", 0, 1 << 24, False,
              "inputs of at most this many items run as one single-block kernel (one "
              "launch instead of two: host time the tuner, which times the device, does "
              "not see, so it keeps the current value)",
              grid=tuple(1 << e for e in range(12, 19)), tuned=False),
        Param("final_block_threads", 32, 1024, True,
              "threads of the single-block pass over the first pass's partials"),
        Param("single_block_threads", 32, 1024, True,
              "threads of the single-block kernel that reduces inputs of at most "
              "single_block_max_items items (tile = single_block_threads * "
              "items_per_thread): it runs alone on one SM, so more threads keep more "
              "loads in flight"),
    ),
    key_fields=(
        KeyField("value_size", (1, 2, 4, 8), "bytes per input item"),
        KeyField("accum", _DTYPE_NAMES, "accumulator dtype"),
        KeyField("op", ("add", "mul", "min", "max", "and", "or", "xor", "arg", "user"),
                 "operator class ('arg': arg_min/arg_max, 'user': a user function)"),
        KeyField("offset_size", (4, 8), "bytes of the item offsets (8 from 2**31 items)"),
    ),
    constraints=(
        Constraint("block_threads * items_per_thread <= 65536 (tile size; NVRTC time grows "
                   "fast past it)", lambda p: p["block_threads"] * p["items_per_thread"] <= 65536),
    ),
)

SCAN = AlgorithmSchema(
    algorithm="scan",
    params=(
        Param("block_threads", 32, 1024, True, "threads per block of the scan kernels"),
        Param("items_per_thread", 1, 64, True,
              "items each thread scans per tile (tile = block_threads * items_per_thread)"),
        Param("mode", 0, 4, False,
              "inexact operators (float add/mul, user operators): 0 single pass with a "
              "Fenwick look-back; 1 reduce-then-scan (two kernels, reads the input twice); "
              "3 single pass with a two-level look-back over aligned groups of group_tiles "
              "tiles; 4 single pass with a decoupled look-back folded left to right from "
              "the newest complete prefix (2, the decoupled look-back folding whatever it "
              "finds, is for exact operators only); all deterministic",
              # the tuner's grid leaves out mode 4: slower than 3 at every size on the
              # H200 (benchmarks/RESULTS.md, seventeenth session)
              grid=(0, 1, 3), applies=lambda key, p: not _scan_exact(key)),
        Param("exact_mode", 0, 4, False,
              "exact operators (integer add/mul/and/or/xor, min/max; by key too): the mode "
              "as above, or 2: single pass with a decoupled look-back (bit-identical "
              "results whatever it finds, since the operator is exact)",
              grid=(0, 1, 2, 3), applies=lambda key, p: _scan_exact(key)),
        Param("load_ahead", 0, 1, False,
              "modes 2 and 3: 1: a grid of at most sm_count * blocks_per_sm blocks, each taking "
              "tiles by ticket until the input ends and loading its next tile (publishing "
              "that tile's aggregate) before it looks back for the one it holds, the tile "
              "after next prefetched into L2; 0: one tile a block",
              applies=lambda key, p: _scan_mode(key, p) in (2, 3)),
        Param("blocks_per_sm", 1, 32, False,
              "reduce-then-scan: at most sm_count * blocks_per_sm blocks, each scanning a "
              "contiguous chunk of tiles; modes 2 and 3 with load_ahead 1: at most sm_count * "
              "blocks_per_sm blocks, each taking tiles until the input ends",
              grid=_BLOCKS_PER_SM_GRID, applies=_scan_grid),
        Param("lookback_window", 2, 64, True,
              "modes 2 and 4: status words each look-back step loads and folds (mode 4: "
              "at most 32 are used)",
              applies=lambda key, p: _scan_mode(key, p) in (2, 4)),
        Param("group_tiles", 2, 256, True,
              "mode 3: tiles per group (the host doubles it while the tiles make more than 256 "
              "groups)",
              applies=lambda key, p: _scan_mode(key, p) == 3),
        Param("group_sqrt", 0, 1, False,
              "mode 3: 1: groups of the fewest tiles from group_tiles up (a power of two) whose "
              "square covers the tiles, while that is at most 256: each tile loads as many "
              "groups' words as a group has tiles and checks both at once; 0: each tile "
              "loads 256 groups' words",
              applies=lambda key, p: _scan_mode(key, p) == 3),
        Param("exclusive_inverse", 0, 1, False,
              "modes 2, 3 and 4: an exclusive integer add/xor scan loads its tile unshifted "
              "(vector loads) and subtracts (xors) each item from the inclusive result, "
              "exact; it keeps items and sums live at once (2x the registers); 0: load the "
              "tile shifted by one item",
              applies=_scan_exclusive_inverse),
        Param("exclusive_pairs", 0, 2, False,
              "modes 2, 3 and 4: 1: an exclusive scan of a well-known operator (not by key) "
              "loads its tile unshifted (vector loads) and scans (inclusive, exclusive) "
              "pairs; 2: the same on the large tile only (inputs of more than "
              "small_items items); 0: load the tile shifted by one item (gathers)",
              applies=_scan_exclusive_pairs),
        Param("small_items", 0, 1 << 31, False,
              "inputs of at most this many items use small_block_threads threads per block "
              "(a smaller tile, for more tiles than SMs); 0: never",
              grid=(0,) + tuple(1 << e for e in range(16, 27, 2))),
        Param("small_block_threads", 32, 1024, True,
              "threads per block (tile = small_block_threads * items_per_thread) for inputs "
              "of at most small_items items",
              applies=lambda key, p: p["small_items"] > 0),
        Param("split_status", 0, 1, False,
              "modes 2, 3 and 4 with 8-byte accumulators: 1: each published value split over "
              "its status word (60 bits of it beside the flags) and an int32 second word (the "
              "other 4 beside the same flags), both "
              "stored and read relaxed (no fence; a reader waits for the two to carry the "
              "same flags); 0: the value in vals, published by a release store of the word "
              "and read after an acquire",
              applies=lambda key, p: (key["accum"] in _WIDE_NAMES
                                      and _scan_mode(key, p) in (2, 3, 4))),
        Param("one_launch_max_items", 0, 1 << 24, False,
              "inputs of at most this many items (not by key, not in place) run in one "
              "launch, each block folding the items before its tile itself, instead of a "
              "launch clearing status words and the scan (host time the tuner, which times "
              "the device, does not see, so it keeps the current value)",
              grid=(0,) + tuple(1 << e for e in range(12, 19)), tuned=False),
        Param("one_launch_block_threads", 32, 1024, True,
              "threads per block of the one-launch scan (inputs of at most "
              "one_launch_max_items items; hand-set with it)",
              applies=lambda key, p: p["one_launch_max_items"] > 0, tuned=False),
        Param("one_launch_items_per_thread", 1, 64, True,
              "items per thread of the one-launch scan's tile (hand-set with it)",
              applies=lambda key, p: p["one_launch_max_items"] > 0, tuned=False),
        Param("vector_width", 0, 16, True,
              "single-pass modes (0, 2, 3, 4): the kernel option vector_width of the scan "
              "kernel, the items a thread holds together (its accesses: up to 16 bytes of "
              "them); 0: the compiler's (16 bytes of the kernel's narrowest array element: "
              "4 items of 8-byte values, which sit beside int32 status words)",
              grid=(0, 2, 4, 8), applies=lambda key, p: _scan_mode(key, p) != 1),
    ),
    key_fields=(
        KeyField("value_size", (1, 2, 4, 8), "bytes per input item"),
        KeyField("accum", _DTYPE_NAMES, "accumulator dtype"),
        KeyField("op", ("add", "mul", "min", "max", "and", "or", "xor", "user"),
                 "operator class ('user': a user function)"),
        KeyField("offset_size", (4, 8), "bytes of the item offsets (8 from 2**31 items)"),
        KeyField("by_key", (False, True), "a *_by_key scan"),
        KeyField("exclusive", (False, True),
                 "an exclusive scan (exclusive_sum, exclusive_scan, their by-key forms): "
                 "a row naming it refines one for both; the tuner times one of the two "
                 "(exclusive sums, inclusive scans of other operators) and writes rows "
                 "for both", required=False),
    ),
    constraints=(
        # a thread holds its items in registers: 64K-item tiles spilled, and one took NVRTC 65 s
        # to compile (the H100 sweep of 2026-11-27), idling the GPU; the best tiles are 32K
        Constraint("block_threads * items_per_thread <= 32768 (tile size: larger tiles spill "
                   "and take NVRTC up to a minute)",
                   lambda p: p["block_threads"] * p["items_per_thread"] <= 32768),
        Constraint("mode != 2 (the decoupled look-back's result depends on what it finds: "
                   "exact operators only, through exact_mode)", lambda p: p["mode"] != 2),
        Constraint("small_block_threads * items_per_thread <= 32768",
                   lambda p: p["small_block_threads"] * p["items_per_thread"] <= 32768),
        Constraint("one_launch_block_threads * one_launch_items_per_thread <= 32768",
                   lambda p: p["one_launch_block_threads"] * p["one_launch_items_per_thread"]
                   <= 32768),
    ),
)

SCHEMAS: dict[str, AlgorithmSchema] = {"reduce": REDUCE, "scan": SCAN}

SEGMENTED_REDUCE = AlgorithmSchema(
    algorithm="segmented_reduce",
    params=(
        Param("block_threads", 32, 1024, True,
              "threads per block of the rows kernel (and of the pass over split partials)"),
        Param("rows_items_per_thread", 1, 64, True,
              "the rows kernel's tile (segments x items, several segments per block) holds "
              "block_threads * rows_items_per_thread items"),
        Param("min_row_items", 1, 4096, True,
              "the narrowest row of the rows kernel (its row width is the average segment "
              "length rounded up to a power of two, at least this, at most the tile)"),
        Param("rows_waves", 1, 64, True,
              "rows kernel, well-known operators: row groups (of block_threads * "
              "rows_items_per_thread items) each block reduces in turn, loading the next "
              "group's offsets with the current group's items; fewer while the grid would "
              "have fewer than 8 blocks per SM", applies=_segmented_long),
        Param("one_row_items_per_thread", 1, 64, True,
              "rows kernel, a block holding one segment (the average length at least the "
              "tile): its row steps through the segment block_threads * this items at a time "
              "(at most the tile, at least min_row_items)"),
        Param("long_block_threads", 32, 1024, True, "threads per block of the long kernel",
              applies=_segmented_long),
        Param("long_items_per_thread", 1, 64, True,
              "the long kernel (one block per segment, aligned tiles) loads at most "
              "long_block_threads * long_items_per_thread items per step",
              applies=_segmented_long),
        Param("long_min_items_per_thread", 1, 64, True,
              "the long kernel's tile is the average segment length rounded up to a power of "
              "two, at least long_block_threads * this (at most the largest tile)",
              applies=_segmented_long),
        Param("long_min_avg_items", 1, 1 << 30, False,
              "average segment length (input items / segments, known on the host) from which "
              "well-known operators use the long kernel instead of the rows kernel",
              grid=tuple(1 << e for e in range(6, 16)), applies=_segmented_long),
        Param("split_min_blocks_per_sm", 0, 64, False,
              "long kernel: while segments < sm_count * this, each segment is split over "
              "several blocks (partials in temporary storage, then a pass over them); 0: never",
              grid=(0, 1, 2, 4, 8, 16, 32, 64), applies=_segmented_long),
        Param("convert_offsets", 0, 2, False,
              "rows kernels with int64 offsets, d_in and the segment count below 2**30: 1 "
              "first clamps the offsets to [0, len(d_in)] into int32 arrays in the temporary "
              "storage (one pass; num_segments + 1 values when the ends are the begins "
              "shifted by one), so the rows kernel loads int32 bounds; 2: the rows kernel "
              "loads and clamps each row's int64 bounds once and broadcasts them along the "
              "row through shared memory (no temporary storage); 0: every element of "
              "the rows kernel loads and clamps its int64 bounds itself. Not tuned: the "
              "tuner's segmented workload has int32 offsets", tuned=False),
    ),
    key_fields=(
        KeyField("value_size", (1, 2, 4, 8), "bytes per input item"),
        KeyField("accum", _DTYPE_NAMES, "accumulator dtype"),
        KeyField("op", ("add", "mul", "min", "max", "and", "or", "xor", "arg", "user"),
                 "operator class ('arg': arg_min/arg_max, 'user': a user function)"),
        KeyField("offset_size", (4, 8), "bytes of the segment offsets (int32 or int64)"),
    ),
    constraints=(
        Constraint("block_threads * rows_items_per_thread <= 16384 (rows tile)",
                   lambda p: p["block_threads"] * p["rows_items_per_thread"] <= 16384),
        Constraint("long_block_threads * long_items_per_thread <= 65536 (long tile)",
                   lambda p: p["long_block_threads"] * p["long_items_per_thread"] <= 65536),
        Constraint("min_row_items <= block_threads * rows_items_per_thread",
                   lambda p: p["min_row_items"] <= p["block_threads"] * p["rows_items_per_thread"]),
    ),
)
SCHEMAS["segmented_reduce"] = SEGMENTED_REDUCE

REDUCE_BY_KEY = AlgorithmSchema(
    algorithm="reduce_by_key",
    params=(
        Param("block_threads", 32, 1024, True,
              "threads per block of rbk_heads and rbk_scatter (the multi-launch path)"),
        Param("items_per_thread", 1, 32, True, "their items per thread"),
        Param("small_max_items", 0, 1 << 24, False,
              "inputs of 1 .. this many items run one launch of rbk_small (each block "
              "recomputes what the tiles before it carry in); 0: never",
              grid=tuple(1 << e for e in range(10, 19))),
        Param("small_block_threads", 32, 1024, True, "threads per block of rbk_small"),
        Param("small_items_per_thread", 1, 64, True,
              "rbk_small's tile holds small_block_threads * small_items_per_thread items"),
    ),
    key_fields=(
        KeyField("key_size", (1, 2, 4, 8), "bytes per key"),
        KeyField("value_size", (1, 2, 4, 8), "bytes per value"),
        KeyField("accum", _DTYPE_NAMES, "accumulator dtype"),
        KeyField("op", ("add", "mul", "min", "max", "and", "or", "xor", "user"),
                 "operator class ('user': a user function)"),
    ),
    constraints=(
        Constraint("block_threads * items_per_thread <= 16384",
                   lambda p: p["block_threads"] * p["items_per_thread"] <= 16384),
        Constraint("small_block_threads * small_items_per_thread <= 16384",
                   lambda p: p["small_block_threads"] * p["small_items_per_thread"] <= 16384),
    ),
)
SCHEMAS["reduce_by_key"] = REDUCE_BY_KEY


def schema_for(algorithm: str) -> AlgorithmSchema:
    try:
        return SCHEMAS[algorithm]
    except KeyError:
        raise TuningError(f"unknown algorithm {algorithm!r}; known: {sorted(SCHEMAS)}") from None


def validate_params(algorithm: str, params: dict, where: str, lines: Optional[dict] = None,
                    complete: bool = False) -> None:
    """Check parameter names and values (and, for a complete policy, the
    constraints); TuningError naming `where` (file:line) and the field."""
    schema = schema_for(algorithm)
    for name, value in params.items():
        at = f"{where}:{lines[name]}" if lines and name in lines else where
        p = schema.param(name)
        if p is None:
            raise TuningError(f"{at}: unknown {algorithm} parameter {name!r}; known: "
                              f"{[q.name for q in schema.params]}")
        problem = p.check(value)
        if problem:
            raise TuningError(f"{at}: field {name!r}: {problem}")
    if complete:
        for c in schema.constraints:
            if not c.holds(params):
                raise TuningError(f"{where}: constraint violated: {c.doc} "
                                  f"(policy {params})")
