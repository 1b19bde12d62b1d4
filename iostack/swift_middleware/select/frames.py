"""How a proxy asks object servers to select records, and how they answer.

The proxy's ``iostack_select`` sends its GET with ``X-Backend-Iostack-Select``:
JSON ``{"filters": [{"name": ..., "params": {...}}, ...], "start": S, "end": E}``
(``end`` null for "to the end"). An object server whose pipeline has
``iostack_select_object`` answers in one of three ways:

- ``X-Backend-Iostack-Selected: frames``: the selection, framed (below);
- ``X-Backend-Iostack-Select-Declined: <reason>`` and an empty body: it
  cannot select this object (its bytes are encoded by proxy-stage filters,
  it is a large-object manifest or a symlink ...); the proxy selects;
- anything else (an object server without the middleware answers with the
  object): the proxy closes it and selects itself.

Frames make the object server's answer self-checking and keep the proxy's
read timeout fed: each is a 9-byte header (kind, payload length as a
big-endian 64-bit integer) and the payload. ``D`` carries selected bytes;
``P`` is padding, sent first (so the response headers leave at once) and
whenever the selection has been quiet a while (a selective predicate over a
large object); ``E`` carries ``{"status": ..., "message": ...}`` and ends
the answer; ``Z`` ends a complete answer. An answer that stops without
``E`` or ``Z`` is incomplete, and the proxy cuts its client's answer short.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Iterator
from typing import Any

from iostack.swift_middleware.select.engine import SelectError

SELECT_HEADER = "X-Backend-Iostack-Select"
BACKEND_SELECTED_HEADER = "X-Backend-Iostack-Selected"
DECLINED_HEADER = "X-Backend-Iostack-Select-Declined"
FRAMES = "frames"

_HEADER = struct.Struct(">cQ")
DATA, PADDING, ERROR, END = b"D", b"P", b"E", b"Z"


class IncompleteAnswer(OSError):
    """An object server's framed answer stopped before its end."""


def select_request(filters: list[tuple[str, dict[str, Any]]], start: int,
                   end: int | None) -> str:
    return json.dumps({"filters": [{"name": n, "params": p} for n, p in filters],
                       "start": start, "end": end}, separators=(",", ":"))


def parse_select_request(text: str) -> tuple[list[tuple[str, dict[str, Any]]], int, int | None]:
    """``(filters, start, end)`` of a request header; ``ValueError`` if malformed."""
    try:
        data = json.loads(text)
        filters = [(str(f["name"]), dict(f["params"])) for f in data["filters"]]
        start, end = int(data["start"]), data["end"]
        end = None if end is None else int(end)
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"bad {SELECT_HEADER}: {exc}") from None
    if not filters or start < 0 or (end is not None and end < start):
        raise ValueError(f"bad {SELECT_HEADER}: no filters or an empty range")
    return filters, start, end


def frame(kind: bytes, payload: bytes = b"") -> bytes:
    return _HEADER.pack(kind, len(payload)) + payload


def error_frame(status: int, message: str) -> bytes:
    return frame(ERROR, json.dumps({"status": status, "message": message}).encode())


def read_frames(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The selected bytes of a framed answer (padding dropped).

    Raises ``SelectError`` for an ``E`` frame and ``IncompleteAnswer`` when
    the stream ends before ``Z``.
    """
    held = bytearray()
    source = iter(chunks)
    while True:
        while len(held) >= _HEADER.size:
            kind, length = _HEADER.unpack_from(held)
            if len(held) < _HEADER.size + length:
                break
            payload = bytes(held[_HEADER.size:_HEADER.size + length])
            del held[:_HEADER.size + length]
            if kind == DATA:
                yield payload
            elif kind == ERROR:
                detail = json.loads(payload)
                raise SelectError(int(detail["status"]), str(detail["message"]))
            elif kind == END:
                return
            elif kind != PADDING:
                raise IncompleteAnswer(f"unknown frame kind {kind!r}")
        chunk = next(source, None)
        if chunk is None:
            raise IncompleteAnswer("the object server's answer stopped before its end")
        held += chunk
