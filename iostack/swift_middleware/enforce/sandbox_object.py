"""Sandboxed filters undone where the object lives: at the object servers.

Storlets runs a GET's storlet on the object node by default: the storlet reads
the object's file directly and only its output crosses the network. The proxy
middleware does the same for the filter of a record that ran in the sandbox
last on PUT (so it is the first to undo, over the stored bytes themselves):
each read of its view is a GET sub-request pinned to the stored version that
carries ``X-Run-Storlet``, the storlet's registration (as Storlets' proxy
handler would add it; ``SandboxRunner.registration`` keeps it for a second),
the SHA-256 the record pins the code to (``X-Storlet-Code-Sha256``, which
the object servers' gateway checks) and the range to decode. The object servers'
``storlet_handler`` runs the storlet in the tenant's sandbox on the local
file and streams the decoded range back.

Storlets answers a storlet it ran without ``Content-Length`` (the output's
length is unknown to it); an object server that declined (erasure-coded
objects, ``storlet_execute_on_proxy``) returns the stored object with its
length, and the read falls back to the proxy's sandbox
(``sandboxed.SandboxedView``). Filters with native filters below them in the
stored form always run at the proxy: the object servers hold bytes they
cannot decode. So do those of objects under ``MIN_STORED_BYTES``: the
proxy's first GET has brought their stored bytes already, and running the
storlet on them there costs less than a second round trip (1 KiB GET:
~6 ms added at the proxy against ~15 ms at the object node here).

Proxy config: ``sandboxed_decode_stage = object`` (default) or ``proxy``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from swift.common.utils import close_if_possible

from iostack.filters.base import FilterContext
from iostack.filters.errors import FilterError, IntegrityError
from iostack.storlet_runtime.host.packaging import storlet_run_headers
from iostack.swift_middleware.enforce.sandboxed import SandboxedView, exactly
from iostack.swift_middleware.enforce.source import ObjectChanged, SwiftObjectSource

STAGES = ("object", "proxy")
MIN_STORED_BYTES = 1 << 20
REGISTRATION_PREFIX = "x-object-meta-storlet-"  # as SandboxRunner.registration names it


class ObjectNodeSandboxedView(SandboxedView):
    """A sandboxed filter's view over the stored object, decoded by the object servers."""

    def __init__(self, runner: Any, source: SwiftObjectSource, sysmeta: dict[str, str],
                 context: FilterContext) -> None:
        super().__init__(runner, source, sysmeta, context)
        self.source = source
        # The backend response's body (the stored bytes) is not needed here;
        # a fallback read asks for it again.
        source.close()

    def _read(self, start: int, end: int) -> Iterator[bytes]:
        headers = storlet_run_headers(
            self.storlet, "decode", sysmeta=self.filter_sysmeta, byte_range=(start, end),
            account=self.context.account, container=self.context.container,
            obj=self.context.obj)
        try:
            resp = self.source.pinned_get({**headers, **self._storlet_options()})
        except ObjectChanged:
            raise
        except IntegrityError as exc:  # the storlet, not the stored bytes, failed there
            raise FilterError(f"sandboxed filter {self.storlet} at the object servers: "
                              f"{exc}") from exc
        if "Content-Length" in resp.headers:
            # The object server did not run it (see the module docstring).
            close_if_possible(resp.app_iter)
            yield from super()._read(start, end)
            return
        try:
            yield from exactly(resp.app_iter, end - start,
                                f"sandboxed filter {self.storlet} at the object servers")
        finally:
            close_if_possible(resp.app_iter)

    def _storlet_options(self) -> dict[str, str]:
        """``X-Storlet-*`` headers from the storlet's registration, as Storlets' proxy adds them."""
        try:
            registration = self.runner.registration(self.context.account, self.storlet)
            options = {f"X-Storlet-{key[len(REGISTRATION_PREFIX):]}": value
                       for key, value in registration.items()
                       if key.startswith(REGISTRATION_PREFIX)}
            options["X-Storlet-Content-Length"] = registration["content-length"]
            options["X-Storlet-X-Timestamp"] = registration["x-timestamp"]
            if self.code_sha256:  # the object servers' gateway checks the code it runs
                options["X-Storlet-Code-Sha256"] = self.code_sha256
        except Exception as exc:  # the internal client's errors have many types
            raise FilterError(f"sandboxed filter {self.storlet}: no usable registration: "
                              f"{exc}") from exc
        return options
