"""A Python function's source, as it was when the function was imported, parsed,
with AST nodes mapped to `Loc`s.

Python compiles a module when it imports it; tilecore compiles tile code from
its source text, later, at the first launch. So that the kernel that runs is
the function the user imported even if its file was edited since, the text
is captured early:

- `capture` runs when `@kernel` / `@function` decorate a function, that is
  while its module is being imported: it keeps the lines of the function's
  file. A decorated function is always compiled from those lines.
- An undecorated function called from tile code (a helper) is compiled from
  the lines of its file captured last by a decorator in that file, else from
  the file as it is at its first use. Either text, compiled as the import
  compiled it, must give the function's own bytecode at the function's line
  (checked when its module came from the standard source loader: import
  hooks such as pytest's rewrite code): a file edited since the import is a
  `TileSyntaxError`, never silently different code.

The lines that a function was compiled from are also the ones error messages
show (`errors.register_source`).
"""
from __future__ import annotations

import ast
import importlib.machinery
import inspect
import linecache
import os
import re
import sys
import textwrap
import tokenize
import types
from dataclasses import dataclass, field, replace
from typing import Any, Optional

from ..errors import Loc, TileSyntaxError, register_source

__all__ = ["ParsedFunction", "parse_function", "capture"]


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


# Keyed by id(code object): code objects compare equal across files when their
# text and lines are; each value keeps its code object alive, so no id is reused.
_CACHE: dict[int, ParsedFunction] = {}
# A file -> (the execution of its module that a tile decorator last ran in: the
# module's spec, or its globals without one; the file's lines at that decorator's
# first run in that execution, normally while the module was imported).
_FILE_LINES: dict[str, tuple[Any, list[str]]] = {}
# The lines of its file when each decorated function was decorated.
_CAPTURED: dict[int, tuple[types.CodeType, list[str]]] = {}


def _filename(pyfunc: Any) -> str:
    try:
        return inspect.getsourcefile(pyfunc) or pyfunc.__code__.co_filename
    except TypeError:
        return pyfunc.__code__.co_filename


def _current_lines(pyfunc: Any, filename: str) -> list[str]:
    """The file's lines now. A file on disk is read afresh (linecache would keep
    stale lines after a rewrite of the same size within its mtime's resolution);
    other sources (an IPython cell, a zip archive) come from linecache."""
    if os.path.isfile(filename):
        try:
            with tokenize.open(filename) as f:   # decoded as Python decodes source
                lines = f.readlines()
        except (OSError, SyntaxError, UnicodeDecodeError):
            lines = []
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        if lines:
            return lines
    linecache.checkcache(filename)
    return linecache.getlines(filename, pyfunc.__globals__)


def capture(pyfunc: Any) -> None:
    """Keep the lines of `pyfunc`'s file as they are now (the decorators call
    this while the function's module is imported). A function whose source
    cannot be read is not an error here: its first compilation says so."""
    if not isinstance(pyfunc, types.FunctionType):
        return
    filename = _filename(pyfunc)
    execution = pyfunc.__globals__.get("__spec__") or pyfunc.__globals__
    known = _FILE_LINES.get(filename)
    if known is not None and known[0] is execution:
        lines = known[1]   # read when this execution of the module decorated its first function
    else:
        lines = _current_lines(pyfunc, filename)
        if not lines:
            return
        _FILE_LINES[filename] = (execution, lines)
    _CAPTURED[id(pyfunc.__code__)] = (pyfunc.__code__, lines)


def parse_function(pyfunc: Any) -> ParsedFunction:
    """Parse `pyfunc` from its captured source (cached per code object)."""
    code = pyfunc.__code__
    cached = _CACHE.get(id(code))
    if cached is not None:
        if cached.pyfunc is not pyfunc:   # the same code in another closure
            cached = replace(cached, pyfunc=pyfunc, globals=pyfunc.__globals__,
                             closure=_closure_values(pyfunc))
            _CACHE[id(code)] = cached
        return cached
    filename = _filename(pyfunc)
    if code.co_name == "<lambda>":
        parsed = _parse_lambda(pyfunc, filename)
        _CACHE[id(code)] = parsed
        return parsed
    block, first = _source_block(pyfunc, filename)
    dedented = textwrap.dedent("".join(block))
    indent = len(block[0]) - len(block[0].lstrip())
    try:
        fdef = ast.parse(dedented).body[0]
    except SyntaxError as e:
        raise TileSyntaxError(f"Cannot parse the source of {pyfunc.__qualname__} ({e.msg}); "
                              f"tile functions must be defined by a def statement") from None
    except RecursionError:   # Python's own AST construction refuses the nesting
        raise TileSyntaxError(f"The source of {pyfunc.__qualname__} nests expressions more "
                              f"deeply than Python's ast module builds",
                              Loc(filename, first, indent, None, pyfunc.__name__)) from None
    if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise TileSyntaxError(f"{pyfunc.__qualname__} is not defined by a def statement")
    if isinstance(fdef, ast.AsyncFunctionDef):
        raise TileSyntaxError("async functions are not supported in tile code",
                              Loc(filename, first, indent, None, pyfunc.__name__))
    parsed = ParsedFunction(pyfunc, fdef, filename, first - 1, indent, pyfunc.__globals__,
                            _closure_values(pyfunc))
    _CACHE[id(code)] = parsed
    return parsed


def _parse_lambda(pyfunc: Any, filename: str) -> ParsedFunction:
    """A lambda defined in host code (an algorithm's operator, say) parsed from
    its file and given the shape of `def <lambda>(args): return body`. The
    lambda is the one starting on the code's first line whose span holds every
    source position of its code (Python 3.11+); without positions, the only
    lambda there with the same parameters."""
    code = pyfunc.__code__
    line = code.co_firstlineno
    readable = False
    for lines in (_FILE_LINES.get(filename, (None, None))[1], _current_lines(pyfunc, filename)):
        if not lines:
            continue
        readable = True
        try:
            tree = ast.parse("".join(lines))
        except (SyntaxError, ValueError, RecursionError):
            continue
        found = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda) and n.lineno == line
                 and [a.arg for a in n.args.args] == list(code.co_varnames[:code.co_argcount])]
        found = _lambdas_holding(code, found)
        if len(found) != 1:
            if found:
                raise TileSyntaxError(f"Line {line} of {filename} holds several lambdas with "
                                      f"the same parameters; define the operator with def",
                                      Loc(filename, line, 0, None, "<lambda>"))
            continue
        if len([n for n in ast.walk(tree) if isinstance(n, ast.Lambda) and n.lineno == line]) \
                == 1 and _compiles_to(pyfunc, lines) is False:
            continue   # the file changed since the import
        lam = found[0]
        ret = ast.copy_location(ast.Return(value=lam.body), lam.body)
        extra = {"type_params": []} if sys.version_info >= (3, 12) else {}
        fdef = ast.copy_location(ast.FunctionDef(name="<lambda>", args=lam.args, body=[ret],
                                                 decorator_list=[], returns=None,
                                                 type_comment=None, **extra), lam)
        register_source(filename, lines)
        return ParsedFunction(pyfunc, fdef, filename, 0, 0, pyfunc.__globals__,
                              _closure_values(pyfunc))
    if not readable:
        raise TileSyntaxError(f"Cannot read the source of a lambda ({filename}, line {line}): "
                              f"tile functions must be defined in a file")
    raise TileSyntaxError(f"Cannot find the lambda of line {line} in {filename} (edited since "
                          f"it was imported?); define the operator with def",
                          Loc(filename, line, 0, None, "<lambda>"))


def _lambdas_holding(code: types.CodeType, lambdas: list) -> list:
    """The lambdas whose source span holds every source position of `code`'s
    instructions (all of them where the interpreter keeps no positions)."""
    positions = getattr(code, "co_positions", None)
    if positions is None or len(lambdas) < 2:
        return lambdas
    # (zero-width positions are the interpreter's own instructions, e.g. RESUME at column 0)
    spots = [(ln, col) for ln, end_ln, col, end_col in positions()
             if None not in (ln, col) and (ln, col) != (end_ln, end_col)]

    def holds(n: ast.Lambda) -> bool:
        start, end = (n.lineno, n.col_offset), (n.end_lineno, n.end_col_offset)
        return all(start <= spot < end for spot in spots)
    held = [n for n in lambdas if holds(n)]
    # nested lambdas: the innermost span holding them all is the code's own
    return [n for n in held if not any(m is not n and (m.lineno, m.col_offset) >
                                       (n.lineno, n.col_offset) for m in held)] or held


def _closure_values(pyfunc: Any) -> dict:
    closure = {}
    if pyfunc.__closure__:
        for name, cell in zip(pyfunc.__code__.co_freevars, pyfunc.__closure__):
            try:
                closure[name] = cell.cell_contents
            except ValueError:   # a cell not filled yet
                pass
    return closure


def _source_block(pyfunc: Any, filename: str) -> tuple[list[str], int]:
    """The lines of `pyfunc`'s definition (decorators included) and the file line
    of the first, from the captured text (see the module docstring)."""
    code = pyfunc.__code__
    code_and_lines = _CAPTURED.get(id(code))
    if code_and_lines is not None:
        captured = code_and_lines[1]
        found = _function_block(captured, code.co_firstlineno)
        if found is not None:
            register_source(filename, captured)
            return found
    candidates = [_FILE_LINES.get(filename, (None, None))[1], _current_lines(pyfunc, filename)]
    readable = False
    for lines in candidates:
        if not lines:
            continue
        readable = True
        found = _function_block(lines, code.co_firstlineno)
        if found is not None and _compiles_to(pyfunc, lines) is not False:
            register_source(filename, lines)
            return found
    if not readable:
        raise TileSyntaxError(f"Cannot read the source of {pyfunc.__qualname__}: could not get "
                              f"source code; tile functions must be defined in a file")
    raise TileSyntaxError(
        f"The source of {pyfunc.__qualname__}() in {filename} has changed since the function "
        f"was imported; reload its module (importlib.reload) or restart Python to compile the "
        f"edited code (decorating it with @tilecore.function captures its source at import)",
        Loc(filename, code.co_firstlineno, 0, None, pyfunc.__name__))


# The lines inspect.findsource accepts as the start of a function's definition.
_DEF_START = re.compile(r'^(\s*def\s)|(\s*async\s+def\s)|(.*(?<!\w)lambda(:|\s))|^(\s*@)')


def _function_block(lines: list[str], firstlineno: int) -> Optional[tuple[list[str], int]]:
    """The definition starting at or above line `firstlineno` of `lines` (found
    as `inspect.getsourcelines` finds it), with its 1-based first line; None if
    these lines hold no definition there."""
    lnum = firstlineno - 1
    if not 0 <= lnum < len(lines):
        return None
    while lnum > 0 and not _DEF_START.match(lines[lnum]):
        lnum -= 1
    try:
        block = inspect.getblock(lines[lnum:])
    except (tokenize.TokenError, SyntaxError):
        return None
    return (block, lnum + 1) if block else None


# --- the bytecode check ------------------------------------------------------------------------
def _from_source_loader(pyfunc: Any) -> bool:
    """Whether `pyfunc`'s module was compiled from its file by the standard
    source loader (import hooks such as pytest's may rewrite the code)."""
    module = sys.modules.get(getattr(pyfunc, "__module__", None) or "")
    loader = getattr(module, "__loader__", None)
    path = getattr(module, "__file__", None)
    return type(loader) is importlib.machinery.SourceFileLoader and path is not None and \
        os.path.abspath(path) == os.path.abspath(pyfunc.__code__.co_filename)


# id(lines) -> (lines, the code of the file they hold, or None if it does not compile)
_COMPILED: dict[int, tuple[list[str], Optional[types.CodeType]]] = {}


def _compiles_to(pyfunc: Any, lines: list[str]) -> Optional[bool]:
    """Whether compiling the file `lines` gives `pyfunc`'s bytecode at its line
    (the whole file, as the import compiled it: what a function compiles to
    depends on its enclosing scopes and on the module's imports): False when it
    does not (the file changed since the import), None when this cannot be told."""
    if not _from_source_loader(pyfunc):
        return None
    code = pyfunc.__code__
    entry = _COMPILED.get(id(lines))
    if entry is None or entry[0] is not lines:
        try:
            module = compile("".join(lines), code.co_filename, "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            module = None
        except (RecursionError, MemoryError):
            return None
        entry = _COMPILED[id(lines)] = (lines, module)
    found = _find_code(entry[1], code.co_name, code.co_firstlineno) if entry[1] else None
    return found is not None and _same_code(found, code)


def _find_code(root: types.CodeType, name: str, line: int) -> Optional[types.CodeType]:
    """The code object called `name` that starts at `line`, in `root` or nested in it."""
    pending = [root]
    while pending:
        code = pending.pop()
        if code.co_name == name and code.co_firstlineno == line:
            return code
        pending.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return None


def _same_code(a: types.CodeType, b: types.CodeType) -> bool:
    """Equal bytecode (`co_code` is free of the interpreter's run-time
    specializations, unlike `==` of code objects) and equal names and constants."""
    return (a.co_code == b.co_code and a.co_names == b.co_names
            and a.co_varnames == b.co_varnames and a.co_freevars == b.co_freevars
            and a.co_cellvars == b.co_cellvars and a.co_argcount == b.co_argcount
            and a.co_posonlyargcount == b.co_posonlyargcount
            and a.co_kwonlyargcount == b.co_kwonlyargcount and a.co_flags == b.co_flags
            and len(a.co_consts) == len(b.co_consts)
            and all(_same_const(x, y) for x, y in zip(a.co_consts, b.co_consts)))


def _same_const(x: Any, y: Any) -> bool:
    if type(x) is not type(y):
        return False
    if isinstance(x, types.CodeType):
        return _same_code(x, y)
    if isinstance(x, tuple):
        return len(x) == len(y) and all(_same_const(i, j) for i, j in zip(x, y))
    if isinstance(x, (float, complex)):
        return repr(x) == repr(y)   # tells -0.0 from 0.0; NaN equals NaN
    return x == y
