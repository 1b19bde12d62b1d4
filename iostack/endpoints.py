"""Finding the running stack: its state dir and the ``aio.json`` that describes it.

The all-in-one (``iostack.aio``) writes ``aio.json`` (endpoints and
credentials) into its state dir (default ``.iostack/`` in the checkout, or
``$IOSTACK_STATE_DIR``); the CLIs, the test fixtures and the benchmarks read
it with ``load_aio_info``. This module is that meeting point, so that a
client finds the stack without importing the code that runs it.
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
    checkout = Path(__file__).resolve().parents[1]
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
