"""Shrinking a failing program: drop statements (with the statements that
read what they define) while the program still fails the same way; later
statements first, so uses go before their definitions, and whole top-level
statements before the statements inside them. Greedy one-at-a-time delta
debugging, bounded by a number of runs and a time budget."""
from __future__ import annotations

import time
from typing import Callable

from .execute import Outcome
from .model import Program, Stmt

__all__ = ["minimize"]


def _index(prog: Program) -> tuple[list[Stmt], dict[int, list[int]]]:
    """(statements depth first, sid -> sids of its ancestors)."""
    order: list[Stmt] = []
    ancestors: dict[int, list[int]] = {}

    def visit(stmts: list[Stmt], chain: list[int]) -> None:
        for s in stmts:
            order.append(s)
            ancestors[s.sid] = chain
            visit(s.body + s.orelse, chain + [s.sid])

    visit(prog.body, [])
    return order, ancestors


def _closure(sid: int, order: list[Stmt], ancestors: dict, dropped: frozenset) -> frozenset:
    """`sid` with the kept statements that read a name only dropped statements define."""
    alive = [s for s in order if s.sid not in dropped
             and not any(a in dropped for a in ancestors[s.sid])]
    names = {s.sid: s.names(dropped) for s in alive}
    out = {sid}
    changed = True
    while changed:
        changed = False
        inside = [s for s in alive if s.sid not in out
                  and not any(a in out for a in ancestors[s.sid])]
        enclosing = {a for x in out for a in ancestors[x]}
        gone = {n for x in out for n in names[x][0]}
        kept = {n for s in inside if not s.compound for n in names[s.sid][0]}
        lost = gone - kept
        for s in inside:
            # an enclosing statement is never dropped for what its body loses
            if s.sid not in enclosing and names[s.sid][1] & lost:
                out.add(s.sid)
                changed = True
    return frozenset(out)


def minimize(prog: Program, failure: Outcome, run: Callable[[frozenset], Outcome], *,
             max_runs: int = 150, max_seconds: float = 120.0) -> tuple[frozenset, Outcome]:
    """(statements to drop, the outcome of the reduced program); the reduced
    program fails with the same `key()` as `failure`."""
    order, ancestors = _index(prog)
    dropped: frozenset = frozenset()
    best = failure
    runs = 0
    start = time.monotonic()
    top = [s for s in order if not ancestors[s.sid]]
    changed = True
    while changed:
        changed = False
        # whole top-level statements first (a loop in one trial), then every statement
        for s in list(reversed(top)) + list(reversed(order)):
            if s.sid in dropped or any(a in dropped for a in ancestors[s.sid]):
                continue
            if runs >= max_runs or time.monotonic() - start > max_seconds:
                return dropped, best
            trial = dropped | _closure(s.sid, order, ancestors, dropped)
            runs += 1
            out = run(trial)
            if out.failed and out.key() == failure.key():
                dropped, best, changed = trial, out, True
    return dropped, best
