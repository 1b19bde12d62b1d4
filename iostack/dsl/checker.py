"""Checking parsed policies against the vocabulary.

``check(statements, vocabulary)`` resolves every name a policy uses: filters
and QoS classes (``SET GOLD`` expands to the class's actions), parameters
(name, type, range, unit; values converted to base units), stages and
methods the filter supports, metrics and their unit kind, groups and object
types. Mistakes are errors with line, column and the nearest known name;
things that may be fine later (a tenant not known yet, a class redefined)
are warnings. The result is JSON-ready ``CheckedPolicy``/``CheckedClass``
objects; nothing is written anywhere.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any

from iostack.dsl import ast
from iostack.dsl.errors import Diagnostic, DSLError
from iostack.dsl.parser import parse
from iostack.dsl.units import Quantity
from iostack.dsl.vocabulary import QosClass, Vocabulary, filter_domain
from iostack.filters.metadata import FilterMetadata, Param, ParamValueError

BLOCK_TARGETS = ("volume", "storage_group")
_POSITIONAL = re.compile(r"param([1-9][0-9]{0,3})")  # the parser lower-cases parameter names
_KIND_WORDS = {"number": "a plain number", "size": "a size", "rate": "a rate",
               "ops": "an operation rate", "duration": "a duration"}


@dataclass(frozen=True)
class CheckedAction:
    """One filter action after class expansion; ``params`` hold explicit values only."""

    verb: str  # "set" | "delete"
    filter: str
    params: dict[str, Any] = field(default_factory=dict)
    stage: str | None = None
    methods: tuple[str, ...] = ()
    order: int | None = None
    transient: bool = False
    via_class: str | None = None
    runtime: str | None = None  # "storlet" | "native" | None (the filter's default)
    # Where it was written, for compile-time diagnostics (not stored).
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {"verb": self.verb, "filter": self.filter, "params": dict(self.params),
                "stage": self.stage, "methods": list(self.methods), "order": self.order,
                "transient": self.transient, "via_class": self.via_class,
                "runtime": self.runtime}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CheckedAction:
        return cls(data["verb"], data["filter"], dict(data.get("params", {})), data.get("stage"),
                   tuple(data.get("methods", ())), data.get("order"),
                   bool(data.get("transient")), data.get("via_class"),
                   data.get("runtime"))


@dataclass(frozen=True)
class CheckedPolicy:
    text: str
    line: int
    targets: tuple[tuple[str, str], ...]  # (kind, key): tenant keys are Swift accounts
    actions: tuple[CheckedAction, ...]
    object_conds: tuple[dict[str, Any], ...] = ()
    condition: dict[str, Any] | None = None
    column: int = 1

    @property
    def dynamic(self) -> bool:
        return self.condition is not None

    def covers(self, diagnostic: Diagnostic) -> bool:
        """Whether ``diagnostic`` points into this policy's text."""
        return diagnostic.line == self.line and \
            self.column <= diagnostic.column < self.column + len(self.text)

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "line": self.line, "dynamic": self.dynamic,
                "targets": [{"kind": k, "name": n} for k, n in self.targets],
                "condition": self.condition, "object_conds": list(self.object_conds),
                "actions": [a.to_json() for a in self.actions]}


@dataclass(frozen=True)
class CheckedClass:
    name: str
    qos_class: QosClass
    line: int


@dataclass
class CheckResult:
    statements: list[CheckedPolicy | CheckedClass]
    warnings: list[Diagnostic]

    @property
    def policies(self) -> list[CheckedPolicy]:
        return [s for s in self.statements if isinstance(s, CheckedPolicy)]

    @property
    def classes(self) -> list[CheckedClass]:
        return [s for s in self.statements if isinstance(s, CheckedClass)]


def check_text(text: str, vocabulary: Vocabulary) -> CheckResult:
    """Parse and check ``text``; raise ``DSLError`` with every problem found."""
    return check(parse(text), vocabulary)


def check(statements: list[ast.Statement], vocabulary: Vocabulary) -> CheckResult:
    checker = _Checker(vocabulary)
    checked = []
    for statement in statements:
        try:
            checked.append(checker.statement(statement))
        except DSLError as exc:
            checker.errors.extend(exc.diagnostics)
    if checker.errors:
        raise DSLError(checker.errors)
    return CheckResult(checked, checker.warnings)


def suggest(word: str, known) -> str:
    """`` (did you mean X?)`` in the case the user wrote, or nothing."""
    names = {name.lower(): name for name in known}
    match = difflib.get_close_matches(word.lower(), list(names), n=1, cutoff=0.6)
    if not match:
        return ""
    best = match[0].upper() if word.isupper() else match[0]
    return f" (did you mean {best}?)"


def _at(node, message: str) -> DSLError:
    return DSLError.at(node.line, node.column, message)


class _Checker:
    def __init__(self, vocabulary: Vocabulary) -> None:
        self.vocab = vocabulary
        # Classes defined earlier in the same submission are usable below.
        self.classes = dict(vocabulary.classes)
        self.errors: list[Diagnostic] = []
        self.warnings: list[Diagnostic] = []

    def statement(self, statement: ast.Statement) -> CheckedPolicy | CheckedClass:
        if isinstance(statement, ast.ClassDef):
            return self.class_def(statement)
        return self.policy(statement)

    # -- classes --------------------------------------------------------------

    def class_def(self, node: ast.ClassDef) -> CheckedClass:
        if node.name.lower() in self.vocab.filters:
            raise _at(node, f"class {node.name} would hide the filter of the same name")
        for action in node.actions:
            if action.name.upper() in self.classes or action.name.upper() == node.name:
                raise _at(action, f"class {node.name} cannot contain the class {action.name}")
            self.action(action, domain=None)
        if node.name in self.classes:
            self.warnings.append(Diagnostic(node.line, node.column,
                                            f"redefines class {node.name}"))
        actions_text = node.text.split(None, 4)[4] if node.text else ""
        qos = QosClass(node.name, actions_text)
        self.classes[node.name] = qos
        return CheckedClass(node.name, qos, node.line)

    # -- policies -------------------------------------------------------------

    def policy(self, node: ast.Policy) -> CheckedPolicy:
        targets = [self.target(t) for t in node.targets]
        kinds = {kind in BLOCK_TARGETS for kind, _ in targets}
        if len(kinds) > 1:
            raise _at(node.targets[0], "a policy cannot mix VOLUME/STORAGE_GROUP targets with "
                                        "object-storage targets")
        domain = "block" if kinds == {True} else "object"
        if domain == "block" and node.object_conds:
            cond = node.object_conds[0]
            raise _at(cond, "TO object conditions do not apply to VOLUME/STORAGE_GROUP targets")
        actions = []
        for action in node.actions:
            if action.transient and node.condition is None:
                raise _at(action, "TRANSIENT needs a WHEN condition (it reverts when the "
                                  "condition stops holding)")
            actions.extend(self.set_or_class(action, domain))
        self.check_owners(actions, targets)
        return CheckedPolicy(
            text=node.text, line=node.line, targets=tuple(targets), actions=tuple(actions),
            object_conds=tuple(self.object_cond(c) for c in node.object_conds),
            condition=self.condition(node.condition) if node.condition else None,
            column=node.column,
        )

    def check_owners(self, actions: list[CheckedAction],
                     targets: list[tuple[str, str]]) -> None:
        """A tenant's private filter (``extra.tenant``) may be set on that tenant's data only.

        A group or a global target may hold other tenants' data, so it is refused too.
        """
        for action in actions:
            meta = self.vocab.filters.get(action.filter)
            owner = meta.extra.get("tenant") if meta is not None else None
            if not owner or action.verb != "set":
                continue
            for kind, key in targets:
                account = key.partition("/")[0] if kind in ("tenant", "container", "object") \
                    else None
                if account != owner:
                    where = "every tenant" if kind == "global" else f"{kind} {key}"
                    raise DSLError.at(action.line, action.column,
                                      f"{action.filter} is tenant {owner}'s own filter: it "
                                      f"cannot be set for {where}")

    def target(self, node: ast.Target) -> tuple[str, str]:
        vocab = self.vocab
        if node.kind == "group":
            if node.name not in vocab.groups:
                raise _at(node, f"unknown group {node.name!r}{suggest(node.name, vocab.groups)}")
            return node.kind, node.name
        if node.kind not in ("tenant", "container", "object"):
            return node.kind, node.name
        first, sep, rest = node.name.partition("/")
        account = vocab.account(first)
        if account != "*" and account not in vocab.tenants:
            what = "tenant" if node.kind == "tenant" else f"{node.kind} {node.name!r} of tenant"
            self.warnings.append(Diagnostic(
                node.line, node.column,
                f"{what} {account!r} is not known yet (the policy applies once it exists)"))
        return node.kind, account + sep + rest

    def set_or_class(self, action: ast.Action, domain: str) -> list[CheckedAction]:
        qos = self.classes.get(action.name.upper())
        if qos is None or action.name.lower() in self.vocab.filters:
            return [self.action(action, domain)]
        if (action.params or action.stage or action.methods or action.order is not None
                or action.runtime):
            raise _at(action, f"class {qos.name} is applied as a whole: WITH, ON, ORDER and "
                              f"SANDBOXED/NATIVE belong in its definition")
        try:
            (definition,) = parse(f"DEFINE CLASS {qos.name} AS {qos.actions}")
            expanded = [self.action(a, domain) for a in definition.actions]
        except DSLError as exc:
            raise _at(action, f"class {qos.name} no longer checks: "
                              f"{exc.diagnostics[0].message}") from None
        if action.verb == "DELETE":
            return [CheckedAction("delete", a.filter, via_class=qos.name, line=action.line,
                                  column=action.column) for a in expanded]
        return [CheckedAction(a.verb, a.filter, a.params, a.stage, a.methods, a.order,
                              action.transient or a.transient, qos.name, a.runtime,
                              action.line, action.column) for a in expanded]

    def action(self, action: ast.Action, domain: str | None) -> CheckedAction:
        name = action.name.lower()
        meta = self.vocab.filters.get(name)
        if meta is None:
            known = list(self.vocab.filters) + list(self.classes)
            raise _at(action, f"unknown filter {action.name!r}{suggest(action.name, known)}")
        if domain is not None and filter_domain(meta) != domain:
            kind = "a block" if filter_domain(meta) == "block" else "an object"
            where = "VOLUME/STORAGE_GROUP" if filter_domain(meta) == "block" else "object-storage"
            raise _at(action, f"{name} is {kind} filter: it applies to {where} targets only")
        where = {"line": action.line, "column": action.column}
        if action.verb == "DELETE":
            return CheckedAction("delete", name, **where)
        if action.stage and action.stage not in meta.stages:
            raise _at(action, f"{name} cannot run ON {action.stage.upper()} "
                              f"(it runs on: {', '.join(sorted(meta.stages))})")
        for method in action.methods:
            if method not in meta.methods:
                raise _at(action, f"{name} applies to {'/'.join(sorted(meta.methods))} only: "
                                  f"ON {method} would never run")
        if action.order is not None and action.order < 1:
            raise _at(action, "ORDER counts from 1")
        if action.runtime == "storlet" and not meta.sandboxable:
            raise _at(action, f"{name} cannot run SANDBOXED (it does not declare itself "
                              f"sandbox-capable)")
        if action.runtime == "native" and meta.extra.get("runtime") == "storlet":
            raise _at(action, f"{name} is uploaded code: it runs only SANDBOXED")
        params: dict[str, Any] = {}
        written: dict[str, str] = {}  # parameter -> how the policy named it (get or PARAM1)
        for param in action.params:
            key = _declared_name(meta, param)
            if key in params:
                first, again = written[key], _written(param)
                how = f" (as {first} and as {again})" if first != again else ""
                raise _at(param, f"parameter {key!r} given twice{how}")
            written[key] = _written(param)
            params[key] = self.param(meta, param, key)
        validator = self.vocab.validators.get(name)
        if validator is not None:
            try:
                validator(params)
            except ValueError as exc:
                raise _at(action, str(exc)) from None
        return CheckedAction("set", name, params, action.stage, action.methods, action.order,
                             action.transient, runtime=action.runtime, **where)

    def param(self, meta: FilterMetadata, node: ast.Param, name: str) -> Any:
        declared = meta.param(name)
        if declared is None:
            names = [p.name for p in meta.params]
            listing = f"; it takes {', '.join(names)}" if names else "; it takes none"
            hint = suggest(name, names)
            raise _at(node, f"unknown parameter {name!r} for {meta.name}"
                            f"{hint or listing}")
        label = repr(name) if name == node.name else f"{name!r} ({_written(node)})"
        kind = "ops" if declared.unit == "ops" else declared.type
        try:
            value = convert(declared, node.value)
        except ParamValueError as exc:
            if not exc.out_of_range:
                raise
            low, high = declared.minimum, declared.maximum
            raise _at(node.value, f"parameter {label} of {meta.name} must be in "
                                  f"[{_num(low)}, {_num(high)}], got {node.value.raw}") from None
        except ValueError as exc:
            raise _at(node.value, f"parameter {label} of {meta.name} {exc}, "
                                  f"got {node.value.raw!r}{_unit_hint(node.value, kind)}") from None
        self.unit_taken(node.value, f"{_written(node)}={node.value.raw}", kind)
        return value

    def unit_taken(self, value: ast.Value, what: str, kind: str) -> None:
        """Warn, naming the unit, where a rate or duration was bare or written in bits."""
        quantity = value.data
        if value.kind != "quantity":
            return
        if quantity.bits:
            self.warnings.append(Diagnostic(
                value.line, value.column,
                f"{what} is in bits: taken as {quantity.value:,.0f} bytes/s "
                f"({_human_rate(quantity.value)})"))
        elif quantity.kind == "number" and quantity.value and kind in _BASE_UNITS:
            base, example = _BASE_UNITS[kind]
            self.warnings.append(Diagnostic(
                value.line, value.column,
                f"{what} has no unit: taken as {_num(quantity.value)} {base} "
                f"(write the unit, e.g. {_num(quantity.value)}{example})"))

    # -- WHEN and TO ----------------------------------------------------------

    def condition(self, node: ast.Condition) -> dict[str, Any]:
        if isinstance(node, ast.BoolOp):
            return {"op": node.op, "left": self.condition(node.left),
                    "right": self.condition(node.right)}
        metric = self.vocab.metrics.get(node.metric)
        if metric is None:
            close = difflib.get_close_matches(node.metric.upper(), list(self.vocab.metrics),
                                              n=3, cutoff=0.6)
            hint = f" (did you mean {' or '.join(close)}?)" if close else \
                f"; known metrics: {', '.join(sorted(self.vocab.metrics))}"
            raise _at(node, f"unknown metric {node.metric!r}{hint}")
        value = node.value
        if value.kind != "quantity":
            raise _at(value, f"{metric.name} is compared with a number, got {value.raw!r}")
        quantity: Quantity = value.data
        if quantity.kind not in ("number", metric.kind):
            raise _at(value, f"{metric.name} is {_KIND_WORDS[metric.kind]}; {value.raw} is "
                             f"{_KIND_WORDS[quantity.kind]}{_unit_hint(value, metric.kind)}")
        self.unit_taken(value, f"{metric.name} {node.op} {value.raw}", metric.kind)
        return {"metric": metric.name, "op": node.op, "value": quantity.as_number}

    def object_cond(self, node: ast.ObjectCond) -> dict[str, Any]:
        if node.kind == "type":
            name = str(node.value.data).upper()
            if name not in self.vocab.object_types:
                raise _at(node.value, f"unknown object type {node.value.raw!r}"
                                      f"{suggest(name, self.vocab.object_types)}")
            return {"kind": "type", "value": name}
        if node.kind == "size":
            quantity: Quantity = node.value.data
            if quantity.kind not in ("number", "size"):
                raise _at(node.value, f"OBJECT_SIZE takes a size, got {node.value.raw}")
            return {"kind": "size", "op": node.op, "value": quantity.as_number}
        if node.kind == "age":
            quantity = node.value.data
            if quantity.kind != "duration":
                raise _at(node.value, f"OBJECT_AGE takes a duration (e.g. 30d), "
                                      f"got {node.value.raw}")
            return {"kind": "age", "op": node.op, "value": quantity.as_number}
        if node.kind == "tag":
            return {"kind": "tag", "key": node.key, "value": _text(node.value)}
        return {"kind": "name", "value": node.value.data}


def _declared_name(meta: FilterMetadata, node: ast.Param) -> str:
    """The parameter a ``WITH`` item sets: ``PARAMn`` is the filter's n-th declared parameter.

    That is the paper's positional form (``SET BANDWIDTH WITH PARAM1=30MBps``);
    a filter that declares a parameter literally called ``paramN`` keeps it.
    """
    match = _POSITIONAL.fullmatch(node.name)
    if match is None or meta.param(node.name) is not None:
        return node.name
    position = int(match.group(1))
    if position > len(meta.params):
        names = ", ".join(p.name for p in meta.params) or "none"
        raise _at(node, f"{_written(node)}: {meta.name} declares {len(meta.params)} "
                        f"parameter{'' if len(meta.params) == 1 else 's'} ({names})")
    return meta.params[position - 1].name


def _written(node: ast.Param) -> str:
    """A parameter as the policy named it: ``PARAM1`` or ``get``."""
    return node.name.upper() if _POSITIONAL.fullmatch(node.name) else node.name


def convert(param: Param, value: ast.Value) -> Any:
    """``value`` as the parameter's type: ``ValueError`` says what the type takes.

    The DSL's part is reading what the policy wrote (names and strings as
    text, units to base units, hex for integers); typing, enum case, booleans
    and ranges are the filter's own (``Param.coerce``), as on the data path.
    A value out of range raises the ``ParamValueError`` itself
    (``out_of_range``), for the caller to word with the policy's text.
    """
    try:
        return param.coerce(_written_value(param, value))
    except ParamValueError as exc:
        if exc.out_of_range:
            raise
        raise ValueError(f"takes {_takes(param)}") from None


def _written_value(param: Param, value: ast.Value) -> Any:
    """What the policy wrote, read for ``param``: text, or a number in base units."""
    kind = param.type
    if kind in ("str", "secret", "bool", "enum"):
        return _text(value)
    if value.kind == "hex" and kind == "int":
        return value.data
    if value.kind != "quantity":
        raise ValueError(f"takes {_TYPE_WORDS.get(kind, kind)}")
    quantity: Quantity = value.data
    wanted = {"int": "number", "float": "number", "size": "size", "duration": "duration",
              "rate": "ops" if param.unit == "ops" else "rate"}[kind]
    if quantity.kind not in ("number", wanted):
        raise ValueError(f"takes {_KIND_WORDS[wanted]}")
    return quantity.as_number


def _takes(param: Param) -> str:
    """What a parameter takes, as the checker's errors say it."""
    if param.type == "bool":
        return "true or false"
    if param.type == "enum":
        return f"one of {', '.join(param.choices)}"
    if param.type == "size":
        return "a whole number of bytes"
    return _TYPE_WORDS.get(param.type, param.type)


# The base unit a bare number is taken in, and a unit to suggest instead.
_BASE_UNITS = {"rate": ("bytes/s", "MBps"), "duration": ("seconds", "ms")}


def _unit_hint(value: ast.Value, wanted: str) -> str:
    """`` (did you mean 30MBps?)`` for a size given where a rate is wanted."""
    if wanted == "rate" and value.kind == "quantity" and value.data.kind == "size":
        return f" (did you mean {value.raw}ps?)"
    return ""


def _human_rate(value: float) -> str:
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if value >= scale:
            return f"{value / scale:g} {unit}"
    return f"{value:g} B/s"


_TYPE_WORDS = {"int": "a whole number", "float": "a number", "size": "a size (e.g. 512K)",
               "rate": "a rate (e.g. 30MBps)", "duration": "a duration (e.g. 5s)"}


def _text(value: ast.Value) -> str:
    return value.data if isinstance(value.data, str) else value.raw


def _num(x: float | None) -> str:
    if x is None:
        return "any"
    return str(int(x)) if float(x).is_integer() else str(x)
