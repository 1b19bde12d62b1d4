"""JSON from untrusted peers, with a bound on how deeply it nests.

``json.loads`` recurses once per nesting level: a body of a few thousand
``[`` raises ``RecursionError``, which is not a ``ValueError``, so callers
that catch parse errors let it escape (the block bridge's JSON-RPC handler
dropped the connection; a metrics consumer lost its queue and reconnected).
A document that parses but nests hundreds of levels deep trips the same
limit later, in whatever walks it (``repr``, ``json.dumps``, a handler).

``loads`` turns both into a ``ValueError`` naming the limit: nothing any
IOStack peer sends legitimately nests deeper than ``MAX_DEPTH`` levels.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 32


class TooDeep(ValueError):
    """The document nests deeper than allowed."""


def loads(data: bytes | str, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` that raises ``ValueError`` (``TooDeep``) past ``max_depth`` levels."""
    try:
        value = json.loads(data)
    except RecursionError:
        raise TooDeep(f"JSON nested deeper than {max_depth} levels") from None
    check_depth(value, max_depth)
    return value


def check_depth(value: Any, max_depth: int = MAX_DEPTH) -> None:
    """Raise ``TooDeep`` if containers nest deeper than ``max_depth`` (iteratively:
    the check itself must not recurse)."""
    pending = [(value, 1)] if isinstance(value, (dict, list)) else []
    while pending:
        item, depth = pending.pop()
        children = item.values() if isinstance(item, dict) else item
        if depth > max_depth:
            raise TooDeep(f"JSON nested deeper than {max_depth} levels")
        pending.extend((child, depth + 1) for child in children
                       if isinstance(child, (dict, list)))

