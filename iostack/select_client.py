"""A small client for IOStack's storage-side selection: ``iostack.select``.

One call reads the objects of a container (under a prefix) through the
record filters, asks for Arrow answers, and returns one ``pyarrow.Table``,
so DuckDB users (and pandas or Polars users, once those are installed: IOStack
does not install them) get the pushdown without Spark::

    import duckdb
    import iostack

    logs = iostack.select("logs", prefix="2024/", columns=["user_id", "status"],
                          where="status >= 500", auth_url="http://127.0.0.1:8080/auth/v1.0",
                          user="t1:alice", key="secret")
    duckdb.sql("SELECT user_id, count(*) AS n FROM logs GROUP BY 1 ORDER BY n DESC").show()

``format`` names the objects' format: ``csv`` (``csv_select``), ``parquet``
(``parquet_select``) or ``json`` (JSON Lines, ``json_select``); ``columns``
and ``where`` are those filters' parameters (``docs/filters.md``); ``stage``
(``proxy`` or ``object``) where the selection runs. Objects are read one
after the other; their answers are concatenated in listing order (types
unified where they differ, e.g. a JSON field that is null in one object).

The HTTP helpers here (Swift v1 auth, listings, GETs that raise
``IOStackError`` naming the object and Swift's message) also serve the Spark
data source (``iostack.spark``).
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import quote, urlencode, urlsplit

import pyarrow as pa

FILTERS = {"csv": "csv_select", "parquet": "parquet_select", "json": "json_select"}


class IOStackError(RuntimeError):
    """A failed request to Swift: ``status`` (0: no answer), ``obj`` and Swift's message."""

    def __init__(self, message: str, status: int = 0, obj: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.obj = obj



def _connection(url: str, timeout: float) -> tuple[http.client.HTTPConnection, str]:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"iostack: not an http(s) URL: {url!r}")
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    return cls(parts.netloc, timeout=timeout), parts.path.rstrip("/")


def http_get(url: str, path: str, headers: Mapping[str, str], timeout: float,
             what: str, ok: Sequence[int] = (200, 206)) -> http.client.HTTPResponse:
    """GET ``url`` + ``path`` (already quoted); an answer outside ``ok`` raises
    ``IOStackError`` naming ``what``, the status and Swift's message."""
    conn, base = _connection(url, timeout)
    try:
        conn.request("GET", base + path, headers=dict(headers))
        resp = conn.getresponse()
    except OSError as exc:
        conn.close()
        raise IOStackError(f"iostack: GET {what}: {exc}", 0, what) from exc
    if resp.status not in ok:
        body = resp.read(4096).decode("utf-8", "replace").strip()
        conn.close()
        raise IOStackError(f"iostack: GET {what}: {resp.status} {resp.reason}: {body}",
                           resp.status, what)
    return resp


class Credentials(Protocol):
    """Swift v1 (tempauth) credentials, or a storage URL and a token."""

    auth_url: str | None
    user: str | None
    key: str | None
    storage_url: str | None
    token: str | None
    timeout: float


@dataclass(frozen=True)
class Account:
    auth_url: str | None = None
    user: str | None = None
    key: str | None = field(default=None, repr=False)  # a secret: never in a repr
    storage_url: str | None = None
    token: str | None = field(default=None, repr=False)
    timeout: float = 60.0


def authenticate(settings: Credentials) -> tuple[str, str]:
    """``(storage_url, token)``: given, or from Swift v1 auth (``X-Auth-User``/``-Key``)."""
    if settings.storage_url and settings.token:
        return settings.storage_url.rstrip("/"), settings.token
    if not (settings.auth_url and settings.user and settings.key):
        raise ValueError("iostack: give storage_url and token, or auth_url, user and key")
    parts = urlsplit(settings.auth_url)
    resp = http_get(f"{parts.scheme}://{parts.netloc}",
                    parts.path + (f"?{parts.query}" if parts.query else ""),
                    {"X-Auth-User": settings.user, "X-Auth-Key": settings.key},
                    settings.timeout, f"auth {settings.auth_url}", ok=(200, 204))
    resp.read()
    resp.close()
    storage_url, token = resp.getheader("X-Storage-Url"), resp.getheader("X-Auth-Token")
    if not storage_url or not token:
        raise IOStackError(f"iostack: auth {settings.auth_url} gave no storage URL or token")
    return storage_url.rstrip("/"), token


def object_path(container: str, name: str) -> str:
    return "/" + quote(container, safe="") + "/" + quote(name, safe="/")


def list_objects(storage_url: str, token: str, container: str, prefix: str = "",
                 timeout: float = 60.0) -> list[tuple[str, int]]:
    """``(name, bytes)`` of the container's objects under ``prefix``, in listing order."""
    objects: list[tuple[str, int]] = []
    marker = ""
    while True:
        query = urlencode({"format": "json", "prefix": prefix, "marker": marker})
        resp = http_get(storage_url, "/" + quote(container, safe="") + "?" + query,
                        {"X-Auth-Token": token}, timeout, f"container {container}",
                        ok=(200, 204))
        body = resp.read()
        resp.close()
        page = json.loads(body) if body.strip() else []
        if not page:
            return objects
        objects += [(entry["name"], int(entry["bytes"])) for entry in page if "name" in entry]
        marker = page[-1].get("name") or page[-1].get("subdir", "")


def selection_request(data_format: str, columns: Sequence[str], where: str = "",
                      header: bool = True, answer: str = "arrow") -> dict[str, str]:
    """The headers of a storage-side selection answered in ``answer`` (Arrow)."""
    if data_format not in FILTERS:
        raise ValueError(f"iostack: format must be one of {', '.join(FILTERS)}, "
                         f"got {data_format!r}")
    headers = {"X-Iostack-Filter": FILTERS[data_format], "X-Iostack-Param-Output": answer,
               "X-Iostack-Param-Columns": ",".join(columns)}
    if data_format == "csv":
        headers["X-Iostack-Param-Header"] = "true" if header else "false"
    if where:
        headers["X-Iostack-Param-Where"] = where
    return headers


def read_arrow(resp: http.client.HTTPResponse, what: str) -> pa.Table:
    """An Arrow answer as a table; ``IOStackError`` if it was cut short."""
    try:
        with pa.ipc.open_stream(resp) as stream:
            return stream.read_all()
    except (pa.ArrowInvalid, OSError) as exc:
        raise IOStackError(f"iostack: GET {what}: the answer is incomplete: {exc}",
                           0, what) from exc
    finally:
        resp.close()


def select(container: str, prefix: str = "", *, columns: Sequence[str] = (), where: str = "",
           format: str = "csv", header: bool = True, stage: str | None = None,
           auth_url: str | None = None, user: str | None = None, key: str | None = None,
           storage_url: str | None = None, token: str | None = None,
           timeout: float = 60.0) -> pa.Table:
    """The selected rows of every object of ``container`` under ``prefix``, as one table."""
    url, token = authenticate(Account(auth_url, user, key, storage_url, token, timeout))
    headers = {"X-Auth-Token": token, "User-Agent": "iostack-select",
               **selection_request(format, columns, where, header)}
    if stage:
        headers["X-Iostack-Stage"] = stage
    tables = []
    for name, size in list_objects(url, token, container, prefix, timeout):
        if size <= 0:
            continue
        what = f"{container}/{name}"
        tables.append(read_arrow(http_get(url, object_path(container, name), headers,
                                          timeout, what, ok=(200,)), what))
    if not tables:
        return pa.table({name: pa.array([], pa.string()) for name in columns})
    return pa.concat_tables(tables, promote_options="permissive")
