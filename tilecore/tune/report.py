"""What a sweep found, for people: the final plain-text table, a Markdown
report with the environment, and a PNG plot of the speedups (matplotlib, the
optional `plot` extra: `require_matplotlib` says how to install it, and the
CLI calls it before a sweep starts).

Every function takes the results as (algorithm, TunedEntry) pairs: per size,
the bandwidth of the policy that was current (old) and of the best one found
(new), and the speedup old time / new time with its noise (the half-width of
its confidence interval); per entry, the weighted score (score.py) and the
trials measured.
"""
from __future__ import annotations

import io
from pathlib import Path
from typing import Sequence

from .output import TunedEntry, atomic_write, key_text, size_text

__all__ = ["results_table", "markdown", "write_markdown", "require_matplotlib", "write_plot",
           "INSTALL_PLOT"]

INSTALL_PLOT = ('--plot needs matplotlib, which is not installed: pip install "tilecore[plot]" '
                '(or pip install matplotlib)')

Results = Sequence[tuple[str, TunedEntry]]
_HEADER = ("algorithm", "key", "size", "old GB/s", "new GB/s", "speedup", "trials")


def _gbs(v) -> str:
    if v is None:
        return ""
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 1 else f"{v:.3g}"


def _speedup(s, noise) -> str:
    return f"{s:.3f}" if noise is None else f"{s:.3f} ± {noise:.3f}"


def _lines(entries: Results) -> list[tuple[str, ...]]:
    """The table's rows: one per size of each entry, then its weighted score;
    the algorithm, key and trials on an entry's first row only."""
    rows = []
    for algorithm, e in entries:
        first = True
        for n, m in sorted(e.sizes.items()):
            rows.append((algorithm if first else "", key_text(e.key) if first else "",
                         size_text(n), _gbs(m.get("old_gbs")), _gbs(m.get("new_gbs")),
                         _speedup(m["speedup"], m.get("noise")),
                         str(e.trials) if first else ""))
            first = False
        rows.append((algorithm if first else "", key_text(e.key) if first else "", "score",
                     "", "", f"{e.score:.3f}", str(e.trials) if first else ""))
    return rows


def results_table(entries: Results) -> str:
    """The final table of a sweep, plain text: per algorithm, key and size
    the old and new bandwidth, the speedup +- noise and the trials; each
    entry ends with its weighted score."""
    rows = _lines(entries)
    if not rows:
        return "no results (nothing was tuned)"
    widths = [max(len(r[i]) for r in (_HEADER, *rows)) for i in range(len(_HEADER))]
    left = (True, True, False, False, False, False, False)

    def fmt(r):
        return "  ".join(c.ljust(w) if lft else c.rjust(w)
                         for c, w, lft in zip(r, widths, left)).rstrip()
    return "\n".join([fmt(_HEADER), fmt(tuple("-" * w for w in widths))]
                     + [fmt(r) for r in rows])


def _md(v) -> str:
    return str(v).replace("|", "\\|")


def _changes(e: TunedEntry) -> str:
    changed = [f"{k} {e.old_params.get(k, '?')} → {v}" for k, v in e.params.items()
               if e.old_params.get(k) != v]
    return ", ".join(changed) if changed else "unchanged (the current policy was the best found)"


def markdown(entries: Results, meta: dict) -> str:
    """The Markdown report (see `write_markdown`)."""
    out = ["# tilecore.tune results", "", "| | |", "|---|---|"]
    out += [f"| {_md(k)} | {_md('' if v is None else v)} |" for k, v in meta.items()]
    if not entries:
        return "\n".join(out + ["", "No results: nothing was tuned.", ""])
    algorithm = None
    for algo, e in entries:
        if algo != algorithm:
            out += ["", f"## {algo}"]
            algorithm = algo
        gain = (e.score - 1) * 100
        out += ["", f"### {_md(key_text(e.key))}", "",
                f"Policy: {_md(_changes(e))}. Score {e.score:.3f} ({gain:+.1f}%), "
                f"{e.trials} trials{', ' + e.strategy if e.strategy else ''}.", "",
                "| size | old GB/s | new GB/s | speedup |", "|---:|---:|---:|---:|"]
        out += [f"| {size_text(n)} | {_gbs(m.get('old_gbs'))} | {_gbs(m.get('new_gbs'))} | "
                f"{_speedup(m['speedup'], m.get('noise'))} |" for n, m in sorted(e.sizes.items())]
    return "\n".join(out) + "\n"


def write_markdown(path: Path, entries: Results, meta: dict) -> None:
    """Write the Markdown report: a table of `meta` (the environment,
    `output.environment_provenance`, and what the caller adds: sweep time,
    GPU-busy fraction, ...), then per algorithm and key the policy's changed
    fields (old -> new), the score and trials, and the per-size table."""
    atomic_write(Path(path), markdown(entries, meta).encode("utf-8"))


def require_matplotlib() -> None:
    """Raise SystemExit with one line saying how to install matplotlib when it
    is missing (the CLI calls this before a sweep when --plot is given)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise SystemExit(INSTALL_PLOT) from None


def write_plot(path: Path, entries: Results) -> None:
    """A PNG of the speedup over the current policy per size (log2 axis), one
    panel per algorithm, one line per key with the noise as error bars, and a
    line at 1 (no change). Uses matplotlib's Agg canvas directly (no pyplot,
    no global backend change); SystemExit as `require_matplotlib` without it."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    algorithms = list(dict.fromkeys(a for a, _ in entries)) or ["(no results)"]
    fig = Figure(figsize=(8, 3.2 * len(algorithms)), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(algorithms), 1, squeeze=False)[:, 0]
    for ax, algorithm in zip(axes, algorithms):
        for algo, e in entries:
            if algo != algorithm or not e.sizes:
                continue
            sizes = sorted(e.sizes)
            noise = [e.sizes[n].get("noise") or 0.0 for n in sizes]
            ax.errorbar(sizes, [e.sizes[n]["speedup"] for n in sizes], yerr=noise,
                        marker="o", capsize=3, label=key_text(e.key))
        ax.axhline(1.0, color="gray", linewidth=0.8, linestyle="--")
        ax.set_xscale("log", base=2)
        ax.set_title(algorithm)
        ax.set_xlabel("input size (items)")
        ax.set_ylabel("speedup over the current policy")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    atomic_write(Path(path), buf.getvalue())
