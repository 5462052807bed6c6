"""Policy selection (dispatch), tuning tables (tunings): schema validation
with file/line/field errors, lookup fallbacks, the user directory."""
import textwrap

import pytest

from tilecore.dispatch import chained, override_policy, parse_arch
from tilecore.dispatch.reduce_policy import select_reduce_policy
from tilecore.tunings import (TUNING_DIR_ENV, TuningError, clear_cache, find_table, parse_table,
                              schema_for, table_dirs)

KEY4 = {"value_size": 4, "accum": "float32", "op": "add", "offset_size": 4}
KEY1 = {"value_size": 1, "accum": "int32", "op": "add", "offset_size": 4}
ARG4 = {"value_size": 4, "accum": "float32", "op": "arg", "offset_size": 4}

PROV = "provenance: {gpu: test, date: '2026-01-01', method: hand-set, gain: null}"


@pytest.fixture
def tuning_dir(tmp_path, monkeypatch):
    """An empty user tuning directory (tables written into it override the shipped ones)."""
    monkeypatch.setenv(TUNING_DIR_ENV, str(tmp_path))
    clear_cache()
    yield tmp_path
    clear_cache()


def write(d, arch, body):
    (d / "reduce").mkdir(exist_ok=True)
    path = d / "reduce" / f"{arch}.yaml"
    path.write_text(f"schema: 1\nalgorithm: reduce\narch: {arch}\n" + textwrap.dedent(body))
    return path


def test_chained_picks_newest_not_newer_than_device():
    chain = [(70, lambda: "a"), (80, lambda: "b"), (90, lambda: "c")]
    assert [chained(cc, chain) for cc in (60, 70, 75, 80, 86, 89, 90, 100, 120)] == \
        ["a", "a", "a", "b", "b", "b", "c", "c", "c"]
    assert parse_arch("sm_90a") == 90 and parse_arch("sm_120") == 120
    with pytest.raises(ValueError):
        parse_arch("90")


def test_shipped_tables_are_found_and_valid():
    assert any(d.name == "tuning_db" for d in table_dirs())
    for cc in (80, 90):
        t = find_table("reduce", cc)
        assert t is not None and t.provenance["gain"] is None
        assert "not yet tuned" in t.provenance["method"]


@pytest.mark.parametrize("cc, expect", [
    (70, "built-in"), (75, "built-in"), (80, "sm_80.yaml"), (86, "sm_80.yaml"),
    (89, "sm_80.yaml"), (90, "sm_90.yaml"), (100, "sm_90.yaml"), (120, "sm_90.yaml")])
def test_selection_per_architecture(cc, expect):
    p = select_reduce_policy(cc, KEY4)
    assert expect in p.source
    assert p.tile_items == p.block_threads * p.items_per_thread
    assert p.items_per_thread == (8 if cc < 80 else 16)   # built-in sm_70: 32 bytes per thread


def test_rows_refine_by_key_most_specific_wins():
    one_byte = select_reduce_policy(90, KEY1)                          # {value_size: 1}
    assert (one_byte.items_per_thread, one_byte.blocks_per_sm) == (16, 5)
    assert select_reduce_policy(90, {**KEY1, "value_size": 2, "accum": "float32"}
                                ).items_per_thread == 32               # {value_size: 2}
    assert select_reduce_policy(90, ARG4).items_per_thread == 16       # {op: arg, value_size: 4}
    assert select_reduce_policy(90, {**KEY4, "value_size": 8}).items_per_thread == 8


def test_fallbacks_row_default_previous_arch(tuning_dir):
    write(tuning_dir, "sm_90", f"""
        {PROV}
        default: {{blocks_per_sm: 7}}
        tunings:
          - match: {{value_size: 1}}
            params: {{items_per_thread: 4}}
        """)
    write(tuning_dir, "sm_100", f"""
        {PROV}
        tunings:
          - match: {{value_size: 2}}
            params: {{items_per_thread: 2}}
        """)
    p = select_reduce_policy(90, KEY1)                 # exact row over the table's default
    assert (p.items_per_thread, p.blocks_per_sm) == (4, 7) and "sm_90.yaml:" in p.source
    p = select_reduce_policy(90, KEY4)                 # no row: the architecture's default
    assert p.blocks_per_sm == 7 and "(default)" in p.source
    p = select_reduce_policy(100, {**KEY4, "value_size": 2})
    assert p.items_per_thread == 2 and "sm_100.yaml" in p.source
    p = select_reduce_policy(100, KEY4)                # sm_100 has no row, no default: sm_90's
    assert p.blocks_per_sm == 7 and "sm_90.yaml" in p.source
    p = select_reduce_policy(80, KEY4)                 # the user dir has no sm_80: shipped one
    assert "tuning_db" in p.source and "sm_80.yaml" in p.source


def test_a_table_for_an_architecture_outside_the_chain(tuning_dir):
    """A table the tuner wrote on an sm_86 GPU is that GPU's (before sm_80's);
    sm_87 and sm_89 still fall back along the chain to sm_80."""
    write(tuning_dir, "sm_86", f"""
        {PROV}
        default: {{blocks_per_sm: 5}}
        """)
    p = select_reduce_policy(86, KEY4)
    assert p.blocks_per_sm == 5 and "sm_86.yaml" in p.source
    for cc in (87, 89):
        p = select_reduce_policy(cc, KEY4)
        assert p.blocks_per_sm != 5 and "sm_80.yaml" in p.source


def test_override_policy_wins_and_is_validated():
    with override_policy("reduce", block_threads=64, items_per_thread=4):
        p = select_reduce_policy(90, KEY4)
        assert (p.tile_items, p.source) == (256, "override_policy()")
    assert select_reduce_policy(90, KEY4).block_threads == 256
    with pytest.raises(TuningError, match=r"override_policy\(\): field 'block_threads': "
                                          r"expected a power of two in 32..1024, got 100"):
        with override_policy("reduce", block_threads=100):
            pass
    with pytest.raises(TuningError, match="unknown reduce parameter 'threads'"):
        with override_policy("reduce", threads=64):
            pass
    with pytest.raises(TuningError,
                       match=r"constraint violated: block_threads \* items_per_thread"):
        with override_policy("reduce", block_threads=1024, items_per_thread=128):
            select_reduce_policy(90, KEY4)


BAD = [
    ("default: {block_threads: 300}\n", 5, "field 'block_threads': expected a power of two"),
    ("default: {block_threads: 256, warp_size: 3}\n", 5, "unknown reduce parameter 'warp_size'"),
    ("tunings:\n  - match: {value_size: 3}\n    params: {items_per_thread: 2}\n", 6,
     "field match.value_size: expected one of [1, 2, 4, 8], got 3"),
    ("tunings:\n  - match: {value_size: true}\n    params: {items_per_thread: 2}\n", 6,
     "field match.value_size: expected one of [1, 2, 4, 8], got True"),   # not 1: a bool
    ("tunings:\n  - match: {dtype: float32}\n    params: {items_per_thread: 2}\n", 6,
     "field match.dtype: unknown tuning-key field"),
    ("tunings:\n  - match: {op: add}\n    params: {items_per_thread: 0}\n", 7,
     "field 'items_per_thread': expected a value in 1..128, got 0"),
    ("tunings:\n  - match: {op: add}\n", 6, "tunings[0] needs 'match' and 'params'"),
    ("colour: blue\n", 5, "unknown field 'colour'"),
    ("default: [1, 2\n", 6, "not valid YAML"),
]


@pytest.mark.parametrize("extra, line, message", BAD)
def test_validation_errors_name_file_line_field(extra, line, message):
    text = f"schema: 1\nalgorithm: reduce\narch: sm_90\n{PROV}\n{extra}"
    with pytest.raises(TuningError) as e:
        parse_table(text, "t/sm_90.yaml", "reduce", 90)
    assert str(e.value).startswith(f"t/sm_90.yaml:{line}:"), str(e.value)
    assert message in str(e.value)


def test_scan_load_ahead_is_validated_with_file_line_field():
    base = f"schema: 1\nalgorithm: scan\narch: sm_90\n{PROV}\n"
    table = parse_table(base + "tunings:\n  - match: {op: add}\n    params: {load_ahead: 1}\n",
                        "t/sm_90.yaml", "scan", 90)
    assert table is not None
    for value, problem in ((2, "expected a value in 0..1, got 2"),
                           ("true", "expected an integer, got True")):
        with pytest.raises(TuningError) as e:
            parse_table(base + f"default: {{load_ahead: {value}}}\n", "t/sm_90.yaml", "scan", 90)
        assert str(e.value).startswith("t/sm_90.yaml:5:"), str(e.value)
        assert f"field 'load_ahead': {problem}" in str(e.value)


def test_provenance_required_and_checked():
    base = "schema: 1\nalgorithm: reduce\narch: sm_90\n"
    with pytest.raises(TuningError, match="field 'provenance' is missing"):
        parse_table(base, "x.yaml", "reduce", 90)
    with pytest.raises(TuningError, match=r"x.yaml:4: field 'provenance': missing \['gain'\]"):
        parse_table(base + "provenance: {gpu: a, date: b, method: c}\n", "x.yaml", "reduce", 90)
    with pytest.raises(TuningError, match="provenance.gain: expected a number or null"):
        parse_table(base + "provenance: {gpu: a, date: b, method: c, gain: lots}\n", "x.yaml",
                    "reduce", 90)
    with pytest.raises(TuningError, match="field 'arch': expected 'sm_80'"):
        parse_table(base + PROV, "x.yaml", "reduce", 80)


def test_invalid_user_table_is_an_error_naming_it(tuning_dir):
    path = write(tuning_dir, "sm_90", f"{PROV}\ndefault: {{blocks_per_sm: 0}}\n")
    with pytest.raises(TuningError, match=rf"{path}:5: field 'blocks_per_sm'"):
        select_reduce_policy(90, KEY4)


def test_schema_is_the_tuners_search_space():
    s = schema_for("reduce")
    assert [p.name for p in s.params][:2] == ["block_threads", "items_per_thread"]
    assert s.param("block_threads").candidates() == [32, 64, 128, 256, 512, 1024]
    assert s.param("blocks_per_sm").candidates()[:3] == [1, 2, 3]
    assert {k.name for k in s.key_fields} == {"value_size", "accum", "op", "offset_size"}


def test_reduce_by_key_policy_hub(tuning_dir):
    """reduce_by_key's hub: the built-in policy from sm_70 on (user operators
    on their own small tile), a user table's row by operator class and the
    previous architecture's table, override_policy, and the schema's checks."""
    from tilecore.dispatch.reduce_by_key_policy import select_reduce_by_key_policy
    key = {"key_size": 4, "value_size": 4, "accum": "float32", "op": "add"}
    user = dict(key, op="user")
    for cc in (70, 80, 90, 120):
        p = select_reduce_by_key_policy(cc, key)
        assert (p.small_max_items, p.small_tile, p.source) == (1 << 16, 4096, "built-in")
        assert (p.small_block_threads, p.small_items_per_thread) == (512, 8)
        q = select_reduce_by_key_policy(cc, user)
        assert (q.small_block_threads, q.small_items_per_thread) == (256, 16)
    (tuning_dir / "reduce_by_key").mkdir()
    (tuning_dir / "reduce_by_key" / "sm_80.yaml").write_text(
        f"schema: 1\nalgorithm: reduce_by_key\narch: sm_80\n{PROV}\n"
        "tunings:\n  - match: {op: user, value_size: 4}\n    params: {small_max_items: 8192}\n")
    clear_cache()
    assert select_reduce_by_key_policy(90, user).small_max_items == 8192     # sm_80's table
    assert select_reduce_by_key_policy(90, key).small_max_items == 1 << 16   # no row: built-in
    assert select_reduce_by_key_policy(75, user).small_max_items == 1 << 16  # sm_70: none
    with override_policy("reduce_by_key", small_max_items=0):
        p = select_reduce_by_key_policy(90, key)
        assert (p.small_max_items, p.source) == (0, "override_policy()")
    with pytest.raises(TuningError, match="constraint violated: small_block_threads"):
        with override_policy("reduce_by_key", small_block_threads=1024,
                             small_items_per_thread=32):
            select_reduce_by_key_policy(90, key)
    with pytest.raises(TuningError, match="unknown reduce_by_key parameter 'threads'"):
        with override_policy("reduce_by_key", threads=64):
            pass


def test_a_scan_row_naming_exclusive_refines_one_for_both(tuning_dir):
    """`exclusive` (a scan's optional key field): the row naming it wins for
    exclusive scans, the row without it stands for inclusive ones; a value that
    is not a bool is an error naming file, line and field."""
    from tilecore.dispatch.scan_policy import select_scan_policy
    (tuning_dir / "scan").mkdir()
    body = f"""\
        schema: 1
        algorithm: scan
        arch: sm_90
        {PROV}
        tunings:
          - match: {{value_size: 8, op: user}}
            params: {{vector_width: 4}}
          - match: {{value_size: 8, op: user, exclusive: true}}
            params: {{vector_width: 2}}
        """
    path = tuning_dir / "scan" / "sm_90.yaml"
    path.write_text(textwrap.dedent(body))
    key = dict(value_size=8, accum="int64", op="user", offset_size=4, by_key=False)
    assert select_scan_policy(90, {**key, "exclusive": False}).vector_width == 4
    assert select_scan_policy(90, {**key, "exclusive": True}).vector_width == 2
    assert select_scan_policy(90, key).vector_width == 4         # a key without it
    path.write_text(textwrap.dedent(body).replace("exclusive: true", "exclusive: 1"))
    clear_cache()
    with pytest.raises(TuningError, match=r"sm_90.yaml:8: field match.exclusive: expected one "
                                          r"of \[False, True\], got 1"):
        select_scan_policy(90, key)
