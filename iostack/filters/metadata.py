"""What a filter declares about itself.

The controller checks policies against this metadata (parameter names, types
and ranges, which requests a filter applies to, where it may run, ordering
and conflicts), and the data path uses it to place and order filters. It is
stored in Redis as JSON (``to_json``/``from_json``): never pickled.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

PARAM_TYPES = ("int", "float", "str", "bool", "enum", "size", "rate", "duration", "secret")
STAGES = ("proxy", "object")
METHODS = ("GET", "PUT", "HEAD", "POST", "DELETE")


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
