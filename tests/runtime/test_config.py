"""tilecore.config reads each TILECORE_* variable when asked, typed and validated."""
from pathlib import Path

import pytest

from tilecore import config


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for var in ("TILECORE_CACHE_DIR", "TILECORE_DUMP_DIR", "TILECORE_INTERPRET",
                "TILECORE_BLOCK_ORDER", "TILECORE_ARCH"):
        monkeypatch.delenv(var, raising=False)


def test_cache_dir_default_and_override(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert config.cache_dir() == tmp_path / ".cache" / "tilecore"
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path / "c"))
    assert config.cache_dir() == tmp_path / "c"
    monkeypatch.setenv("TILECORE_CACHE_DIR", "~/x")
    assert config.cache_dir() == Path(tmp_path) / "x"


@pytest.mark.parametrize("value", ["0", "off", "OFF", "", "  "])
def test_cache_dir_disabled(monkeypatch, value):
    monkeypatch.setenv("TILECORE_CACHE_DIR", value)
    assert config.cache_dir() is None


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


def test_interpret_unset_and_invalid(monkeypatch):
    assert config.interpret() is False
    monkeypatch.setenv("TILECORE_INTERPRET", "maybe")
    with pytest.raises(ValueError) as e:
        config.interpret()
    assert str(e.value) == ("Invalid value of TILECORE_INTERPRET: expected one of 1, 0, true, "
                            "false, yes, no, on, off, got 'maybe'")


@pytest.mark.parametrize("name,read", [("TILECORE_NATIVE", config.native),
                                       ("TILECORE_PDL", config.pdl)])
def test_switches_on_by_default(monkeypatch, name, read):
    monkeypatch.delenv(name, raising=False)
    assert read() is True
    monkeypatch.setenv(name, "off")
    assert read() is False
    monkeypatch.setenv(name, "fast")
    with pytest.raises(ValueError, match=f"Invalid value of {name}: .* got 'fast'"):
        read()


def test_block_order(monkeypatch):
    assert config.block_order() == "sequential"
    monkeypatch.setenv("TILECORE_BLOCK_ORDER", "Random")
    assert config.block_order() == "random"
    monkeypatch.setenv("TILECORE_BLOCK_ORDER", "reverse")
    with pytest.raises(ValueError) as e:
        config.block_order()
    assert str(e.value) == ("Invalid value of TILECORE_BLOCK_ORDER: expected 'sequential' or "
                            "'random', got 'reverse'")


def test_arch(monkeypatch):
    assert config.arch() is None
    for ok in ("sm_80", "sm_90", "sm_90a", "sm_100f", "sm_120"):
        monkeypatch.setenv("TILECORE_ARCH", ok)
        assert config.arch() == ok
    monkeypatch.setenv("TILECORE_ARCH", "90")
    with pytest.raises(ValueError) as e:
        config.arch()
    assert str(e.value) == ("Invalid value of TILECORE_ARCH: expected an architecture like "
                            "'sm_90' or 'sm_90a', got '90'")
