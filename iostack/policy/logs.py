"""Data-path log lines reach Swift's log, whatever the middleware's route.

The modules the middlewares share with the controller (``policy/reader``,
``policy/changes``, ``shared_bucket``, ``cache/invalidation``,
``monitoring/bus`` ...) log through stdlib loggers named ``iostack.<module>``.
Swift's ``get_logger(conf, log_route=R)`` attaches its handler (syslog, or
the console) to the logger named R and stops propagation there, so those
lines reached Swift's log only when some middleware's route happened to be
``iostack`` (the proxy's enforcing middleware); in an object server, or a
proxy with only QoS or select, a "channel lost" warning went nowhere.

Every middleware calls ``route_to_swift(self.logger)`` once it has its Swift
logger. While no Swift handler sits on the ``iostack`` logger itself, the
package's records are handed to that middleware's Swift handlers (the
latest caller's; one forwarder per process, so each line is logged once)
at its log level. A middleware whose route is ``iostack`` gets the records
by propagation, and the forwarder is removed.
"""

from __future__ import annotations

import logging
from typing import Any

PACKAGE = logging.getLogger("iostack")


class ToSwift(logging.Handler):
    """Hands each record to a Swift logger's own handlers."""

    def __init__(self, target: logging.Logger) -> None:
        super().__init__()
        self.target = target

    def emit(self, record: logging.LogRecord) -> None:
        for handler in self.target.handlers:
            if record.levelno >= handler.level:
                handler.handle(record)


def route_to_swift(swift_logger: Any) -> None:
    """Make ``iostack.*`` records reach ``swift_logger`` (Swift's LogAdapter)."""
    target: logging.Logger = getattr(swift_logger, "logger", swift_logger)
    forwarders = [h for h in PACKAGE.handlers if isinstance(h, ToSwift)]
    for forwarder in forwarders:
        PACKAGE.removeHandler(forwarder)
    if target is PACKAGE or PACKAGE.handlers:
        return  # a Swift handler sits on 'iostack' itself: records propagate to it
    PACKAGE.addHandler(ToSwift(target))
    PACKAGE.setLevel(target.getEffectiveLevel())
