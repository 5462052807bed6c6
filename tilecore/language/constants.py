"""Constant embedding: the `Constant` type hint and `ConstantAnnotation`."""
from __future__ import annotations

import typing
from typing import Annotated, Any

__all__ = ["ConstantAnnotation", "Constant", "is_constant_annotation"]


class ConstantAnnotation:
    """`typing.Annotated` metadata marking a parameter as constant embedded:
    each distinct value gets its own compiled kernel and takes no argument space."""

    def __repr__(self) -> str:
        return "ConstantAnnotation()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConstantAnnotation)

    def __hash__(self) -> int:
        return hash(ConstantAnnotation)


class _ConstantForm:
    """`Constant` alone (a constant of any type) or `Constant[T]`."""

    def __getitem__(self, tp: Any):
        return Annotated[tp, ConstantAnnotation()]

    def __repr__(self) -> str:
        return "tilecore.Constant"


Constant = _ConstantForm()


def is_constant_annotation(annotation: Any) -> bool:
    """True for `Constant`, `Constant[T]` and any `Annotated[..., ConstantAnnotation()]`
    (also when given as a string under `from __future__ import annotations`)."""
    if annotation is Constant:
        return True
    if isinstance(annotation, str):
        a = annotation.replace(" ", "")
        return a.startswith(("Constant", "ct.Constant", "tilecore.Constant", "cuda.tile.Constant")) \
            or "ConstantAnnotation()" in a
    if typing.get_origin(annotation) is Annotated:
        return any(isinstance(m, ConstantAnnotation) for m in annotation.__metadata__)
    return False
