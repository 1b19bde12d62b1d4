"""The data source's reads from Swift: an object's first line, a byte range, a body
in chunks (authentication, listings and errors: ``iostack.select_client``)."""

from __future__ import annotations

import csv
import http.client
from collections.abc import Iterator

from iostack.select_client import IOStackError, http_get, object_path
from iostack.spark.options import Settings

HEADER_PROBE = 65536  # bytes fetched to read an object's header line
CHUNK = 1 << 20  # bytes per read of a response body


def header_line(storage_url: str, token: str, container: str, name: str,
                timeout: float = 60.0) -> list[str] | None:
    """The fields of an object's first line (None for an empty object)."""
    resp = http_get(storage_url, object_path(container, name),
                    {"X-Auth-Token": token, "Range": f"bytes=0-{HEADER_PROBE - 1}"},
                    timeout, f"{container}/{name}", ok=(200, 206, 416))
    data = resp.read() if resp.status != 416 else b""
    resp.close()
    if not data:
        return None
    line, newline, _ = data.partition(b"\n")
    if not newline and len(data) >= HEADER_PROBE:
        raise IOStackError(f"iostack: {container}/{name}: no line break in the first "
                           f"{HEADER_PROBE} bytes (not a CSV object with a header?)", 0, name)
    text = line.decode("utf-8").rstrip("\r")
    return next(csv.reader([text]), [])


def read_range(storage_url: str, token: str, settings: Settings, name: str,
          byte_range: str) -> bytes:
    resp = http_get(storage_url, object_path(settings.container, name),
                    {"X-Auth-Token": token, "Range": byte_range}, settings.timeout,
                    f"{settings.container}/{name}")
    try:
        return resp.read()
    finally:
        resp.close()


def response_chunks(resp: http.client.HTTPResponse) -> Iterator[bytes]:
    try:
        while True:
            chunk = resp.read(CHUNK)
            if not chunk:
                return
            yield chunk
    finally:
        resp.close()
