"""Per-tenant encryption keys derived from a root secret in a key file.

Config: the proxy's ``key_file`` option names a file holding at least 32
random bytes (``create_key_file`` makes one). The file must be a regular file
readable by its owner only; it is read once, when the provider is built.
Tenant keys are derived with HKDF-SHA256 (RFC 5869) from the root secret and
the account name, so no key is ever stored in Redis, in sysmeta or on the
object servers; the encryption filter derives a per-object key from the
tenant key and the object's random salt.
"""

from __future__ import annotations

import os
import stat

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from iostack.filters.errors import ConfigError

ROOT_SECRET_MIN_BYTES = 32
KEY_BYTES = 32  # AES-256
# A file of random bytes has many distinct byte values; one made of a repeated
# character or a short pattern has few (even a hex text has 16).
_MIN_DISTINCT_BYTES = 8


def hkdf(secret: bytes, info: bytes, salt: bytes | None = None) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=salt, info=info).derive(secret)


class KeyFileProvider:
    """Loads the root secret once and derives (and remembers) tenant keys."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._root = _read_root_secret(self.path)
        self._tenant_keys: dict[str, bytes] = {}

    def tenant_key(self, account: str) -> bytes:
        if not account:
            raise ConfigError("encryption needs the request's account to pick a key")
        key = self._tenant_keys.get(account)
        if key is None:
            key = hkdf(self._root, b"iostack/encryption/v1/tenant\0" + account.encode())
            self._tenant_keys[account] = key
        return key


def _read_root_secret(path: str) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise ConfigError(f"key file {path} does not exist (create it with "
                          f"iostack.filters.tenant_keys.create_key_file)") from None
    except OSError as exc:
        raise ConfigError(f"key file {path} cannot be opened: {exc.strerror}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_mode & 0o077:
        os.close(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"key file {path} is not a regular file")
        raise ConfigError(f"key file {path} is accessible by group or others "
                          f"(mode {stat.S_IMODE(info.st_mode):04o}); chmod 600 it")
    with os.fdopen(fd, "rb") as key_file:
        secret = key_file.read()
    if len(secret) < ROOT_SECRET_MIN_BYTES:
        raise ConfigError(f"key file {path} holds {len(secret)} bytes; "
                          f"at least {ROOT_SECRET_MIN_BYTES} random bytes are needed")
    if len(set(secret)) < _MIN_DISTINCT_BYTES:
        raise ConfigError(f"key file {path} does not look random "
                          f"(only {len(set(secret))} distinct byte values)")
    return secret


def create_key_file(path: str | os.PathLike[str]) -> None:
    """Write a new root secret, readable by the owner only; refuse to overwrite one."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as key_file:
        key_file.write(os.urandom(ROOT_SECRET_MIN_BYTES))
