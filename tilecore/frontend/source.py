"""Parsing a Python function's source and mapping AST nodes to `Loc`s."""
from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass, field
from typing import Any, Optional

from ..errors import Loc, TileSyntaxError

__all__ = ["ParsedFunction", "parse_function"]


@dataclass
class ParsedFunction:
    """A function's AST plus what is needed to resolve names and locations."""

    pyfunc: Any
    tree: ast.FunctionDef
    filename: str
    line_offset: int   # add to AST line numbers to get file lines
    col_offset: int    # indentation removed by dedent
    globals: dict = field(default_factory=dict)
    closure: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.pyfunc.__name__

    def loc(self, node: ast.AST, caller: Optional[Loc] = None) -> Loc:
        line = getattr(node, "lineno", self.tree.lineno) + self.line_offset
        col = getattr(node, "col_offset", 0) + self.col_offset
        end_line = getattr(node, "end_lineno", None)
        end_col = getattr(node, "end_col_offset", None)
        if end_col is not None and end_line is not None and \
                end_line + self.line_offset == line:
            end_col += self.col_offset
        else:
            end_col = None
        return Loc(self.filename, line, col, end_col, self.name, caller)


_CACHE: dict[Any, ParsedFunction] = {}


def parse_function(pyfunc: Any) -> ParsedFunction:
    """Parse `pyfunc` once (cached per code object)."""
    code = pyfunc.__code__
    cached = _CACHE.get(code)
    if cached is not None and cached.pyfunc is pyfunc:
        return cached
    try:
        lines, first = inspect.getsourcelines(pyfunc)
        filename = inspect.getsourcefile(pyfunc) or code.co_filename
    except (OSError, TypeError) as e:
        raise TileSyntaxError(f"Cannot read the source of {pyfunc.__qualname__}: {e}; tile "
                              f"functions must be defined in a file") from None
    src = "".join(lines)
    dedented = textwrap.dedent(src)
    indent = len(lines[0]) - len(lines[0].lstrip())
    tree = ast.parse(dedented)
    fdef = tree.body[0]
    if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise TileSyntaxError(f"{pyfunc.__qualname__} is not defined by a def statement")
    if isinstance(fdef, ast.AsyncFunctionDef):
        raise TileSyntaxError("async functions are not supported in tile code",
                              Loc(filename, first, indent, None, pyfunc.__name__))
    closure = {}
    if pyfunc.__closure__:
        for name, cell in zip(code.co_freevars, pyfunc.__closure__):
            try:
                closure[name] = cell.cell_contents
            except ValueError:
                pass
    parsed = ParsedFunction(pyfunc, fdef, filename, first - 1, indent,
                            pyfunc.__globals__, closure)
    _CACHE[code] = parsed
    return parsed
