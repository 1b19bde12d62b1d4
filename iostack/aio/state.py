"""Writing the all-in-one's state dir: private directories and files.

The state dir (found with ``iostack.endpoints``: default ``.iostack/`` in the
checkout, or ``$IOSTACK_STATE_DIR``) holds the generated configs, secrets,
logs, pid files and data of one all-in-one; what is written there may hold
credentials, so it is written owner-only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def private_dir(path: Path) -> Path:
    """``path`` as a directory only its owner can enter: created 0700, or tightened
    once if an earlier version left it looser."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o077:
        path.chmod(0o700)
    return path


def write_private_text(path: Path, text: str) -> None:
    """Write a file readable by the owner only, atomically.

    The file is created 0600 (never readable by others, not even between
    writing and a chmod); a missing directory is created 0700. An existing
    one is left as it is: it may be the state dir, which the sandbox user
    must traverse.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.unlink(missing_ok=True)  # a leftover could have looser permissions
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def write_private_json(path: Path, data: dict[str, Any]) -> None:
    """Write JSON readable by the owner only (it may hold credentials), atomically."""
    write_private_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
