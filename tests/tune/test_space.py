"""space.py: the search space of each schema (tilecore/tunings/schema.py) for a
tuning key, checked against an independent brute force (every combination of
the candidates, projected by hand onto the fields that apply, constraints
checked on the complete policy) and against counts worked out by hand."""
import itertools

import pytest

from tilecore.tune.space import Dimension, SearchSpace, space_for
from tilecore.tunings.schema import schema_for

from tune_helpers import SCAN_BASE

# Fixed current policies (not read from tuning_db, which the tuner rewrites).
REDUCE_BASE = {"block_threads": 256, "items_per_thread": 16, "blocks_per_sm": 4,
               "single_block_max_items": 65536, "final_block_threads": 256,
               "single_block_threads": 1024}
SEG_BASE = {"block_threads": 128, "rows_items_per_thread": 8, "min_row_items": 32,
            "rows_waves": 1, "long_block_threads": 256, "long_items_per_thread": 32,
            "long_min_items_per_thread": 8, "long_min_avg_items": 1024,
            "split_min_blocks_per_sm": 4, "one_row_items_per_thread": 64, "convert_offsets": 1}
BASES = {"reduce": REDUCE_BASE, "scan": SCAN_BASE, "segmented_reduce": SEG_BASE}


def key(algorithm, accum="float32", op="add", value_size=4, by_key=False):
    k = {"value_size": value_size, "accum": accum, "op": op, "offset_size": 4}
    if algorithm == "scan":
        k["by_key"] = by_key
    return k


F32_ADD = "float32", "add"
I32_ADD = "int32", "add"
I32_MIN = "int32", "min"


def brute_force(algorithm, k, base, fields):
    """Every distinct valid config, found the slow way: the product of every
    field's candidates (plus the base value), each projected onto the fields
    whose `applies` holds given the fields decided before it, kept when the
    complete policy meets every constraint."""
    schema = schema_for(algorithm)
    params = [p for p in schema.params if p.tuned and p.name in fields]
    values = {p.name: sorted(set(p.candidates()) | {base[p.name]}) for p in params}
    found = set()
    for combo in itertools.product(*values.values()):
        chosen = dict(zip(values, combo))
        config = {}
        for p in params:
            if p.applies is None or p.applies(k, {**base, **config}):
                config[p.name] = chosen[p.name]
        policy = {**base, **config}
        if all(c.holds(policy) for c in schema.constraints):
            found.add(tuple(config.items()))
    return found


SMALL_SPACES = [
    ("reduce", F32_ADD, ("block_threads", "items_per_thread", "final_block_threads")),
    ("reduce", I32_MIN, ("block_threads", "items_per_thread", "single_block_max_items")),
    ("scan", F32_ADD, ("block_threads", "items_per_thread", "mode", "blocks_per_sm",
                       "group_tiles")),
    ("scan", I32_ADD, ("items_per_thread", "exact_mode", "lookback_window", "group_tiles",
                       "exclusive_inverse", "small_items", "small_block_threads")),
    ("scan", I32_MIN, ("mode", "exact_mode", "blocks_per_sm", "lookback_window",
                       "exclusive_inverse")),
    ("segmented_reduce", F32_ADD, ("block_threads", "rows_items_per_thread", "min_row_items",
                                   "long_block_threads", "long_items_per_thread")),
    ("segmented_reduce", ("float32", "arg"), ("block_threads", "rows_items_per_thread",
                                               "min_row_items", "rows_waves",
                                               "long_block_threads")),
]


@pytest.mark.parametrize("algorithm,accum_op,fields", SMALL_SPACES,
                         ids=[f"{a}-{o[0]}-{o[1]}-{len(f)}" for a, o, f in SMALL_SPACES])
def test_configs_and_size_agree_with_brute_force(algorithm, accum_op, fields):
    k = key(algorithm, *accum_op)
    base = BASES[algorithm]
    space = space_for(algorithm, k, base, fields=fields)
    listed = [tuple(c.items()) for c in space.configs()]
    want = brute_force(algorithm, k, base, fields)
    assert len(listed) == len(set(listed)), "configs() repeats a config"
    assert set(listed) == want
    assert space.size() == len(want)
    for c in listed[:: max(1, len(listed) // 50)]:
        assert space.valid(dict(c))


def test_hand_counted_sizes():
    # reduce: 6 block sizes x 8 items per thread, less 1024 x 128 (> 65536 items a tile)
    assert space_for("reduce", key("reduce"), REDUCE_BASE,
                     fields=("block_threads", "items_per_thread")).size() == 47
    # scan, float add (mode applies): mode 0 -> 1, mode 1 -> 10 blocks_per_sm values,
    # mode 3 -> 8 group_tiles values
    assert space_for("scan", key("scan"), SCAN_BASE,
                     fields=("mode", "blocks_per_sm", "group_tiles")).size() == 1 + 10 + 8
    # scan, int add (exact_mode applies): 0 -> 1, 1 -> 1, 2 -> 6 windows x 2 inverse,
    # 3 -> 8 groups x 2 inverse
    f = ("exact_mode", "lookback_window", "group_tiles", "exclusive_inverse")
    assert space_for("scan", key("scan", "int32"), SCAN_BASE, fields=f).size() == 30
    # min, or by key: exclusive_inverse never applies
    assert space_for("scan", key("scan", "int32", "min"), SCAN_BASE, fields=f).size() == 16
    assert space_for("scan", key("scan", "int32", by_key=True), SCAN_BASE,
                     fields=f).size() == 16
    # float add: exact_mode, lookback_window and exclusive_inverse never apply
    assert space_for("scan", key("scan"), SCAN_BASE, fields=f).size() == 8


def test_blocks_per_sm_applies_to_modes_2_and_3_loading_ahead():
    """blocks_per_sm sets mode 1's grid and, with load_ahead 1, modes 2 and 3's;
    load_ahead (tuned) changes nothing for modes 0, 1 and 4."""
    f = ("exact_mode", "blocks_per_sm")
    i32 = key("scan", "int32")
    # load_ahead not searched (the current policy's): exact_mode 0, 2, 3 -> 1 each,
    # 1 -> 10 blocks_per_sm values; loading ahead, 2 and 3 -> 10 too
    assert space_for("scan", i32, SCAN_BASE, fields=f).size() == 1 + 10 + 1 + 1
    assert space_for("scan", i32, dict(SCAN_BASE, load_ahead=1), fields=f).size() == 1 + 10 * 3
    # searched: modes 2 and 3 -> 1 (one tile a block) + 10 (loading ahead, each grid)
    f = ("exact_mode", "load_ahead", "blocks_per_sm")
    assert space_for("scan", i32, SCAN_BASE, fields=f).size() == 1 + 10 + 2 * (1 + 10)
    # float add: exact_mode never applies; its mode 3 loads ahead or not (mode 4: nothing)
    assert space_for("scan", key("scan"), SCAN_BASE, fields=f).size() == 1 + 10
    assert space_for("scan", key("scan", "float32", "user"), dict(SCAN_BASE, mode=4),
                     fields=f).size() == 1
    assert schema_for("scan").param("load_ahead").tuned


def test_full_reduce_space_is_listed_and_counted_alike():
    space = space_for("reduce", key("reduce"), REDUCE_BASE)
    # 6 x 8 tile shapes less one (1024 x 128), times 10 x 6 x 6 for blocks_per_sm,
    # final_block_threads and single_block_threads (single_block_max_items is not tuned:
    # a host-time trade-off)
    assert space.size() == 47 * 10 * 6 * 6
    assert sum(1 for _ in space.configs()) == space.size()


def test_full_segmented_space_counts_without_listing():
    """490 million configs: counted by a closed formula (the constraints split the
    fields into independent groups) in well under a second."""
    space = space_for("segmented_reduce", key("segmented_reduce"), SEG_BASE)
    p2 = lambda lo, hi: [1 << e for e in range(20) if lo <= 1 << e <= hi]
    rows = sum(1 for bt in p2(32, 1024) for it in p2(1, 64) if bt * it <= 16384
               for m in p2(1, 4096) if m <= bt * it)
    longs = sum(1 for bt in p2(32, 1024) for it in p2(1, 64) if bt * it <= 65536)
    per_thread = len(p2(1, 64))     # rows_waves, one_row_items_per_thread, long_min_items
    want = rows * longs * per_thread ** 3 * 10 * 8
    assert space.size() == want == 488651520
    # a well-known operator only: with 'arg' the long kernel's fields drop out
    arg = space_for("segmented_reduce", key("segmented_reduce", op="arg"), SEG_BASE)
    assert arg.size() == rows * per_thread
    assert {d.name for d in arg.dims} >= {"long_block_threads", "rows_waves"}


def test_scan_fields_that_do_not_apply_are_left_out():
    space = space_for("scan", key("scan"), SCAN_BASE,
                      fields=("mode", "blocks_per_sm", "lookback_window", "group_tiles",
                              "exact_mode", "exclusive_inverse", "small_items",
                              "small_block_threads"))
    seen_modes = set()
    for c in space.configs():
        seen_modes.add(c["mode"])
        assert "exact_mode" not in c and "lookback_window" not in c \
            and "exclusive_inverse" not in c
        assert ("blocks_per_sm" in c) == (c["mode"] == 1)
        assert ("group_tiles" in c) == (c["mode"] == 3)
        assert ("small_block_threads" in c) == (c["small_items"] > 0)
    assert seen_modes == {0, 1, 3}
    exact = space_for("scan", key("scan", "int32"), SCAN_BASE,
                      fields=("mode", "exact_mode", "lookback_window", "exclusive_inverse"))
    for c in exact.configs():
        assert "mode" not in c
        assert ("lookback_window" in c) == (c["exact_mode"] == 2)
        assert ("exclusive_inverse" in c) == (c["exact_mode"] in (2, 3))


def test_constraints_hold_for_every_config():
    for algorithm, accum_op, fields in SMALL_SPACES:
        schema = schema_for(algorithm)
        base = BASES[algorithm]
        space = space_for(algorithm, key(algorithm, *accum_op), base, fields=fields)
        for c in space.configs():
            policy = space.complete(c)
            assert policy == {**base, **c}
            for con in schema.constraints:
                assert con.holds(policy), (con.doc, policy)
    scan = space_for("scan", key("scan"), SCAN_BASE, fields=("mode",))
    assert [c["mode"] for c in scan.configs()] == [0, 1, 3]     # never 2 for inexact ops
    assert not scan.valid({"mode": 2})


def test_a_base_that_breaks_a_constraint_gives_an_empty_space():
    base = {**REDUCE_BASE, "block_threads": 1024, "items_per_thread": 128}
    space = space_for("reduce", key("reduce"), base, fields=("final_block_threads",))
    assert space.size() == 0 and list(space.configs()) == []


def test_canonical_and_project_deduplicate():
    space = space_for("scan", key("scan"), SCAN_BASE)
    a = {**SCAN_BASE, "mode": 0, "lookback_window": 4, "group_tiles": 8, "blocks_per_sm": 2}
    b = {**SCAN_BASE, "mode": 0, "lookback_window": 64, "group_tiles": 128, "exact_mode": 0}
    assert space.canonical(a) == space.canonical(b)
    assert space.project(a) == {"block_threads": 1024, "items_per_thread": 32, "mode": 0,
                                "small_items": 1 << 24, "small_block_threads": 256,
                                "vector_width": 0}
    assert "vector_width" not in space.project({**a, "mode": 1})    # reduce-then-scan's kernels
    c = {**a, "mode": 3}
    assert space.canonical(c) != space.canonical(a)
    assert space.project(c)["group_tiles"] == 8
    # a partial config takes the base's values for the fields it lacks
    assert space.project({"mode": 1}) == {"block_threads": 1024, "items_per_thread": 32,
                                          "mode": 1, "blocks_per_sm": 4,
                                          "small_items": 1 << 24, "small_block_threads": 256}
    # every listed config is its own projection, and the identities are distinct
    small = space_for("scan", key("scan"), SCAN_BASE,
                      fields=("mode", "blocks_per_sm", "group_tiles"))
    idents = [small.canonical(c) for c in small.configs()]
    assert len(set(idents)) == len(idents) == small.size()
    assert all(small.project(c) == c for c in small.configs())
    with pytest.raises(ValueError, match="unknown fields"):
        space.project({"warp_size": 32})
    with pytest.raises(ValueError, match="expected one of"):
        space.project({"block_threads": 48})


def test_exclude_include_and_base_values_become_candidates():
    base = {**REDUCE_BASE, "blocks_per_sm": 9}           # 9: not in the tuner's grid
    space = space_for("reduce", key("reduce"), base, exclude=("final_block_threads",),
                      include=[{"blocks_per_sm": 12}])
    dims = {d.name: d.values for d in space.dims}
    assert "final_block_threads" not in dims
    assert dims["blocks_per_sm"] == (1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 32)
    assert space.valid(base)
    with pytest.raises(ValueError, match="include"):
        space_for("reduce", key("reduce"), REDUCE_BASE, include=[{"block_threads": 48}])
    with pytest.raises(ValueError, match="missing"):
        space_for("reduce", {"value_size": 4}, REDUCE_BASE)
    with pytest.raises(ValueError, match="complete"):
        space_for("reduce", key("reduce"), {"block_threads": 256})


def test_neighbors_move_one_field_one_step():
    space = space_for("scan", key("scan"), SCAN_BASE,
                      fields=("block_threads", "mode", "group_tiles"))
    centre = {"block_threads": 256, "mode": 3, "group_tiles": 32}
    got = {tuple(sorted(n.items())) for n in space.neighbors(centre)}
    want = {tuple(sorted(c.items())) for c in (
        {"block_threads": 128, "mode": 3, "group_tiles": 32},
        {"block_threads": 512, "mode": 3, "group_tiles": 32},
        {"block_threads": 256, "mode": 1},                 # mode: 3 -> 1 (group_tiles drops)
        {"block_threads": 256, "mode": 3, "group_tiles": 16},
        {"block_threads": 256, "mode": 3, "group_tiles": 64})}
    assert got == want
    # from mode 1, group_tiles comes back with the base's value
    got = space.neighbors({"block_threads": 32, "mode": 1})
    assert {"block_threads": 32, "mode": 3, "group_tiles": 32} in got
    assert all(space.valid(n) for n in got)


def test_custom_space_rejects_rules_that_read_later_fields():
    dims = [Dimension("a", (1, 2)), Dimension("b", (1, 2))]
    with pytest.raises(ValueError, match="decided after"):
        SearchSpace("x", {}, dims, {"a": 1, "b": 1},
                    {"a": (lambda f: f["b"] == 1, frozenset({"b"}))})


def test_an_optional_key_field_may_be_missing_but_not_wrong():
    """A scan's `exclusive` refines rows: the tuner's key leaves it out (its rows
    then apply to inclusive and exclusive scans alike), and a value outside the
    field's is still an error naming it."""
    assert not schema_for("scan").key_field("exclusive").required
    space = space_for("scan", key("scan"), SCAN_BASE)
    assert space.valid(SCAN_BASE)
    assert space_for("scan", {**key("scan"), "exclusive": True}, SCAN_BASE).valid(SCAN_BASE)
    with pytest.raises(ValueError, match=r"'exclusive': expected one of \[False, True\], got 1"):
        space_for("scan", {**key("scan"), "exclusive": 1}, SCAN_BASE)
    with pytest.raises(ValueError, match="missing 'by_key'"):
        space_for("scan", key("reduce"), SCAN_BASE)
