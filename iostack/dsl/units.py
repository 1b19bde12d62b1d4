"""Units on policy values.

A number in a policy may carry a unit; the DSL converts it to the base unit
that filter parameters and metrics are declared in:

- sizes in bytes: ``B``; binary ``K``/``KiB``, ``M``/``MiB``, ``G``/``GiB``,
  ``T``/``TiB`` (as Swift and ``dd`` read them); decimal ``KB``, ``MB``,
  ``GB``, ``TB``.
- rates in bytes per second: a size unit followed by ``ps`` or ``/s``
  (``30MBps`` is 30,000,000 bytes/s, ``10MiBps`` is 10 MiB/s).
- rates in bits per second, as network engineers write them: a lower-case
  ``b`` (``30Mbps``, ``1Gb/s``, ``100kbps``, ``bps``) or ``bit``
  (``30Mbit/s``) means bits and is converted to bytes/s (``30Mbps`` is
  3,750,000 bytes/s); the checker shows the conversion as a warning. A size
  in bits (``10Mb``) is refused with the byte spelling to use instead.
- operation rates in operations per second: ``ops``, ``iops`` (``500ops``).
- durations in seconds: ``ms``, ``s``, ``min``, ``h``, ``d``.

Units are case-insensitive except for that ``b``/``B``. A bare number has no
unit and is taken in the base unit of whatever it is compared with or
assigned to (the checker warns, naming that unit, where it is a rate or a
duration: ``get=30`` is 30 bytes/s, ``LATENCY > 200`` is 200 seconds).
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

_RATE = re.compile(r"^(?P<size>[a-z]+?)(?:ps|/s)$")
# Bits: a prefix and a lower-case "b" or "bit" (case matters here, and only here).
_BITS = re.compile(r"^(?P<prefix>[kKmMgGtT]i?)?(?:b|bit)(?P<rate>ps|/s)?$")
_BIT_PREFIXES = {"": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4,
                 "ki": 1024, "mi": 1024**2, "gi": 1024**3, "ti": 1024**4}


class UnitError(ValueError):
    """A unit the language does not know."""


@dataclass(frozen=True)
class Quantity:
    """A number converted to its base unit, with what it measures."""

    value: float
    kind: str
    bits: bool = False  # written in bits (converted to bytes): worth showing the user

    @property
    def as_number(self) -> int | float:
        """The value as an int when it is integral (sizes, counts), else a float."""
        return int(self.value) if float(self.value).is_integer() else self.value


def parse_unit(number: float, unit: str | None) -> Quantity:
    """Convert ``number`` written with ``unit`` (or none) to a ``Quantity``."""
    if not unit:
        return Quantity(number, "number")
    bits = _BITS.match(unit)
    if bits and (bits.group("prefix") or bits.group("rate")):
        return _bits(number, unit, bits)
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


def parse_size(text: str) -> int:
    """A size given outside a policy (CLI ``--size``, the console's explain form):
    plain bytes or a DSL size (``2M``, ``512K``)."""
    number = text.rstrip("bBkKmMgGtTiI")
    try:
        quantity = parse_unit(float(number), text[len(number):] or None)
    except ValueError:  # UnitError included
        raise UnitError(f"not a size: {text!r}") from None
    if quantity.kind not in ("size", "number") or quantity.value < 0:
        raise UnitError(f"not a size: {text!r}")
    return int(quantity.value)


def _bits(number: float, unit: str, match: re.Match) -> Quantity:
    """A bit rate in bytes/s; a size in bits is refused with its byte spellings."""
    prefix = (match.group("prefix") or "").lower()
    if not match.group("rate"):
        letter = prefix[0].upper()
        raise UnitError(
            f"{unit!r} is {'kilo mega giga tera'.split()['KMGT'.index(letter)]}bits; "
            f"sizes are in bytes: write {_num(number)}{letter}B (decimal) or "
            f"{_num(number)}{letter}iB (binary)")
    return Quantity(number * _BIT_PREFIXES[prefix] / 8, "rate", bits=True)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)
