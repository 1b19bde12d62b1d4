"""The channel check before every SBus message (``channels.send_checked``), on sockets in a
plain directory; the sandbox's own channels are in
tests/integration/storlet_runtime/test_storlet_hostile.py."""

from __future__ import annotations

import os
import socket

import pytest
from storlets.sbus import SBus
from storlets.sbus.datagram import SBusFileDescriptor, build_datagram
from storlets.sbus.file_description import SBUS_FD_SERVICE_OUT

from iostack.storlet_runtime.host import channels
from iostack.storlet_runtime.host.channels import ChannelError, send_checked
from iostack.storlet_runtime.host.config import DEFAULT_LIBSBUS


@pytest.fixture(autouse=True)
def libsbus(monkeypatch):
    monkeypatch.setattr(SBus, "SBUS_SO_NAME", str(DEFAULT_LIBSBUS))


@pytest.fixture
def channel(tmp_path):
    directory = tmp_path / "channels"
    directory.mkdir()
    channels.expect(str(directory), os.geteuid())
    yield directory
    channels._owners.pop(str(directory), None)


def listener(path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.setblocking(False)
    return sock


def ping():
    _read, write = os.pipe()
    return build_datagram("SBUS_CMD_PING", [SBusFileDescriptor(SBUS_FD_SERVICE_OUT, write)],
                          {}, None)


def test_a_socket_of_the_scopes_uid_gets_the_message(channel):
    with listener(channel / "factory_pipe") as sock:
        assert send_checked(str(channel / "factory_pipe"), ping()) >= 0
        assert sock.recv(4096)


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_a_socket_of_another_uid_gets_nothing(channel):
    with listener(channel / "factory_pipe") as sock:
        os.chown(channel / "factory_pipe", 65534, 65534)
        with pytest.raises(ChannelError, match="owned by uid 0, found a socket of uid 65534"):
            send_checked(str(channel / "factory_pipe"), ping())
        with pytest.raises(BlockingIOError):
            sock.recv(4096)


def test_a_symlink_is_refused_not_followed(channel, tmp_path):
    with listener(tmp_path / "elsewhere") as sock:
        os.symlink(tmp_path / "elsewhere", channel / "factory_pipe")
        with pytest.raises(ChannelError, match="no socket"):
            send_checked(str(channel / "factory_pipe"), ping())
        with pytest.raises(BlockingIOError):
            sock.recv(4096)


def test_a_path_outside_a_known_channel_is_refused(tmp_path):
    with listener(tmp_path / "stray"):
        with pytest.raises(ChannelError, match="not a channel of a running sandbox"):
            send_checked(str(tmp_path / "stray"), ping())


def test_a_missing_socket_is_upstreams_failed_send(channel):
    assert send_checked(str(channel / "gone"), ping()) < 0
