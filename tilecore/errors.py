"""Source locations and the TileError hierarchy.

Every IR node carries a `Loc`; errors raised while compiling a kernel show a
traceback-style frame (file, line, column range, function, source line with
carets, and the chain of inlined calls) after a message that says what was
expected and what was found.
"""
from __future__ import annotations

import linecache
from dataclasses import dataclass
from typing import Optional

__all__ = ["Loc", "TileError", "TileSyntaxError", "TileTypeError", "TileValueError",
           "TileCompileError", "TileLaunchError", "TileRuntimeError", "register_source",
           "source_line", "OutOfBoundsTileWarning"]

# The lines tile code was compiled from, per file (the front end captures a
# kernel's source at import; the file may have been edited since).
_SOURCES: dict[str, list[str]] = {}


def register_source(filename: str, lines: list[str]) -> None:
    """Show `lines` as the text of `filename` in error frames."""
    _SOURCES[filename] = lines


def source_line(filename: str, line: int) -> str:
    """Line `line` (1-based) of `filename` as tile code was compiled from it."""
    lines = _SOURCES.get(filename)
    if lines is None:
        return linecache.getline(filename, line)
    return lines[line - 1] if 1 <= line <= len(lines) else ""


@dataclass(frozen=True)
class Loc:
    """A position in kernel source: file, 1-based line, 0-based columns."""

    filename: str
    line: int
    col: int
    end_col: Optional[int] = None
    function: str = "<kernel>"
    caller: Optional["Loc"] = None  # call site when this code was inlined

    def __str__(self) -> str:
        return f"{self.filename}:{self.line}:{self.col + 1}"

    def frame(self) -> str:
        """Traceback-style rendering with the source line and carets."""
        parts = []
        loc: Optional[Loc] = self
        chain = []
        while loc is not None:
            chain.append(loc)
            loc = loc.caller
        for loc in reversed(chain):
            parts.append(f'  File "{loc.filename}", line {loc.line}, '
                         f'col {loc.col + 1}, in {loc.function}:')
            src = source_line(loc.filename, loc.line).rstrip("\n")
            if src:
                stripped = src.lstrip()
                indent = len(src) - len(stripped)
                parts.append("    " + stripped)
                end = loc.end_col if loc.end_col and loc.end_col > loc.col else loc.col + 1
                start = max(loc.col - indent, 0)
                parts.append("    " + " " * start + "^" * max(end - loc.col, 1))
        return "\n".join(parts)


class TileError(Exception):
    """Base of all errors about tile code; `loc` points into the kernel."""

    def __init__(self, message: str, loc: Optional[Loc] = None):
        self.message = message
        self.loc = loc
        super().__init__(message, loc)

    def __str__(self) -> str:
        if self.loc is None:
            return self.message
        return f"{self.message}\n{self.loc.frame()}"

    def __reduce__(self):
        return (type(self), (self.message, self.loc))


class TileSyntaxError(TileError, SyntaxError):
    """Python syntax outside the tile-language subset."""

    def __init__(self, message: str, loc: Optional[Loc] = None):
        # SyntaxError.__init__ wants (msg, (filename, lineno, offset, text)), not a Loc.
        if loc is None:
            SyntaxError.__init__(self, message)
        else:
            text = source_line(loc.filename, loc.line) or None
            SyntaxError.__init__(self, message, (loc.filename, loc.line, loc.col + 1, text))
        self.message = message
        self.loc = loc

    def __str__(self) -> str:  # SyntaxError overrides __str__; keep ours
        return TileError.__str__(self)


class TileTypeError(TileError, TypeError):
    """Wrong dtype, shape, argument kind, or failed promotion."""


class TileValueError(TileError, ValueError):
    """A value out of its allowed range (shape not a power of two, bad axis, ...)."""


class TileCompileError(TileError, RuntimeError):
    """The backend compiler (NVRTC) rejected the generated code."""


class TileLaunchError(TileError, RuntimeError):
    """A launch was refused or failed on the device."""


class TileRuntimeError(TileError, RuntimeError):
    """A kernel failed while running (e.g. in the interpreter, a tile fully out of bounds)."""


class OutOfBoundsTileWarning(RuntimeWarning):
    """Strict bounds mode (TILECORE_STRICT_BOUNDS=1): a load or store addressed a
    tile wholly outside its array (legal: the load pads, the store drops)."""
