"""Storage groups and their policies (IOStack D3.2, section 4).

A storage group is a named set of storage nodes with one policy: the media
tier and fabric volumes are provisioned on, and the consumer-node part, the
filter stack built when a volume of the group is attached, plus the IOPS
and MB/s each volume may use. The stack part is what ``FOR STORAGE_GROUP g``
policies express in the DSL; ``attach_spec`` puts a group's limits together
with the stack the controller resolved for a volume (group rules, then the
volume's own), the limits filling in only what no policy set.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from .catalog import spec_from_pipeline

MEDIA_TIERS = ("nvme", "ssd", "hdd", "hybrid")
FABRICS = ("iscsi", "fc", "nvmeof", "local")
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")


class GroupError(ValueError):
    pass


@dataclass(frozen=True)
class GroupPolicy:
    media_tier: str = "ssd"
    fabric: str = "iscsi"
    iops: int = 0  # per volume, read and write each; 0 = unlimited
    mbps: int = 0  # MiB/s per volume, read and write each; 0 = unlimited

    def __post_init__(self) -> None:
        if self.media_tier not in MEDIA_TIERS:
            raise GroupError(f"media_tier {self.media_tier!r}: one of {', '.join(MEDIA_TIERS)}")
        if self.fabric not in FABRICS:
            raise GroupError(f"fabric {self.fabric!r}: one of {', '.join(FABRICS)}")
        for key in ("iops", "mbps"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise GroupError(f"{key} must be a whole number >= 0, got {value!r}")


@dataclass(frozen=True)
class StorageGroup:
    name: str
    nodes: tuple[str, ...]
    policy: GroupPolicy = field(default_factory=GroupPolicy)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise GroupError(f"bad storage group name {self.name!r}")
        if not self.nodes or not all(isinstance(n, str) and n for n in self.nodes):
            raise GroupError(f"storage group {self.name!r} needs at least one storage node")

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "nodes": list(self.nodes), "policy": asdict(self.policy)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StorageGroup:
        unknown = set(data) - {"name", "nodes", "policy"}
        if unknown:
            raise GroupError(f"unknown storage group fields {sorted(unknown)}")
        policy = data.get("policy", {})
        if not isinstance(policy, Mapping):
            raise GroupError("policy must be an object")
        try:
            return cls(data.get("name"), tuple(data.get("nodes", ())), GroupPolicy(**policy))
        except TypeError as exc:
            raise GroupError(f"bad policy: {exc}") from None


def attach_spec(group: StorageGroup | None, pipeline: Iterable[Mapping[str, Any]]) -> str:
    """The stack spec built when a volume is attached: the controller's
    resolved pipeline, with the group's IOPS/MBps limits on top unless a
    policy already set that limit filter."""
    entries = list(pipeline)
    present = {e["filter"] for e in entries}
    limits = []
    if group and group.policy.iops and "iops" not in present:
        n = group.policy.iops
        limits.append({"filter": "iops", "params": {"read": n, "write": n}})
    if group and group.policy.mbps and "bw" not in present:
        n = group.policy.mbps << 20
        limits.append({"filter": "bw", "params": {"read": n, "write": n}})
    return spec_from_pipeline(limits + entries)
