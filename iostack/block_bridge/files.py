"""Files of the block bridge that hold secrets (config, volume records, TCMU
volume files: passwords and filter keys) are written 0600 from the start
and replaced atomically, never chmod'ed after the bytes are on disk."""

from __future__ import annotations

import os
from pathlib import Path


def write_private(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)  # O_CREAT keeps the mode of a file left behind
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
