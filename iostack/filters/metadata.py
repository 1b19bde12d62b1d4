"""What a filter declares about itself, and the one path its parameters take.

The controller checks policies against this metadata (parameter names, types
and ranges, which requests a filter applies to, where it may run, ordering
and conflicts), and the data path uses it to place and order filters. It is
stored in Redis as JSON (``to_json``/``from_json``): never pickled.

Parameters are owned by their declaration, so every component treats a value
the same way:

- ``Param.coerce`` types and range-checks one value. The DSL checker calls it
  on what it read from a policy (after converting units), the data path on
  what a compiled rule, a header or a backend request carries: the same
  value is accepted, or refused for the same reason, everywhere. Enum values
  match their choices case-insensitively and come out spelt as declared
  (``algorithm=GZIP`` is ``gzip``), as the policy language documents for names.
- ``resolve_params`` is the whole set: unknown names refused, every value
  coerced, defaults filled (``FilterMetadata.with_defaults``, which the
  policy resolution uses too, so what ``explain`` shows is what runs).
- ``public_params`` is the only way to get parameters fit for records, logs
  and answers: ``secret`` values (and those of parameters the filter does not
  declare, which may have been secrets) are left out or masked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from iostack.filters.errors import ParamError

PARAM_TYPES = ("int", "float", "str", "bool", "enum", "size", "rate", "duration", "secret")
STAGES = ("proxy", "object")
METHODS = ("GET", "PUT", "HEAD", "POST", "DELETE")

TRUE_WORDS = frozenset({"true", "yes", "on", "1"})
FALSE_WORDS = frozenset({"false", "no", "off", "0"})
# Whole numbers only: counts and byte sizes.
_WHOLE_TYPES = frozenset({"int", "size"})
# Any number, kept whole when it is: rates may be fractional (0.5 ops/s, a bit
# rate in bytes/s, a block filter's rate that the block bridge rounds up) and
# durations are seconds, fractions included (250ms).
_NUMBER_TYPES = frozenset({"rate", "duration"})


class ParamValueError(ValueError):
    """A value a parameter does not take.

    ``expected`` says what the type takes (``an integer (bytes)``) when the
    value is of the wrong type; ``out_of_range`` is true when it is a number
    outside ``[minimum, maximum]``. Each caller words it for its audience: the
    DSL with the text and position the policy wrote, the data path as a
    ``ParamError`` naming the filter.
    """

    def __init__(self, message: str, expected: str | None = None) -> None:
        super().__init__(message)
        self.expected = expected

    @property
    def out_of_range(self) -> bool:
        return self.expected is None


@dataclass(frozen=True)
class Param:
    """One filter parameter.

    ``type`` is one of ``PARAM_TYPES``: ``size`` values are bytes, ``rate``
    values are bytes (or operations) per second, ``duration`` values are
    seconds, all after unit conversion by the DSL. ``minimum``/``maximum``
    bound numeric values; ``choices`` lists the values of an ``enum``.
    """

    name: str
    type: str
    default: Any = None
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    unit: str | None = None
    description: str = ""

    def __post_init__(self) -> None:
        if self.type not in PARAM_TYPES:
            raise ValueError(f"parameter {self.name!r}: unknown type {self.type!r}")

    @property
    def secret(self) -> bool:
        """Its value never appears in records, logs or answers (``public_params``)."""
        return self.type == "secret"

    def coerce(self, value: Any) -> Any:
        """``value`` as this parameter's type; ``ParamValueError`` if it is not one.

        Values arrive typed (a compiled rule, the DSL's converted number, a
        backend header's JSON) or as strings (headers, Redis hashes), so
        numeric and boolean strings are read too.
        """
        if self.type in _WHOLE_TYPES or self.type in _NUMBER_TYPES or self.type == "float":
            number = _number(value, whole=self.type in _WHOLE_TYPES)
            if number is None:
                kind = "an integer" if self.type in _WHOLE_TYPES else "a number"
                raise self._expected(f"{kind}{self._unit()}", value)
            if self.type == "float":
                number = float(number)
            if self.minimum is not None and number < self.minimum:
                raise ParamValueError(
                    f"{number} is below the minimum {self.minimum:g}{self._unit()}")
            if self.maximum is not None and number > self.maximum:
                raise ParamValueError(
                    f"{number} is above the maximum {self.maximum:g}{self._unit()}")
            return number
        if self.type == "bool":
            if isinstance(value, bool):
                return value
            word = str(value).lower()
            if word in TRUE_WORDS or word in FALSE_WORDS:
                return word in TRUE_WORDS
            raise self._expected("true or false", value)
        if self.type == "enum":
            word = str(value).lower()
            for choice in self.choices:
                if choice.lower() == word:
                    return choice
            raise self._expected(f"one of {', '.join(self.choices)}", value)
        if not isinstance(value, str):
            raise self._expected("a string", value)
        return value

    def _expected(self, what: str, value: Any) -> ParamValueError:
        return ParamValueError(f"expected {what}, got {value!r}", expected=what)

    def _unit(self) -> str:
        return f" ({self.unit})" if self.unit else ""


def _number(value: Any, whole: bool) -> int | float | None:
    """A number from ``value``: an int when it is whole, None when it is no number
    (booleans are not numbers here, though Python counts them as ints)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if value.is_integer():
            return int(value)
        return None if whole else value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
        if whole:
            return None
        try:
            return float(value)
        except ValueError:
            return None
    return None


@dataclass(frozen=True)
class FilterMetadata:
    """A filter's declaration.

    - ``methods``: the requests a policy triggers the filter on. A filter that
      transforms stored bytes on PUT is undone on GET from what the object's
      sysmeta recorded, whatever the policies say then.
    - ``stages``: where it may run; ``default_stage`` where it runs unless a
      policy says ``ON PROXY``/``ON OBJECT``.
    - ``changes_size``: output length differs from input length.
    - ``layout_group``: filters that define the stored byte layout in the same
      way (two compressors, say) share a group; two of them on one target conflict.
    - ``runs_before``: names of filters this one must precede on the write
      path (compression before encryption: compressing ciphertext is pointless).
    - ``sandboxable``: can run as a Storlet in the sandbox.
    """

    name: str
    description: str
    params: tuple[Param, ...] = ()
    methods: frozenset[str] = frozenset({"PUT"})
    stages: frozenset[str] = frozenset({"proxy"})
    default_stage: str = "proxy"
    changes_size: bool = False
    layout_group: str | None = None
    runs_before: tuple[str, ...] = ()
    sandboxable: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.methods <= set(METHODS):
            raise ValueError(f"filter {self.name!r}: unknown methods {sorted(self.methods)}")
        if not self.stages <= set(STAGES) or self.default_stage not in self.stages:
            raise ValueError(f"filter {self.name!r}: bad stages {sorted(self.stages)}")

    def param(self, name: str) -> Param | None:
        for param in self.params:
            if param.name == name:
                return param
        return None

    def with_defaults(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``params`` with the declared defaults of those not given (none for no default)."""
        return {p.name: p.default for p in self.params if p.default is not None} | dict(params)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["methods"] = sorted(self.methods)
        data["stages"] = sorted(self.stages)
        data["params"] = [asdict(p) | {"choices": list(p.choices)} for p in self.params]
        data["runs_before"] = list(self.runs_before)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FilterMetadata:
        fields = dict(data)
        # Declared by metadata written before it went (nothing ever read it).
        fields.pop("needs_whole_stream", None)
        fields["params"] = tuple(
            Param(**(p | {"choices": tuple(p.get("choices", ()))})) for p in data.get("params", ())
        )
        fields["methods"] = frozenset(data.get("methods", ("PUT",)))
        fields["stages"] = frozenset(data.get("stages", ("proxy",)))
        fields["runs_before"] = tuple(data.get("runs_before", ()))
        return cls(**fields)


def resolve_params(metadata: FilterMetadata, params: Mapping[str, Any]) -> dict[str, Any]:
    """Every declared parameter, typed and range-checked (``Param.coerce``), defaults filled.

    Raises ``ParamError`` naming the filter and the culprit: an unknown
    parameter, or a value its parameter does not take. A parameter with no
    default and no value is ``None``.
    """
    known = {p.name: p for p in metadata.params}
    typed = {}
    for name, value in params.items():
        param = known.get(name)
        if param is None:
            choices = ", ".join(sorted(known)) or "none"
            raise ParamError(metadata.name, name, f"unknown parameter (known: {choices})")
        try:
            typed[name] = param.coerce(value)
        except ParamValueError as exc:
            raise ParamError(metadata.name, name, str(exc)) from None
    return dict.fromkeys(known) | metadata.with_defaults(typed)


def is_public(metadata: FilterMetadata | None, name: str) -> bool:
    """Whether a parameter's value may be shown: declared by the filter and not ``secret``.

    A parameter the filter does not declare (a rule older than its metadata,
    a filter no longer registered) may have been a secret: it is not shown.
    """
    declared = metadata.param(name) if metadata is not None else None
    return declared is not None and not declared.secret


def public_params(metadata: FilterMetadata | None, params: Mapping[str, Any],
                  mask: str | None = None) -> dict[str, Any]:
    """``params`` as records, logs and answers may hold them (``is_public``).

    Without ``mask`` the other values are left out (an object's record keeps
    what undoing the filter needs, never a key); with it they are replaced
    by ``mask`` (an answer shows that the parameter was given).
    """
    if mask is None:
        return {k: v for k, v in params.items() if is_public(metadata, k)}
    return {k: v if is_public(metadata, k) else mask for k, v in params.items()}
