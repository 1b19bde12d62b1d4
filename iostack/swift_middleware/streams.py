"""Helpers for response bodies that the IOStack middlewares share."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from swift.common.utils import close_if_possible


def closing(chunks: Iterator[bytes], source: Any) -> Iterator[bytes]:
    """``chunks``, then ``source`` closed (however the iteration ends)."""
    try:
        yield from chunks
    finally:
        close_if_possible(source)
