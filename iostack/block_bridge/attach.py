"""Which filter stack a volume gets when it is attached.

A ``create_filtered_volume`` call may name its stack itself (``filters``,
as Konnector clients do) or leave it to policy: then the bridge asks the
controller which stack ``FOR VOLUME v`` and ``FOR STORAGE_GROUP g`` policies
resolve to for that volume (``GET /v1/volumes/<v>/stack?storage_group=g``,
the admin-only answer that keeps secret parameters such as an aes_xts key
in clear; ``explain`` masks them) and adds the group's IOPS/MBps limits on
top (``groups.attach_spec``).

``StorageGroups`` keeps the groups this bridge serves (name, storage nodes,
media tier, fabric, limits) in ``<state_dir>/block/groups.json``.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from iostack.controller.client import ControllerClient, ControllerError

from .groups import GroupError, StorageGroup, attach_spec
from .native_lib import StackError
from .volumes import VolumeError


class StorageGroups:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.groups: dict[str, StorageGroup] = {}
        if path.is_file():
            for data in json.loads(path.read_text(encoding="utf-8")):
                group = StorageGroup.from_json(data)
                self.groups[group.name] = group

    def create(self, data: dict[str, Any]) -> StorageGroup:
        try:
            group = StorageGroup.from_json(data)
        except GroupError as exc:
            raise VolumeError("invalid", str(exc)) from None
        with self.lock:
            if group.name in self.groups:
                raise VolumeError("conflict", f"storage group {group.name!r} exists")
            self.groups[group.name] = group
            self._save()
        return group

    def delete(self, name: str) -> None:
        with self.lock:
            if self.groups.pop(name, None) is None:
                raise VolumeError("not_found", f"no storage group {name!r}")
            self._save()

    def get(self, name: object) -> StorageGroup:
        group = self.groups.get(name) if isinstance(name, str) else None
        if group is None:
            raise VolumeError("not_found", f"no storage group {name!r}")
        return group

    def list(self) -> list[dict[str, Any]]:
        return [g.to_json() for g in sorted(self.groups.values(), key=lambda g: g.name)]

    def _save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.list(), indent=1), encoding="utf-8")
        os.replace(tmp, self.path)


class PolicyStacks:
    """The controller's answer for a volume, as a stack spec."""

    def __init__(self, controller_url: str, token: str) -> None:
        self.client = ControllerClient(controller_url, token)

    def spec(self, volume: str, group: StorageGroup | None) -> str:
        try:
            resolved = self.client.volume_stack(volume, group.name if group else None)
        except ControllerError as exc:
            raise VolumeError("failed", f"asking the controller for {volume!r}'s policies: "
                                        f"{exc}") from None
        try:
            return attach_spec(group, resolved["pipeline"])
        except StackError as exc:  # a policy value no stack spec can carry
            raise VolumeError("invalid", f"{volume!r}'s policies: {exc}") from None


def with_group_limits(group: StorageGroup | None, filters: object) -> object:
    """An explicit stack, under the group's limits (if it has any)."""
    limits = attach_spec(group, []) if group else ""
    if not limits:
        return filters
    stack = ">".join(filters) if isinstance(filters, list) else filters
    return f"{limits}>{stack}" if stack else limits
