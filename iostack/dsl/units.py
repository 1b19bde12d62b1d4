"""Units on policy values.

A number in a policy may carry a unit; the DSL converts it to the base unit
that filter parameters and metrics are declared in:

- sizes in bytes: ``B``; binary ``K``/``KiB``, ``M``/``MiB``, ``G``/``GiB``,
  ``T``/``TiB`` (as Swift and ``dd`` read them); decimal ``KB``, ``MB``,
  ``GB``, ``TB``.
- rates in bytes per second: a size unit followed by ``ps`` or ``/s``
  (``30MBps`` is 30,000,000 bytes/s, ``10MiBps`` is 10 MiB/s).
- operation rates in operations per second: ``ops``, ``iops`` (``500ops``).
- durations in seconds: ``ms``, ``s``, ``min``, ``h``, ``d``.

Units are case-insensitive. A bare number has no unit and is taken in the base
unit of whatever it is compared with or assigned to.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SIZE_UNITS = {
    "b": 1,
    "k": 1024, "kib": 1024, "kb": 1000,
    "m": 1024**2, "mib": 1024**2, "mb": 1000**2,
    "g": 1024**3, "gib": 1024**3, "gb": 1000**3,
    "t": 1024**4, "tib": 1024**4, "tb": 1000**4,
}
OPS_UNITS = {"ops": 1, "iops": 1, "ops/s": 1, "iops/s": 1}
DURATION_UNITS = {"ms": 0.001, "s": 1, "sec": 1, "min": 60, "h": 3600, "d": 86400}

# What a value measures once its unit is known ("number" when it has none).
KINDS = ("number", "size", "rate", "ops", "duration")

_RATE = re.compile(r"^(?P<size>[a-z]+?)(?:ps|/s)$")


class UnitError(ValueError):
    """A unit the language does not know."""


@dataclass(frozen=True)
class Quantity:
    """A number converted to its base unit, with what it measures."""

    value: float
    kind: str

    @property
    def as_number(self) -> int | float:
        """The value as an int when it is integral (sizes, counts), else a float."""
        return int(self.value) if float(self.value).is_integer() else self.value


def parse_unit(number: float, unit: str | None) -> Quantity:
    """Convert ``number`` written with ``unit`` (or none) to a ``Quantity``."""
    if not unit:
        return Quantity(number, "number")
    key = unit.lower()
    if key in SIZE_UNITS:
        return Quantity(number * SIZE_UNITS[key], "size")
    if key in OPS_UNITS:
        return Quantity(number, "ops")
    if key in DURATION_UNITS:
        return Quantity(number * DURATION_UNITS[key], "duration")
    rate = _RATE.match(key)
    if rate and rate.group("size") in SIZE_UNITS:
        return Quantity(number * SIZE_UNITS[rate.group("size")], "rate")
    raise UnitError(
        f"unknown unit {unit!r} (sizes: K, MiB, GB...; rates: MBps, ops; durations: ms, s, min, h)"
    )
