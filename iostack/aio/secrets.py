"""Generated credentials of one all-in-one, kept in ``etc/secrets.json`` (mode 0600).

Generated on the first start and reused afterwards, so objects, tokens and
URLs stay valid across restarts. Nothing here is a well-known default.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

from iostack.private_files import write_private_json

SECRETS_FILE = "etc/secrets.json"
TENANTS = ("t1", "t2", "t3")


def _token() -> str:
    # Never a leading "-": a token given as a command-line value (``--token T``)
    # would be taken for an option (1 in 64 tokens was).
    while (token := secrets.token_urlsafe(24)).startswith("-"):
        pass
    return token


def load_or_create(state_dir: Path) -> dict[str, str]:
    """Return the stack's secrets, generating any that are missing."""
    path = state_dir / SECRETS_FILE
    data: dict[str, str] = {}
    if path.is_file():
        data = json.loads(path.read_text(encoding="utf-8"))
    wanted = ["swift_hash_path_prefix", "swift_hash_path_suffix", "admin_key", "controller_token"]
    wanted += [f"{tenant}_key" for tenant in TENANTS]
    # Keystone's (``auth = keystone``): its admin, the iostack service user, EC2 pairs.
    wanted += ["keystone_admin_password", "keystone_service_password"]
    wanted += [f"{tenant}_ec2_{part}" for tenant in TENANTS for part in ("access", "secret")]
    missing = [name for name in wanted if name not in data]
    if missing:
        data.update({name: _token() for name in missing})
        write_private_json(path, data)
    return data


def generated_secret(state_dir: Path, name: str) -> str:
    """A named secret for a component (e.g. a private Redis password), created on first use."""
    data = load_or_create(state_dir)
    if name not in data:
        data[name] = _token()
        write_private_json(state_dir / SECRETS_FILE, data)
    return data[name]
