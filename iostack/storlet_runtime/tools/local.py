"""A sandbox of its own on this host, for one storlet, with no Swift and no stack running.

``iostack filter test FILE`` and the controller's check of uploaded code run
a filter here before anything is stored::

    with LocalSandbox(storlet_name, code, main, logger) as runner:
        metadata, chunks = runner.run("local", storlet_name, params, body_chunks)

It is the data path's sandbox (``gateway.BwrapStorletGateway`` with the same
bubblewrap isolation, limits and seccomp program; ``swift_conf.gateway_conf``
with a private ``host_root``): only where the storlet's code comes from
differs. ``LocalFiles`` hands the gateway the code given here instead of
fetching it from the tenant's ``storlet`` container, and has no
dependencies and no log container. The scope's uid is allocated in the
host's table under this private run directory, which is removed (and the
sandbox stopped by pid) on exit, so nothing stays behind.

Importing this module monkey-patches the process with eventlet (through
``runner``): run it in a process of its own (``upload_check``).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from storlets.gateway.common.file_manager import FileManager

from iostack.storlet_runtime.host.gateway import BwrapStorletGateway
from iostack.storlet_runtime.host.identity import sandbox_scope
from iostack.storlet_runtime.host.runner import invoke
from iostack.storlet_runtime.host.swift_conf import gateway_conf

LOCAL_ACCOUNT = "AUTH_iostack-local-test"


class LocalFiles(FileManager):
    """The one storlet's code, from memory; nothing else exists."""

    def __init__(self, name: str, code: bytes) -> None:
        super().__init__()
        self.name, self.code = name, code

    def get_storlet(self, name: str) -> tuple[Iterator[bytes], None]:
        if name != self.name:
            raise FileNotFoundError(name)
        return iter([self.code]), None

    def get_dependency(self, name: str) -> tuple[Iterator[bytes], None]:
        raise FileNotFoundError(f"a local test has no dependencies ({name})")

    def put_log(self, name: str, fobj: Any) -> None:
        """Storlets' execution logs are not kept."""


class LocalSandbox:
    """A private ``host_root`` and a sandbox in it that runs ``name`` (``main``: Module.Class)."""

    def __init__(self, name: str, code: bytes, main: str, logger: Any) -> None:
        self.name, self.logger = name, logger
        self.files = LocalFiles(name, code)
        self.host_root = Path(tempfile.mkdtemp(prefix="iostack-filter-test-"))
        self.host_root.chmod(0o755)  # the scope's uid must reach its storlet folder
        self.conf = dict(gateway_conf(self.host_root)["DEFAULT"])
        self.options = {"storlet_main": main, "storlet_language": "python",
                        "storlet_language_version": "3",
                        "storlet_x_timestamp": f"{time.time():.5f}",
                        "storlet_content_length": str(len(code)), "storlet_dependency": "",
                        "file_manager": self.files, "scope": LOCAL_ACCOUNT}

    def run(self, account: str, storlet: str, params: dict[str, str],
            data_iter: Iterable[bytes], code_sha256: str | None = None,
            ) -> tuple[dict[str, str], Iterator[bytes]]:
        """As ``SandboxRunner.run``; the account is always the local one."""
        return invoke(BwrapStorletGateway, self.conf, self.logger, storlet, dict(self.options),
                      params, data_iter, code_sha256=code_sha256)

    def __enter__(self) -> LocalSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        BwrapStorletGateway.sandbox(sandbox_scope(LOCAL_ACCOUNT), self.conf, self.logger).stop()
        shutil.rmtree(self.host_root, ignore_errors=True)
