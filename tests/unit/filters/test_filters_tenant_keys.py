"""The key-file provider refuses weak or exposed root secrets and derives stable tenant keys."""

from __future__ import annotations

import os

import pytest

from iostack.filters.errors import ConfigError
from iostack.filters.tenant_keys import KeyFileProvider, create_key_file


def write_key(path, data: bytes, mode: int = 0o600) -> None:
    path.write_bytes(data)
    os.chmod(path, mode)


def test_created_key_file_is_private_and_random(tmp_path):
    path = tmp_path / "root.key"
    create_key_file(path)
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert len(path.read_bytes()) == 32
    with pytest.raises(FileExistsError):
        create_key_file(path)


def test_tenant_keys_are_stable_distinct_and_32_bytes(tmp_path):
    path = tmp_path / "root.key"
    create_key_file(path)
    first, second = KeyFileProvider(path), KeyFileProvider(path)
    assert first.tenant_key("AUTH_t1") == second.tenant_key("AUTH_t1")
    assert first.tenant_key("AUTH_t1") != first.tenant_key("AUTH_t2")
    assert len(first.tenant_key("AUTH_t1")) == 32
    assert first.tenant_key("AUTH_t1") not in path.read_bytes()


def test_the_file_is_read_once(tmp_path):
    path = tmp_path / "root.key"
    create_key_file(path)
    provider = KeyFileProvider(path)
    key = provider.tenant_key("AUTH_t9")
    path.unlink()
    assert provider.tenant_key("AUTH_t9") == key
    assert len(provider.tenant_key("AUTH_new")) == 32


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda p: None, "does not exist"),
        (lambda p: write_key(p, os.urandom(32), 0o640), "accessible by group or others"),
        (lambda p: write_key(p, os.urandom(32), 0o604), r"chmod 600"),
        (lambda p: write_key(p, os.urandom(31)), "holds 31 bytes; at least 32"),
        (lambda p: write_key(p, b"a" * 64), "does not look random"),
        (lambda p: write_key(p, b"abab" * 16), "only 2 distinct"),
        (lambda p: p.mkdir(mode=0o700), "not a regular file"),
    ],
)
def test_unusable_key_files_are_refused_with_the_reason(tmp_path, setup, message):
    path = tmp_path / "root.key"
    setup(path)
    with pytest.raises(ConfigError, match=message):
        KeyFileProvider(path)


def test_a_symlinked_key_file_is_refused(tmp_path):
    real = tmp_path / "real.key"
    create_key_file(real)
    link = tmp_path / "root.key"
    link.symlink_to(real)
    with pytest.raises(ConfigError, match="cannot be opened"):
        KeyFileProvider(link)


def test_a_request_without_an_account_gets_no_key(tmp_path):
    path = tmp_path / "root.key"
    create_key_file(path)
    with pytest.raises(ConfigError, match="account"):
        KeyFileProvider(path).tenant_key("")
