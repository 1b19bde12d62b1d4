"""Owner-only files, replaced atomically and durably: one writer for all of IOStack.

Much of what IOStack writes to disk holds credentials or keys (the
all-in-one's configs and secrets, the block bridge's volume records and
TCMU files, the storlet sandbox's uid table) or must survive a crash whole
(a node's policy snapshot, the controller's journal). Every such file is
written by ``write_private_text`` (or ``write_private_json``):

- the bytes go to a new temporary file beside the target, created 0600 and
  exclusively (``mkstemp``): never readable by others, not even between the
  write and a chmod, and never a leftover of another writer;
- the file is fsynced, renamed over the target, and the directory fsynced:
  after a crash a reader finds the old file or the new one, whole;
- a missing parent directory is created 0700; an existing one is left as it
  is (it may be the state dir, which the sandbox user must traverse).

``private_dir`` makes a directory only its owner can enter. Writers that
race for one target (a proxy's workers) must hold a lock of their own: the
last rename wins.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def private_dir(path: Path) -> Path:
    """``path`` as a directory only its owner can enter: created 0700, or tightened
    once if an earlier version left it looser."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o077:
        path.chmod(0o700)
    return path


def write_private_text(path: str | os.PathLike[str], text: str) -> None:
    """Replace ``path`` by ``text`` (UTF-8), owner-only, atomically and durably."""
    path = Path(path)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(partial, path)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def write_private_json(path: str | os.PathLike[str], data: Any, indent: int | None = 2) -> None:
    """``write_private_text`` of ``data`` as JSON (keys sorted; ``indent=None``: compact)."""
    separators = (",", ":") if indent is None else None
    write_private_text(path, json.dumps(data, indent=indent, sort_keys=True,
                                        separators=separators) + "\n")
