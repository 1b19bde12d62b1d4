"""What a workload metric is: its name, what it measures, and what it means.

Metrics are declared where they are computed (``aggregator.METRICS``) and in
the controller's metric registry (metrics a deployment adds), and judged by
the policy language, whose ``WHEN`` clauses compare them with values carrying
units: so the declaration lives here, on the shared side, and the DSL reads
it (``iostack.dsl.vocabulary``, ``iostack.dsl.units``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# What a value measures once its unit is known ("number" when it has none).
KINDS = ("number", "size", "rate", "ops", "duration")


@dataclass(frozen=True)
class Metric:
    """A workload metric a ``WHEN`` clause may test; ``kind`` is one of ``KINDS``."""

    name: str
    kind: str = "number"
    description: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"metric {self.name!r}: kind must be one of {', '.join(KINDS)}")

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "description": self.description}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Metric:
        return cls(str(data["name"]).upper(), data.get("kind", "number"),
                   data.get("description", ""))
