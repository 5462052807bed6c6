"""tilecore.tune.report: the final table, the Markdown report and the plot,
against hand-built entries; the one-line install hint without matplotlib."""
import sys

import pytest

from tilecore.tune.output import TunedEntry
from tilecore.tune.report import (INSTALL_PLOT, markdown, require_matplotlib, results_table,
                                  write_markdown, write_plot)

pytestmark = pytest.mark.interpreter_only

F32 = {"value_size": 4, "accum": "float32", "op": "add", "offset_size": 4}
OLD = {"block_threads": 256, "items_per_thread": 16, "blocks_per_sm": 4}
ENTRIES = [
    ("reduce", TunedEntry(F32, {"block_threads": 512, "items_per_thread": 16}, OLD,
                          {1 << 24: {"old_gbs": 3000.0, "new_gbs": 3090.0, "speedup": 1.03,
                                     "noise": 0.004},
                           1 << 16: {"old_gbs": 812.5, "new_gbs": 902.0, "speedup": 1.1102,
                                     "noise": None}},
                          1.0512, 120, "tpe+polish")),
    ("scan", TunedEntry({"value_size": 4, "accum": "int32", "op": "add", "offset_size": 4,
                         "by_key": False}, {"block_threads": 1024}, {"block_threads": 1024},
                        {1000: {"old_gbs": 0.25, "new_gbs": 0.25, "speedup": 1.0,
                                "noise": 0.02}}, 1.0, 8)),
]


def test_results_table():
    assert results_table(ENTRIES).splitlines() == [
        'algorithm  key                                                          size  '
        'old GB/s  new GB/s        speedup  trials',
        '---------  ----------------------------------------------------------  -----  '
        '--------  --------  -------------  ------',
        'reduce     accum=float32,offset_size=4,op=add,value_size=4              2^16  '
        '     812       902          1.110     120',
        '                                                                        2^24  '
        '    3000      3090  1.030 ± 0.004',
        '                                                                       score  '
        '                            1.051',
        'scan       accum=int32,by_key=false,offset_size=4,op=add,value_size=4   1000  '
        '    0.25      0.25  1.000 ± 0.020       8',
        '                                                                       score  '
        '                            1.000']
    assert results_table([]) == "no results (nothing was tuned)"


META = {"gpu": "NVIDIA H100 80GB HBM3", "cc": 90, "driver": "13.0", "nvrtc": "13.5",
        "tilecore": "0.1.0", "date": "2026-12-01", "sweep": "9 min 40 s", "note": "a|b"}


def test_markdown_report(tmp_path):
    path = tmp_path / "report.md"
    write_markdown(path, ENTRIES, META)
    text = path.read_text()
    assert text == markdown(ENTRIES, META)
    assert text.splitlines() == [
        "# tilecore.tune results", "",
        "| | |", "|---|---|",
        "| gpu | NVIDIA H100 80GB HBM3 |", "| cc | 90 |", "| driver | 13.0 |",
        "| nvrtc | 13.5 |", "| tilecore | 0.1.0 |", "| date | 2026-12-01 |",
        "| sweep | 9 min 40 s |", "| note | a\\|b |",
        "", "## reduce", "",
        "### accum=float32,offset_size=4,op=add,value_size=4", "",
        "Policy: block_threads 256 → 512. Score 1.051 (+5.1%), 120 trials, tpe+polish.", "",
        "| size | old GB/s | new GB/s | speedup |", "|---:|---:|---:|---:|",
        "| 2^16 | 812 | 902 | 1.110 |",
        "| 2^24 | 3000 | 3090 | 1.030 ± 0.004 |",
        "", "## scan", "",
        "### accum=int32,by_key=false,offset_size=4,op=add,value_size=4", "",
        "Policy: unchanged (the current policy was the best found). Score 1.000 (+0.0%), "
        "8 trials.", "",
        "| size | old GB/s | new GB/s | speedup |", "|---:|---:|---:|---:|",
        "| 1000 | 0.25 | 0.25 | 1.000 ± 0.020 |"]
    assert markdown([], {"gpu": "none"}).endswith("No results: nothing was tuned.\n")


def test_without_matplotlib_plot_fails_at_once_with_one_line(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)   # import matplotlib fails
    with pytest.raises(SystemExit) as e:
        require_matplotlib()
    assert str(e.value) == INSTALL_PLOT and "\n" not in INSTALL_PLOT
    assert 'pip install "tilecore[plot]"' in INSTALL_PLOT
    with pytest.raises(SystemExit):
        write_plot(tmp_path / "p.png", ENTRIES)
    assert not (tmp_path / "p.png").exists()


def test_write_plot(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is the optional plot extra "
                                             "(pip install 'tilecore[plot]')")
    require_matplotlib()
    path = tmp_path / "speedup.png"
    write_plot(path, ENTRIES)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    write_plot(tmp_path / "empty.png", [])
    assert (tmp_path / "empty.png").read_bytes()[:4] == b"\x89PNG"
