"""Reading the all-in-one's state files as a release that may be older than their writer.

An operator who upgrades and then rolls back runs the older release on a
state dir the newer one wrote: a record there may carry fields this
release does not know (``etc/services.json`` gained ``members`` for the
cluster mode's Redis set). Such fields are ignored, not fatal: the older
release keeps what it understands and works as it did. A field it needs
and does not find is still an error (the file is damaged, or older than
that field's default can stand in for).
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")


def from_saved(cls: type[T], data: dict[str, Any]) -> T:
    """``cls(**data)`` for a dataclass, without the fields ``cls`` does not declare."""
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return cls(**{name: value for name, value in data.items() if name in known})
