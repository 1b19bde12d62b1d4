"""IOStack's one writer of owner-only files, and its loopback port helpers."""

from __future__ import annotations

import json
import os
import socket
import stat
import threading

import pytest

from iostack import private_files
from iostack.ports import NoFreePortError, free_port, port_open, wait_until
from iostack.private_files import private_dir, write_private_json, write_private_text


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_file_is_private_from_its_creation_and_its_new_directory_too(tmp_path, no_chmod):
    target = tmp_path / "new" / "secret.conf"
    write_private_text(target, "password = x\n")
    assert target.read_text() == "password = x\n"
    assert (mode(target), mode(target.parent)) == (0o600, 0o700)
    assert private_dir(tmp_path / "d") == tmp_path / "d" and mode(tmp_path / "d") == 0o700


def test_a_failed_write_leaves_the_old_file_whole_and_no_temporary_behind(tmp_path):
    target = tmp_path / "state.json"
    write_private_json(target, {"version": 1})
    with pytest.raises(UnicodeEncodeError):
        write_private_text(target, "half \ud800 written")
    assert json.loads(target.read_text()) == {"version": 1}
    assert os.listdir(tmp_path) == ["state.json"]


def test_writers_in_parallel_never_mix_and_leave_nothing_behind(tmp_path):
    target = tmp_path / "table.json"
    bodies = [{"writer": n, "pad": "x" * 50_000} for n in range(8)]
    threads = [threading.Thread(target=write_private_json, args=(target, body, None))
               for body in bodies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert json.loads(target.read_text()) in bodies
    assert os.listdir(tmp_path) == ["table.json"]


def test_the_file_and_its_rename_are_synced(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        real_fsync(fd)

    monkeypatch.setattr(private_files.os, "fsync", fsync)
    write_private_text(tmp_path / "journal.json", "{}")
    assert synced == [False, True]  # the file's bytes, then the directory's entry


def test_free_port_skips_what_listens_and_what_is_reserved():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        taken = server.getsockname()[1]
        assert port_open("127.0.0.1", taken)
        chosen = free_port(taken)
        assert chosen != taken
        assert free_port(chosen, avoid=frozenset({chosen})) != chosen
    assert wait_until(lambda: not port_open("127.0.0.1", taken), 5)


def test_free_port_says_when_the_kernel_offers_only_reserved_ports(monkeypatch):
    monkeypatch.setattr(socket.socket, "getsockname", lambda self: ("127.0.0.1", 4242))
    with pytest.raises(NoFreePortError, match="no free TCP port on 127.0.0.1"):
        free_port(avoid=frozenset({4242}))
