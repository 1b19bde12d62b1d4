"""The initiator methods reach only the bridge's own portal and targets
(``iscsiadm`` replaced by a recorder: these tests must not touch the
host's initiator)."""

from __future__ import annotations

import pytest

from iostack.block_bridge import initiator
from iostack.block_bridge.initiator import Initiator, InitiatorError

OWN = "iqn.2026-11.org.iostack:vol1"
FOREIGN = "iqn.2001-04.com.example:host-root-disk"
SESSIONS = (f"tcp: [1] 127.0.0.1:3260,1 {OWN} (non-flash)\n"
            f"tcp: [2] 10.0.0.9:3260,1 {FOREIGN} (non-flash)\n")


@pytest.fixture
def calls(monkeypatch):
    ran: list[list[str]] = []

    def run(argv):
        ran.append(argv)
        return SESSIONS if argv[-2:] == ["-m", "session"] else ""

    monkeypatch.setattr(initiator, "_run", run)
    monkeypatch.setattr(initiator, "_iscsiadm", lambda: "iscsiadm")
    monkeypatch.setattr(initiator, "_sendtargets", lambda host, port: [])
    return ran


@pytest.fixture
def methods():
    return Initiator("127.0.0.1", 3260, lambda: {OWN}).methods()


def test_logout_all_targets_logs_out_only_the_bridges_sessions(calls, methods):
    """Security regression: it ran ``iscsiadm --logoutall=all``, dropping every
    iSCSI session on the host (its root disk's included)."""
    methods["logout_all_targets"]({})
    assert calls[1:] == [["iscsiadm", "-m", "node", "-T", OWN, "-p", "127.0.0.1:3260",
                          "--logout"]]
    assert methods["display_session"]({}) == [SESSIONS.splitlines()[0]]


@pytest.mark.parametrize(("method", "params", "text"), [
    ("discover_portal", {"hostname": "10.0.0.9"}, "not this bridge's"),
    ("discover_portal", {"hostname": "127.0.0.1", "port": 22}, "not this bridge's"),
    ("login_target", {"targetname": FOREIGN}, "not one of this bridge's volumes"),
    ("logout_target", {"targetname": FOREIGN, "hostname": "127.0.0.1"}, "not one of"),
    ("login_target", {"targetname": OWN, "hostname": "10.0.0.9"}, "not this bridge's"),
])
def test_foreign_portals_and_targets_are_refused(calls, methods, method, params, text):
    """Security regression: any host and any target went to iscsiadm."""
    with pytest.raises(InitiatorError) as err:
        methods[method](params)
    assert err.value.kind == "invalid" and text in str(err.value)
    assert calls == []


def test_own_portal_and_targets_are_served(calls, methods):
    assert methods["discover_portal"]({}) == {}
    methods["login_target"]({"targetname": OWN})
    assert calls == [["iscsiadm", "-m", "node", "-T", OWN, "-p", "127.0.0.1:3260", "--login"]]
