"""Rules for structured control flow. Conditions and loop bounds are scalars,
replicated in every thread, so all threads take the same path (tile ops may
contain __syncthreads()). Region results and loop-carried values are mutable
C++ variables declared before the construct; terminators assign them (through
temporaries, since a yield may permute carried values) and jump.

A `for` whose step is known only at run time checks it first, as Python's
range() does: a step that is not positive ends the launch with a device error
(include/tilecore/errors.cuh, runtime/device_errors.py) that names the loop."""
from __future__ import annotations

from dataclasses import dataclass

from ...errors import Loc
from ...ir.core import Op, Value
from .emit import Ctx, Frame

__all__ = ["RULES", "DeviceCheck", "RANGE_STEP_MESSAGE"]

# The interpreter raises the same text (interpreter/control.py).
RANGE_STEP_MESSAGE = "The step of range() must be strictly positive, got {value}"


@dataclass(frozen=True)
class DeviceCheck:
    """A check the kernel makes at run time; its index in the kernel's table
    is what a failing block reports. `message` is formatted with the
    offending `value`; `loc` is the kernel line that failed."""

    message: str
    loc: Loc | None


def _declare_vars(ctx: Ctx, values, inits=None) -> list[str]:
    names = []
    for i, v in enumerate(values):
        init = ctx.name(inits[i]) if inits is not None else ""
        names.append(ctx.declare(v, init))
    return names


def _assign(ctx: Ctx, targets: list[str], values: tuple[Value, ...]) -> None:
    pairs = [(t, ctx.name(v)) for t, v in zip(targets, values) if t != ctx.name(v)]
    if len(pairs) == 1:
        ctx.line(f"{pairs[0][0]} = {pairs[0][1]};")
    elif pairs:
        ctx.open("")
        for i, (_, src) in enumerate(pairs):
            ctx.line(f"const auto t{i} = {src};")
        for i, (dst, _) in enumerate(pairs):
            ctx.line(f"{dst} = t{i};")
        ctx.close()


def _region(ctx: Ctx, block, frame: Frame) -> None:
    ctx.frames.append(frame)
    ctx.emit_block(ctx, block)
    ctx.frames.pop()


def _if(ctx: Ctx, op: Op) -> None:
    results = _declare_vars(ctx, op.results)
    outer = ctx.frames[-1] if ctx.frames else Frame([])
    then, other = op.regions
    ctx.open(f"if ({ctx.scalar(op.operands[0])})")
    _region(ctx, then, Frame(results, outer.loop_carried, outer.loop_results))
    if other.ops:
        ctx.close("} else {")
        ctx.depth += 1
        _region(ctx, other, Frame(results, outer.loop_carried, outer.loop_results))
    ctx.close()


def _check_step(ctx: Ctx, op: Op, step: Value) -> None:
    """End the launch with a device error when a run-time step is not positive
    (the front end refuses constant ones). The step is a scalar, the same in
    every thread, so the whole block returns together."""
    if ctx.constants.get(step.id, 0) > 0:
        return
    ctx.headers.add("tilecore/errors.cuh")
    index = len(ctx.checks)
    ctx.checks.append(DeviceCheck(RANGE_STEP_MESSAGE, op.loc))
    s = ctx.scalar(step)
    ctx.line(f"if ({s} <= 0) {{ tc::report_error({index}u, (long long){s}); return; }}")


def _for(ctx: Ctx, op: Op) -> None:
    lb, ub, step, *init = op.operands
    body = op.regions[0]
    _check_step(ctx, op, step)
    carried = _declare_vars(ctx, op.results, init)
    for arg, name in zip(body.args[1:], carried):
        ctx.names[arg.id] = name
    i = f"i{body.args[0].id}"
    ctx.open(f"for (long long {i} = {ctx.scalar(lb)}; {i} < {ctx.scalar(ub)}; {i} += {ctx.scalar(step)})")
    iv = body.args[0]
    ctx.line(f"const {ctx.frag(iv.type)} {ctx.name(iv)} = {{{{({ctx.uses(iv.type.dtype)}){i}}}}};")
    _region(ctx, body, Frame(carried, carried, carried))
    ctx.close()


def _while(ctx: Ctx, op: Op) -> None:
    body = op.regions[0]
    carried = [ctx.declare(a, ctx.name(v)) for a, v in zip(body.args, op.operands)]
    results = _declare_vars(ctx, op.results)
    ctx.open("while (true)")
    _region(ctx, body, Frame(carried, carried, results))
    ctx.close()


def _yield(ctx: Ctx, op: Op) -> None:
    _assign(ctx, ctx.frames[-1].yield_to, op.operands)


def _continue(ctx: Ctx, op: Op) -> None:
    _assign(ctx, ctx.frames[-1].loop_carried, op.operands)
    ctx.line("continue;")


def _break(ctx: Ctx, op: Op) -> None:
    _assign(ctx, ctx.frames[-1].loop_results, op.operands)
    ctx.line("break;")


def _grid_wait(ctx: Ctx, op: Op) -> None:
    ctx.line("tc::wait_for_prior_grid();")


def _grid_launch_dependents(ctx: Ctx, op: Op) -> None:
    ctx.line("tc::launch_dependent_grids();")


RULES = {"grid_wait": _grid_wait, "grid_launch_dependents": _grid_launch_dependents,
         "if": _if, "for": _for, "while": _while, "yield": _yield,
         "continue": _continue, "break": _break}
