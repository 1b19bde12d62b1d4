"""Logical vs stored bytes per tenant and container, from a scan of what is stored.

Listings show what tenants stored (IOStack overrides their sizes), so the
stored bytes come from one raw HEAD per object. A scan is linear in the
number of objects; the answer says when it was taken and how long it took,
and the last one is kept in the state dir (``iostack usage --cached`` shows
it with its age instead of scanning again).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from iostack.atrest import scan
from iostack.atrest.inspect import stored_object
from iostack.atrest.swift_access import SwiftAccess

USAGE_FILE = "usage.json"
Progress = Callable[[int], None]


def _row(account: str, container: str | None) -> dict[str, Any]:
    return {"account": account, "container": container, "objects": 0, "filtered_objects": 0,
            "logical_bytes": 0, "stored_bytes": 0}


def _add(row: dict[str, Any], logical: int, stored: int, filtered: bool) -> None:
    row["objects"] += 1
    row["filtered_objects"] += int(filtered)
    row["logical_bytes"] += logical
    row["stored_bytes"] += stored


def scan_usage(access: SwiftAccess, target: scan.Target, known_accounts: Iterable[str],
               progress: Progress | None = None) -> dict[str, Any]:
    """Per container and per account: objects, logical and stored bytes."""
    started = time.time()
    containers: dict[tuple[str, str], dict[str, Any]] = {}
    tenants: dict[str, dict[str, Any]] = {}
    for account, container, entry, headers in scan.with_headers(
            access, scan.objects(access, target, known_accounts)):
        if headers is None:
            continue  # deleted since the listing
        stored = stored_object(account, container, entry["name"], headers)
        for row in (containers.setdefault((account, container), _row(account, container)),
                    tenants.setdefault(account, _row(account, None))):
            _add(row, stored.logical_bytes, stored.stored_bytes, stored.filtered)
        if progress:
            progress(sum(t["objects"] for t in tenants.values()))
    return {"target": str(target), "scanned_at": started,
            "scan_seconds": round(time.time() - started, 3), "age_seconds": 0.0,
            "tenants": [tenants[a] for a in sorted(tenants)],
            "containers": [containers[k] for k in sorted(containers)]}


def save(result: dict[str, Any], state_dir: Path) -> None:
    directory = state_dir / "atrest"
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = directory / f".{USAGE_FILE}.{os.getpid()}"
    tmp.write_text(json.dumps(result), "utf-8")
    tmp.replace(directory / USAGE_FILE)


def load(state_dir: Path) -> dict[str, Any]:
    """The last scan, with its age; ``FileNotFoundError`` if none was kept."""
    result = json.loads((state_dir / "atrest" / USAGE_FILE).read_text("utf-8"))
    result["age_seconds"] = round(time.time() - result["scanned_at"], 1)
    return result
