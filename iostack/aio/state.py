"""Where the all-in-one keeps its state, and how other tools find it.

The state dir (default ``.iostack/`` in the checkout, or ``$IOSTACK_STATE_DIR``)
holds the generated configs, secrets, logs, pid files and data of one
all-in-one. ``aio.json`` in it describes the running stack (endpoints and
credentials); clients such as the CLI and the test fixtures read it with
``load_aio_info``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

AIO_INFO_FILE = "aio.json"


class AioNotRunning(RuntimeError):
    """No all-in-one description in the state dir."""


def default_state_dir() -> Path:
    env = os.environ.get("IOSTACK_STATE_DIR")
    if env:
        return Path(env).resolve()
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "pyproject.toml").is_file():
        return checkout / ".iostack"
    return Path.cwd() / ".iostack"


def resolve_state_dir(state_dir: str | os.PathLike[str] | None = None) -> Path:
    return Path(state_dir).resolve() if state_dir else default_state_dir()


def aio_info_path(state_dir: str | os.PathLike[str] | None = None) -> Path:
    return resolve_state_dir(state_dir) / AIO_INFO_FILE


def load_aio_info(state_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Return the running all-in-one's description (``aio.json``)."""
    path = aio_info_path(state_dir)
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise AioNotRunning(f"no all-in-one found ({path} is missing): run 'make run'") from None


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
