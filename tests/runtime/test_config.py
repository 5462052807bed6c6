"""tilecore.config reads each TILECORE_* variable when asked, typed and
validated in one message format; every entry point validates them all."""
import warnings
from pathlib import Path

import numpy as np
import pytest

import tilecore as ct
from tilecore import config

ALL_VARS = ("TILECORE_CACHE_DIR", "TILECORE_DUMP_DIR", "TILECORE_INTERPRET",
            "TILECORE_BLOCK_ORDER", "TILECORE_ARCH", "TILECORE_NATIVE", "TILECORE_PDL",
            "TILECORE_STRICT_BOUNDS", "TILECORE_TUNING_DIR")
SWITCHES = "one of 1, 0, true, false, yes, no, on, off"
# (variable, a junk value, the accepted values as the message states them)
JUNK = [("TILECORE_INTERPRET", "maybe", SWITCHES), ("TILECORE_NATIVE", "fast", SWITCHES),
        ("TILECORE_PDL", "2", SWITCHES), ("TILECORE_STRICT_BOUNDS", "strict", SWITCHES),
        ("TILECORE_BLOCK_ORDER", "reverse", "'sequential' or 'random'"),
        ("TILECORE_ARCH", "90", "an architecture like 'sm_90' or 'sm_90a'")]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for var in ALL_VARS:
        monkeypatch.delenv(var, raising=False)


def test_cache_dir_default_and_override(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert config.cache_dir() == tmp_path / ".cache" / "tilecore"
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path / "c"))
    assert config.cache_dir() == tmp_path / "c"
    monkeypatch.setenv("TILECORE_CACHE_DIR", "~/x")
    assert config.cache_dir() == Path(tmp_path) / "x"


@pytest.mark.parametrize("value", ["0", "off", "OFF", "false", "False", "no", "", "  "])
def test_cache_dir_disabled(monkeypatch, value):
    monkeypatch.setenv("TILECORE_CACHE_DIR", value)
    assert config.cache_dir() is None


@pytest.mark.parametrize("value", ["1", "on", "TRUE", "yes"])
def test_cache_dir_on_words_mean_the_default(monkeypatch, tmp_path, value):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("TILECORE_CACHE_DIR", value)
    assert config.cache_dir() == tmp_path / ".cache" / "tilecore"


def test_dump_dir(monkeypatch, tmp_path):
    assert config.dump_dir() is None
    monkeypatch.setenv("TILECORE_DUMP_DIR", "")
    assert config.dump_dir() is None
    monkeypatch.setenv("TILECORE_DUMP_DIR", str(tmp_path))
    assert config.dump_dir() == tmp_path


@pytest.mark.parametrize("value,expected", [("1", True), ("true", True), ("ON", True),
                                            ("0", False), ("", False), ("no", False)])
def test_interpret(monkeypatch, value, expected):
    monkeypatch.setenv("TILECORE_INTERPRET", value)
    assert config.interpret() is expected


def test_interpret_unset():
    assert config.interpret() is False


@pytest.mark.parametrize("name,read", [("TILECORE_NATIVE", config.native),
                                       ("TILECORE_PDL", config.pdl)])
def test_switches_on_by_default(monkeypatch, name, read):
    monkeypatch.delenv(name, raising=False)
    assert read() is True
    monkeypatch.setenv(name, "off")
    assert read() is False


def test_strict_bounds_off_by_default(monkeypatch):
    assert config.strict_bounds() is False
    monkeypatch.setenv("TILECORE_STRICT_BOUNDS", "1")
    assert config.strict_bounds() is True


READERS = {"TILECORE_INTERPRET": config.interpret, "TILECORE_NATIVE": config.native,
           "TILECORE_PDL": config.pdl, "TILECORE_STRICT_BOUNDS": config.strict_bounds,
           "TILECORE_BLOCK_ORDER": config.block_order, "TILECORE_ARCH": config.arch}


@pytest.mark.parametrize("name,junk,accepted", JUNK)
def test_junk_values_raise_one_message_format(monkeypatch, name, junk, accepted):
    """Each reader and validate_environment alike."""
    monkeypatch.setenv(name, junk)
    expected = f"Invalid value of {name}: expected {accepted}, got {junk!r}"
    for check in (READERS[name], config.validate_environment):
        with pytest.raises(ValueError) as e:
            check()
        assert str(e.value) == expected


def test_block_order(monkeypatch):
    assert config.block_order() == "sequential"
    monkeypatch.setenv("TILECORE_BLOCK_ORDER", "Random")
    assert config.block_order() == "random"


def test_arch(monkeypatch):
    assert config.arch() is None
    for ok in ("sm_80", "sm_90", "sm_90a", "sm_100f", "sm_120"):
        monkeypatch.setenv("TILECORE_ARCH", ok)
        assert config.arch() == ok


def test_invalid_value_shows_the_raw_value_and_a_reason(monkeypatch):
    monkeypatch.setenv("TILECORE_DUMP_DIR", " /x ")
    assert str(config.invalid_value("TILECORE_DUMP_DIR", "a directory", "Not a directory")) == \
        "Invalid value of TILECORE_DUMP_DIR: expected a directory, got ' /x ' (Not a directory)"


@pytest.fixture
def fresh_memo(monkeypatch):
    """validate_environment as in a new process: nothing validated or warned yet."""
    monkeypatch.setattr(config, "_valid_values", None)
    monkeypatch.setattr(config, "_warned_names", set())


def test_validate_environment_is_memoized_on_the_raw_values(monkeypatch, fresh_memo):
    calls = []
    monkeypatch.setitem(config._CHECKED, "TILECORE_PDL", lambda: calls.append(1))
    config.validate_environment()
    config.validate_environment()
    assert len(calls) == 1
    monkeypatch.setenv("TILECORE_PDL", "0")                        # a change: checked again
    config.validate_environment()
    config.validate_environment()
    assert len(calls) == 2
    monkeypatch.setenv("TILECORE_ARCH", "sm90")                    # an invalid value is never
    for _ in range(2):                                             # remembered as valid
        with pytest.raises(ValueError, match="TILECORE_ARCH"):
            config.validate_environment()
    assert len(calls) == 4


@pytest.mark.parametrize("typo,meant", [("TILECORE_INTERPET", "TILECORE_INTERPRET"),
                                        ("TILECORE_CACHE", "TILECORE_CACHE_DIR"),
                                        ("tilecore_pdl", "TILECORE_PDL"),
                                        ("TILECORE_ARCHS", "TILECORE_ARCH")])
def test_likely_typos_warn_once(monkeypatch, fresh_memo, typo, meant):
    monkeypatch.setenv(typo, "1")
    with pytest.warns(RuntimeWarning) as record:
        config.validate_environment()
        monkeypatch.setenv("TILECORE_PDL", "1")                    # re-validated, not re-warned
        config.validate_environment()
    assert [str(w.message) for w in record] == \
        [f"Unknown environment variable {typo} is ignored; did you mean {meant}?"]


def test_unrelated_tilecore_names_are_left_alone(monkeypatch, fresh_memo):
    monkeypatch.setenv("TILECORE_HOME_OF_MY_SCRIPTS", "/opt")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        config.validate_environment()


@ct.kernel
def _copy(x, y, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    ct.store(y, index=(bid,), tile=ct.load(x, index=(bid,), shape=(TILE,)))


@pytest.mark.parametrize("name,junk,accepted", JUNK)
def test_entry_points_report_every_junk_value(monkeypatch, name, junk, accepted):
    """The interpreter reads none of TILECORE_ARCH/NATIVE/PDL and compile none
    of INTERPRET/BLOCK_ORDER/STRICT_BOUNDS: each is reported all the same."""
    x = np.arange(64, dtype=np.float32)
    y = np.zeros_like(x)
    monkeypatch.setenv(name, junk)
    message = f"Invalid value of {name}: expected {accepted}, got {junk!r}"
    with pytest.raises(ValueError) as e:
        ct.launch(None, (2,), _copy, (x, y, 32))
    assert str(e.value) == message and not y.any()
    with pytest.raises(ValueError) as e:
        ct.compile(_copy, (x, y, 32), arch="sm_80")
    assert str(e.value) == message
    monkeypatch.delenv(name)
    ct.launch(None, (2,), _copy, (x, y, 32))
    np.testing.assert_array_equal(y, x)


def test_tuning_dir(monkeypatch, tmp_path):
    assert config.tuning_dir() is None
    monkeypatch.setenv("TILECORE_TUNING_DIR", "")
    assert config.tuning_dir() is None
    monkeypatch.setenv("TILECORE_TUNING_DIR", str(tmp_path))
    assert config.tuning_dir() == tmp_path
    expected = "a directory of tuning tables \\(<algorithm>/sm_XY.yaml\\)"
    for value, reason in ((tmp_path / "missing", "no such directory"),
                          (tmp_path / "file.yaml", "it is not a directory")):
        if value.name == "file.yaml":
            value.write_text("")
        monkeypatch.setenv("TILECORE_TUNING_DIR", str(value))
        message = f"Invalid value of TILECORE_TUNING_DIR: expected {expected}, got .*{reason}"
        with pytest.raises(ValueError, match=message):
            config.tuning_dir()
        with pytest.raises(ValueError, match=message):  # every entry point validates it
            config.validate_environment()
