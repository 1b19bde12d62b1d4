"""Private stacks start again on other ports when one was taken before a server bound it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from iostack.aio import session


class FakeAio:
    """``iostack aio`` whose starts fail as scripted: a failed start leaves ``log``."""

    def __init__(self, state_dir: Path, failures: list[str]) -> None:
        self.state_dir = state_dir
        self.failures = failures
        self.calls: list[tuple[str, tuple[str, ...]]] = []

    def __call__(self, verb: str, state_dir: Path, *extra: str) -> subprocess.CompletedProcess:
        self.calls.append((verb, extra))
        if verb == "start" and self.failures:
            (state_dir / "log").mkdir(parents=True, exist_ok=True)
            (state_dir / "log" / "block-bridge.log").write_text(self.failures.pop(0))
            return subprocess.CompletedProcess([], 1, "", "block-bridge exited")
        return subprocess.CompletedProcess([], 0, "{}", "")

    def ports(self) -> list[tuple[str, ...]]:
        return [extra for verb, extra in self.calls if verb == "start"]


@pytest.fixture
def fake_aio(monkeypatch, tmp_path):
    def install(failures: list[str]) -> FakeAio:
        fake = FakeAio(tmp_path / "aio", failures)
        monkeypatch.setattr(session, "aio_command", fake)
        return fake
    return install


def test_a_taken_port_starts_the_stack_again_on_other_ports(fake_aio, tmp_path):
    fake = fake_aio(["OSError: [Errno 98] Address already in use"])
    started = session.start_on_free_ports(tmp_path / "aio", "--nodes", "1")
    assert started.returncode == 0
    assert len(fake.ports()) == 2
    assert all(extra[:3] == ("--json", "--nodes", "1") for extra in fake.ports())
    # The failed attempt was stopped and purged before the next one.
    verbs = [(verb, extra) for verb, extra in fake.calls if verb == "stop"]
    assert verbs == [("stop", ()), ("stop", ("--purge",))]


def test_another_failure_is_not_retried_and_keeps_its_logs(fake_aio, tmp_path):
    fake = fake_aio(["ValueError: bad config"])
    started = session.start_on_free_ports(tmp_path / "aio")
    assert started.returncode == 1
    assert len(fake.ports()) == 1
    assert (tmp_path / "aio" / "log" / "block-bridge.log").is_file()


def test_ports_taken_every_time_give_up_after_the_last_attempt(fake_aio, tmp_path):
    fake = fake_aio(["Address already in use"] * session.START_ATTEMPTS)
    started = session.start_on_free_ports(tmp_path / "aio")
    assert started.returncode == 1
    assert len(fake.ports()) == session.START_ATTEMPTS
