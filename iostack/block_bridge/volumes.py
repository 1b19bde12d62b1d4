"""Filtered volumes: a backing device, a filter stack and an iSCSI export.

``create`` checks everything first (name, stack spec through libiostack,
backing device, conflicts) and only then builds the export through the
service's exporter (``exporters``: FUSE + tgt, or LIO + TCMU) as LUN 1 of
target ``<iqn_prefix>:<name>``. A failure while building undoes the steps already
taken, so a volume exists completely or not at all.

Backing devices are files in the dedicated folder ``<state_dir>/block-images``
or under an operator-listed ``allowed_devices`` entry; nothing under the
bridge's own state (``<state_dir>/block``: ``volumes.json`` with the keys,
FUSE mounts, logs) is ever a backing device, whatever the operator lists,
and links are resolved before the check.

Volume records are kept in ``<state_dir>/block/volumes.json`` (JSON, mode
0600) and re-established when the service starts again; the backing device
keeps the filtered bytes, so data survive restarts. ``restore`` puts every
record through the same checks as ``create`` (name, stack, backing path,
conflicts) and skips, with a reason, whatever no longer passes them. What the service shows
(``describe``, errors) has secret filter arguments (the aes_xts key) masked;
only the 0600 records and the frontends' standard input hold them.
"""

from __future__ import annotations

import json
import os
import re
import stat
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from iostack.private_files import write_private_text

from .catalog import redact_spec, redact_text
from .native_lib import StackError, validate

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
BY_ID = Path("/dev/disk/by-id")
IMAGES = "block-images"  # under the state dir: the backing files the bridge may export


class VolumeError(Exception):
    """A request that cannot be carried out; ``kind`` says why."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind  # "invalid", "conflict", "not_found", "failed"


@dataclass
class VolumeRecord:
    name: str
    backing: str
    spec: str
    filters: list[str]
    tid: int
    iqn: str


def spec_from_filters(filters: object) -> tuple[str, list[str]]:
    """Konnector passes a list (["xor(key=0x5a)", "bitrev"]); a spec string
    ("xor(key=0x5a)>bitrev") is accepted too. Returns (spec, list)."""
    if isinstance(filters, str):
        items = [f.strip() for f in filters.split(">")] if filters.strip() else []
    elif isinstance(filters, list) and all(isinstance(f, str) for f in filters):
        items = [f.strip() for f in filters]
    else:
        raise VolumeError("invalid", "filters must be a list of filter strings or a spec")
    if any(not f or ">" in f for f in items):
        raise VolumeError("invalid", f"filters contain an empty or nested entry: {filters!r}")
    return ">".join(items), items


class VolumeManager:
    def __init__(self, state_dir: Path, exporter: Any, filter_dir: Path, iqn_prefix: str,
                 allowed_devices: list[str]) -> None:
        self.dir = state_dir / "block"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.images = state_dir / IMAGES
        self.images.mkdir(mode=0o700, exist_ok=True)
        self.own_state = Path(os.path.realpath(self.dir))
        self.exporter = exporter
        self.filter_dir = filter_dir
        self.iqn_prefix = iqn_prefix
        # Compared resolved, as the requested device is: a listed by-id link allows its disk.
        self.allowed_devices = [os.path.realpath(p) for p in (*allowed_devices, self.images)]
        self.lock = threading.Lock()
        self.records: dict[str, VolumeRecord] = {}

    # -- checks (no side effects) ------------------------------------------

    def _resolve_device(self, device: object, serial: object) -> Path:
        if (device is None) == (serial is None):
            raise VolumeError("invalid", "give exactly one of 'device' and 'serial'")
        if serial is not None:
            if not isinstance(serial, str) or not re.fullmatch(r"[A-Za-z0-9_.:-]+", serial):
                raise VolumeError("invalid", f"bad serial {serial!r}")
            matches = sorted(BY_ID.glob(f"*{serial}")) if BY_ID.is_dir() else []
            if len(matches) != 1:
                raise VolumeError("not_found" if not matches else "invalid",
                                  f"serial {serial!r} matches {len(matches)} devices")
            device = str(matches[0])
        if not isinstance(device, str) or not os.path.isabs(device):
            raise VolumeError("invalid", f"device must be an absolute path, got {device!r}")
        path = Path(os.path.realpath(device))
        if path.is_relative_to(self.own_state):
            raise VolumeError("invalid", f"device {path} is in the bridge's own state "
                                         f"({self.own_state}); backing files belong in "
                                         f"{self.images}")
        if not any(path.is_relative_to(prefix) for prefix in self.allowed_devices):
            raise VolumeError("invalid", f"device {path} is outside the allowed locations "
                                         f"{self.allowed_devices}")
        try:
            mode = path.stat().st_mode
        except OSError as exc:
            raise VolumeError("not_found", f"device {path}: {exc.strerror}") from None
        if not (stat.S_ISREG(mode) or stat.S_ISBLK(mode)):
            raise VolumeError("invalid", f"device {path} is not a block device or file")
        return path

    def _check(self, name: object, device: object, serial: object,
               filters: object) -> tuple[str, Path, str, list[str]]:
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise VolumeError("invalid", f"name must match {NAME_RE.pattern}, got {name!r}")
        spec, items = spec_from_filters(filters)
        try:
            validate(spec, self.filter_dir)
        except StackError as exc:
            raise VolumeError("invalid", redact_text(f"bad filters: {exc}", spec)) from None
        backing = self._resolve_device(device, serial)
        if name in self.records:
            raise VolumeError("conflict", f"volume {name!r} already exists")
        for other in self.records.values():
            if other.backing == str(backing):
                raise VolumeError("conflict", f"device {backing} is already used by volume "
                                              f"{other.name!r}")
        return name, backing, spec, items

    # -- building and tearing down ------------------------------------------

    def describe(self, record: VolumeRecord) -> dict:
        return {
            "name": record.name,
            "device": self.exporter.device(record.name),
            "backing": record.backing,
            "filters": [redact_spec(f) for f in record.filters],
            "spec": redact_spec(record.spec),
            "target_iqn": record.iqn,
            "lun": 1,
            "iscsi_url": self.exporter.url(record.iqn),
        }

    def _export(self, name: object, device: object, serial: object,
                filters: object) -> VolumeRecord:
        """Check, then export; the record is kept only once its export is up."""
        name, backing, spec, items = self._check(name, device, serial, filters)
        tid = max([r.tid for r in self.records.values()], default=0) + 1
        # IQNs allow only a-z, 0-9, '-', '.', ':' (RFC 3720).
        iqn = f"{self.iqn_prefix}:{name}".lower().replace("_", "-")
        if any(r.iqn == iqn for r in self.records.values()):
            raise VolumeError("conflict", f"volume {name!r} would reuse target {iqn}")
        record = VolumeRecord(name, str(backing), spec, items, tid, iqn)
        try:
            self.exporter.up(record)
        except Exception as exc:  # noqa: BLE001 - the RPC reports any exporter error
            raise VolumeError("failed", redact_text(
                f"could not export volume {name!r}: {exc}", spec)) from None
        self.records[name] = record
        return record

    def create(self, name: object, device: object = None, serial: object = None,
               filters: object = ()) -> dict:
        with self.lock:
            record = self._export(name, device, serial, filters)
            self._save()
            return self.describe(record)

    def targets(self) -> set[str]:
        """The IQNs this bridge exports (the initiator methods' whitelist)."""
        with self.lock:
            return {r.iqn for r in self.records.values()}

    def delete(self, name: object) -> None:
        with self.lock:
            if not isinstance(name, str) or name not in self.records:
                raise VolumeError("not_found", f"no volume {name!r}")
            try:
                self.exporter.down(self.records[name])
            except Exception as exc:  # noqa: BLE001 - the RPC reports any exporter error
                raise VolumeError("failed", f"could not unexport volume {name!r}: {exc}") \
                    from None
            del self.records[name]
            self._save()

    def list(self) -> list[dict]:
        with self.lock:
            return [self.describe(r) for r in self.records.values()]

    def restore(self) -> list[str]:
        """Re-export the volumes recorded by a previous run; returns problems."""
        path = self.dir / "volumes.json"
        problems = []
        if not path.exists():
            return problems
        entries = json.loads(path.read_text())
        for entry in entries if isinstance(entries, list) else [entries]:
            if not isinstance(entry, dict) or set(entry) != set(VolumeRecord.__annotations__):
                problems.append(f"volumes.json: skipped a malformed record ({type(entry)})")
                continue
            try:
                with self.lock:
                    self._export(entry["name"], entry["backing"], None, entry["filters"])
            except VolumeError as exc:
                problems.append(redact_text(f"volume {entry['name']!r} not restored: {exc}",
                                            str(entry["spec"])))
        with self.lock:
            self._save()
        return problems

    def shutdown(self) -> list[str]:
        """Stop every frontend (records stay for the next start); returns problems."""
        problems = []
        with self.lock:
            for name in self.exporter.exported():
                try:
                    self.exporter.down(self.records[name])
                except Exception as exc:  # noqa: BLE001 - report it, stop the others
                    problems.append(f"volume {name!r}: {exc}")
        return problems

    def _save(self) -> None:
        write_private_text(self.dir / "volumes.json",
                      json.dumps([asdict(r) for r in self.records.values()], indent=1))
