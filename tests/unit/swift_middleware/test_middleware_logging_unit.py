"""The middlewares log through Swift's ``get_logger``: each line carries the transaction id."""

from __future__ import annotations

import logging

import pytest
from swift.common.utils import SwiftLogFormatter

from iostack.policy.reader import PolicyStoreUnavailable
from iostack.swift_middleware import qos
from iostack.swift_middleware.select import proxy as select_proxy


class UnreadableStoreView:
    """A request view whose policy lookup fails (Redis down)."""

    path_info = "/v1/AUTH_t1/c/o"
    account = "AUTH_t1"

    def resolution(self, reader):
        raise PolicyStoreUnavailable("redis is down")


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(SwiftLogFormatter())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.mark.parametrize("module, make, call", [
    (select_proxy, select_proxy.SelectMiddleware, lambda mw, view: mw._policy_filters(view)),
    (qos, qos.QosMiddleware, lambda mw, view: mw._policy(view)),
], ids=["iostack_select", "iostack_qos"])
def test_a_failed_policy_lookup_is_logged_with_the_transaction_id(module, make, call,
                                                                  monkeypatch):
    monkeypatch.setattr(module, "shared_reader", lambda settings: None)
    mw = make(lambda env, start_response: [], {"log_name": "proxy-server"})
    lines = Lines()
    mw.logger.logger.addHandler(lines)
    try:
        mw.logger.txn_id = "tx0123456789abcdef"
        call(mw, UnreadableStoreView())  # fails open: served without the policy
    finally:
        mw.logger.txn_id = None
        mw.logger.logger.removeHandler(lines)
    assert len(lines.lines) == 1
    assert "policy lookup for /v1/AUTH_t1/c/o failed: redis is down" in lines.lines[0]
    assert "(txn: tx0123456789abcdef)" in lines.lines[0]
