"""Run a storlet from inside a Swift middleware, without going through ``storlet_handler``.

The IOStack proxy middleware sits below ``storlet_handler`` in the pipeline,
so its own requests never reach it; to run a sandboxed filter at the proxy
stage, on PUT or GET, in any position among native filters, it calls::

    runner = SandboxRunner(swift_dir, logger)        # once, at filter_factory time
    metadata, chunks = runner.run("AUTH_t1", "iostack_noop.py",
                                  {"mode": "encode", "params": "{}"}, body_chunks)

which does what the proxy handler of Storlets does for ``X-Run-Storlet``:
reads the storlet's registration (``X-Object-Meta-Storlet-*``) from the
account's ``storlet`` container through the internal client, builds the
request and hands it to the gateway of the stack's runtime (the gateway
config's ``sandbox_runtime``: ``bubblewrap``, or ``docker`` for
``docker_gateway``), with the same gateway config as the middleware (same
scope, same sandbox). Errors are the gateway's: ``400``
(message too large), ``503`` (timeout), ``StorletRuntimeException``.

The registration is read at most once per ``REGISTRATION_TTL`` (1 s) per
storlet and runner (one per proxy worker), not on every call: reading it
makes a HEAD through Swift's internal client (built once per runner;
upstream's file manager builds one, a whole proxy application, each time). So a re-uploaded (or
deleted) storlet takes effect on the data path within a second, as a policy
change does; the storlet's code itself is compared with the registration on
every call, by the gateway.

Importing this module monkey-patches the process with eventlet (Storlets'
runtime does it on import): fine in a Swift server, which already is.
"""

from __future__ import annotations

import configparser
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from storlets.gateway.common.stob import StorletData
from storlets.gateway.loader import load_gateway
from storlets.swift_middleware.handlers.base import SwiftFileManager
from swift.common.internal_client import InternalClient

from iostack.storlet_runtime.host.identity import sandbox_scope
from iostack.storlet_runtime.host.swift_conf import (
    DEPENDENCY_CONTAINER,
    GATEWAY_MODULES,
    LOG_CONTAINER,
    STORLET_CONTAINER,
    gateway_conf_path,
    internal_client_conf_path,
)

META = "x-object-meta-storlet-"
REGISTRATION_TTL = 1.0


class SharedClientFileManager(SwiftFileManager):
    """Storlets' file manager, with the runner's internal client instead of a new one per use.

    Upstream builds Swift's internal client (a whole proxy application: ~30 ms
    of CPU that blocks the worker's event loop) on every access to ``client``.
    """

    def __init__(self, *args: Any, client: InternalClient) -> None:
        super().__init__(*args)
        self._client = client

    @property
    def client(self) -> InternalClient:
        return self._client


class SandboxRunner:
    def __init__(self, swift_dir: str | Path, logger: Any) -> None:
        parser = configparser.RawConfigParser()
        parser.read(gateway_conf_path(Path(swift_dir)))
        self.gateway_conf = dict(parser.items("DEFAULT"))
        self.gateway = load_gateway(
            GATEWAY_MODULES[self.gateway_conf.get("sandbox_runtime", "bubblewrap")])
        self.ic_conf = str(internal_client_conf_path(Path(swift_dir)))
        self.logger = logger
        # (account, storlet) -> (read until, registration); see the module docstring.
        self._registrations: dict[tuple[str, str], tuple[float, dict[str, str]]] = {}
        self._client: InternalClient | None = None

    def _files(self, account: str) -> SwiftFileManager:
        if self._client is None:
            self._client = InternalClient(self.ic_conf, "SA", 1)  # as SwiftFileManager builds it
        return SharedClientFileManager(account, STORLET_CONTAINER, DEPENDENCY_CONTAINER,
                                       LOG_CONTAINER, self.ic_conf, self.logger,
                                       client=self._client)

    def registration(self, account: str, storlet: str) -> dict[str, str]:
        """The storlet object's metadata (lower-case names), at most ``REGISTRATION_TTL`` old.

        ``x-object-meta-storlet-*`` are what it was registered with; the data
        path's object-node reads send them on as ``X-Storlet-*``.
        """
        now = time.monotonic()
        fresh_until, registration = self._registrations.get((account, storlet), (0.0, {}))
        if now < fresh_until:
            return registration
        registration = self._files(account).client.get_object_metadata(
            account, STORLET_CONTAINER, storlet)
        # Keep only what is still fresh, so the map never outgrows the last second's storlets.
        self._registrations = {key: entry for key, entry in self._registrations.items()
                               if entry[0] > now}
        self._registrations[account, storlet] = (now + REGISTRATION_TTL, registration)
        return registration

    def run(self, account: str, storlet: str, params: dict[str, str],
            data_iter: Iterable[bytes], metadata: dict[str, str] | None = None,
            code_sha256: str | None = None) -> tuple[dict[str, str], Iterator[bytes]]:
        """Run ``storlet`` of ``account`` on ``data_iter``; return its metadata and output.

        With ``code_sha256`` the gateway refuses (503) a storlet whose code is
        not that (see ``gateway``).
        """
        files = self._files(account)
        registration = self.registration(account, storlet)
        options = {
            "storlet_main": registration[META + "main"],
            "storlet_language": registration[META + "language"],
            "storlet_language_version": registration.get(META + "language-version"),
            "storlet_x_timestamp": registration["x-timestamp"],
            "storlet_content_length": registration["content-length"],
            # As Storlets' handlers pass it: the gateway refuses it for pinned code.
            "storlet_dependency": registration.get(META + "dependency", ""),
            "file_manager": files,
            "scope": account,  # as Storlets' handlers pass it: the gateway derives the scope
        }
        return invoke(self.gateway, self.gateway_conf, self.logger, storlet, options, params,
                      data_iter, metadata, code_sha256)


def invoke(gateway_class: Any, gateway_conf: dict[str, str], logger: Any, storlet: str,
           options: dict[str, Any], params: dict[str, str], data_iter: Iterable[bytes],
           metadata: dict[str, str] | None = None,
           code_sha256: str | None = None) -> tuple[dict[str, str], Iterator[bytes]]:
    """Hand one request to a gateway of ``gateway_class``, in the sandbox of
    ``options["scope"]``."""
    if code_sha256:
        options = {**options, "storlet_code_sha256": code_sha256}
    gateway = gateway_class(gateway_conf, logger, sandbox_scope(options["scope"]))
    request = gateway.request_class(storlet, dict(params),
                                    StorletData(metadata or {}, data_iter=iter(data_iter)),
                                    options=options)
    response = gateway.invocation_flow(request)
    return response.data.user_metadata, iter(response.data.data_iter)
