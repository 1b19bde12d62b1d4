"""What the all-in-one writes is owner-only from the moment it exists (umask 0, no chmod).

Configs hold passwords and keys, logs quote requests: a file created with the
umask's mode and chmod'ed afterwards is readable by any local user in between.
"""

from __future__ import annotations

import stat
import sys
from pathlib import Path

from iostack.aio import secrets
from iostack.aio.config import AioConfig
from iostack.aio.processes import ProcessManager
from iostack.aio.swift import SwiftLayout
from iostack.private_files import write_private_json, write_private_text


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_generated_configs_and_secrets_are_created_private(tmp_path, no_chmod):
    state = tmp_path / "state"
    config = AioConfig.load(state, {"proxy_port": 18080})
    config.save()
    layout = SwiftLayout(config, secrets.load_or_create(state), "127.0.0.1:11211",
                         "redis://:pw@127.0.0.1:16379/0", "amqp://u:p@127.0.0.1:5672/%2F")
    layout.prepare()
    write_private_text(state / "etc" / "redis.conf", "requirepass pw\n")
    write_private_json(state / "rabbitmq" / "env.json", {"HOME": str(state)})
    private = [state / "etc" / "aio-config.json", state / secrets.SECRETS_FILE,
               state / "etc" / "redis.conf", state / "rabbitmq" / "env.json",
               layout.swift_dir / "swift.conf",
               *(layout.conf_path(server) for server in layout.servers)]
    assert {str(p): oct(mode(p)) for p in private} == {str(p): "0o600" for p in private}
    for directory in (state / "etc", layout.swift_dir, state / "rabbitmq"):
        assert mode(directory) == 0o700, directory


def test_a_leftover_temp_file_with_loose_mode_is_not_reused(tmp_path, no_chmod):
    target = tmp_path / "secret.json"
    leftover = target.with_suffix(".json.tmp")
    leftover.write_text("{}")
    assert mode(leftover) == 0o666
    write_private_json(target, {"password": "x"})
    assert mode(target) == 0o600


def test_process_logs_are_created_private(tmp_path, no_chmod):
    manager = ProcessManager(tmp_path / "state")
    manager.start("hello", [sys.executable, "-c", "print('a request line')"])
    log = manager.log_file("hello")
    assert mode(log) == 0o600
    assert mode(log.parent) == 0o700
    assert mode(manager.run_dir) == 0o700


def test_a_state_dir_from_an_earlier_version_is_tightened_but_stays_traversable(tmp_path):
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    state.chmod(0o755)
    for directory in ("etc", "log", "run"):
        (state / directory).mkdir(parents=True, mode=0o755)
        (state / directory).chmod(0o755)
    old_log = state / "log" / "hello.log"
    old_log.write_text("an old request line\n")
    old_log.chmod(0o644)
    AioConfig.load(state).save()
    manager = ProcessManager(state)
    manager.start("hello", [sys.executable, "-c", "print('a new request line')"])
    assert {d: mode(state / d) for d in ("etc", "log", "run")} == {
        "etc": 0o700, "log": 0o700, "run": 0o700}
    assert mode(old_log) == 0o600
    write_private_json(state / "aio.json", {})
    assert mode(state) == 0o755  # the sandbox user reaches state/storlets through it
