"""Partition planning: one partition per object, or per ``split_size`` byte range of a
larger one (the storage side reads the records, or Parquet row groups, that start in
the range)."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql.datasource import InputPartition


class ObjectSplit(InputPartition):
    """Part of one object: the records that start in bytes ``[start, end]``
    (``end`` None: to the object's end)."""

    def __init__(self, name: str, start: int = 0, end: int | None = None) -> None:
        self.name = name
        self.start = start
        self.end = end

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectSplit) and vars(self) == vars(other)

    def __hash__(self) -> int:
        return hash((self.name, self.start, self.end))


def plan_partitions(objects: Sequence[tuple[str, int]], split_size: int) -> list[ObjectSplit]:
    """One partition per object, or per ``split_size`` bytes of a larger one; none for
    empty objects."""
    splits: list[ObjectSplit] = []
    for name, size in objects:
        if size <= 0:
            continue
        if size <= split_size:
            splits.append(ObjectSplit(name))
            continue
        for start in range(0, size, split_size):
            end = start + split_size - 1
            splits.append(ObjectSplit(name, start, None if end >= size - 1 else end))
    return splits


def split_range(split: ObjectSplit) -> str | None:
    if split.start == 0 and split.end is None:
        return None
    return f"bytes={split.start}-" + ("" if split.end is None else str(split.end))
