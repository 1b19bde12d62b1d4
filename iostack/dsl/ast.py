"""The syntax tree of the policy language.

The parser produces these immutable nodes; the checker resolves them against
the vocabulary (filters, metrics, classes, groups, object types). Every node
keeps the line and column it started at, so later stages can point at it.

A program is a list of statements: ``Policy`` (``FOR ... DO ...``) and
``ClassDef`` (``DEFINE CLASS name AS actions``).
"""

from __future__ import annotations

from dataclasses import dataclass

from iostack.dsl.units import Quantity


@dataclass(frozen=True)
class Value:
    """A value as written: ``kind`` is quantity, name, string or hex.

    ``data`` holds a ``Quantity`` for numbers (units already converted), the
    text for names and strings, and an int for hex literals.
    """

    raw: str
    kind: str
    data: Quantity | str | int
    line: int
    column: int


@dataclass(frozen=True)
class Target:
    kind: str
    name: str
    line: int
    column: int


@dataclass(frozen=True)
class Comparison:
    metric: str
    op: str
    value: Value
    line: int
    column: int


@dataclass(frozen=True)
class BoolOp:
    op: str  # "AND" | "OR"
    left: Condition
    right: Condition


Condition = Comparison | BoolOp


@dataclass(frozen=True)
class Param:
    name: str
    value: Value
    line: int
    column: int


@dataclass(frozen=True)
class Action:
    """``SET name [WITH ...] [ON ...] [ORDER n] [TRANSIENT] [SANDBOXED|NATIVE]`` or ``DELETE name``.

    ``name`` is a filter or a QoS class (the checker tells which). ``stage`` is
    ``proxy``/``object`` when given with ``ON``; ``methods`` restricts the
    filter to some request methods (``ON GET``); ``order`` forces a position;
    ``runtime`` is ``storlet`` (``SANDBOXED``) or ``native`` when given.
    """

    verb: str  # "SET" | "DELETE"
    name: str
    line: int
    column: int
    params: tuple[Param, ...] = ()
    stage: str | None = None
    methods: tuple[str, ...] = ()
    order: int | None = None
    transient: bool = False
    runtime: str | None = None


@dataclass(frozen=True)
class ObjectCond:
    """A ``TO`` clause item: kind is type, size, age, tag or name."""

    kind: str
    op: str
    value: Value
    line: int
    column: int
    key: str | None = None  # the tag key of OBJECT_TAG=key:value


@dataclass(frozen=True)
class Policy:
    targets: tuple[Target, ...]
    condition: Condition | None
    actions: tuple[Action, ...]
    object_conds: tuple[ObjectCond, ...]
    line: int
    text: str
    column: int = 1


@dataclass(frozen=True)
class ClassDef:
    name: str
    actions: tuple[Action, ...]
    line: int
    column: int
    text: str


Statement = Policy | ClassDef


def condition_metrics(condition: Condition | None) -> list[Comparison]:
    """The comparisons of a ``WHEN`` condition, left to right."""
    if condition is None:
        return []
    if isinstance(condition, Comparison):
        return [condition]
    return condition_metrics(condition.left) + condition_metrics(condition.right)


def condition_text(condition: Condition) -> str:
    """A canonical rendering of a condition (fully parenthesised where it matters)."""
    if isinstance(condition, Comparison):
        return f"{condition.metric} {condition.op} {condition.value.raw}"
    return f"({condition_text(condition.left)} {condition.op} {condition_text(condition.right)})"
