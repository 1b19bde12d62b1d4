"""``iostack doctor``: check that a Swift cluster's configs and services can run IOStack.

An operator installs IOStack into an existing Swift (``docs/deploy.md``);
the doctor reads what that installation is made of and says, finding by
finding, what is wrong and how to fix it. Nothing is started or changed.

- ``pipelines``: each proxy-server and object-server config (files or
  ``.conf.d`` directories, several per kind) is loaded with Swift's own
  paste loader, the proxy pipeline is completed as Swift's proxy completes
  it at start (``required_filters``), and every IOStack middleware is
  checked: present where it is needed, in its place relative to Swift's
  middlewares and to the others, and accepted by its own config parsing
  (each is built once on a stand-in app, as the server would build it).
- ``sandbox``: the Storlets sandbox runtime each ``storlet_handler`` names:
  bubblewrap's files, or the container engine reachable with the storlet
  image in it.
- ``services``: the Redis, RabbitMQ and controller those configs name:
  reachable, authenticated (a passwordless Redis or RabbitMQ's ``guest`` is
  an error unless allowed), the policy store's ``marker`` present, the
  controller's token accepted and its metric consumer connected.

Findings are ``error`` (IOStack would lose its promises: unfiltered writes,
forged rules, refused writes), ``warning`` (a feature will not work) or
``ok`` (a check that passed); the command exits 1 when there is an error.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

LEVELS = ("error", "warning", "ok")


@dataclass(frozen=True)
class Finding:
    level: str  # one of LEVELS
    where: str  # a config file (and section), or a service
    what: str  # what is wrong, or what was checked
    fix: str = ""  # how to fix it

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def error(where: str, what: str, fix: str) -> Finding:
    return Finding("error", where, what, fix)


def warning(where: str, what: str, fix: str) -> Finding:
    return Finding("warning", where, what, fix)


def ok(where: str, what: str) -> Finding:
    return Finding("ok", where, what)
