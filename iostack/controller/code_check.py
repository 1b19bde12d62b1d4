"""Code uploaded through ``PUT /v1/filters/NAME/code`` runs once on sample data before it is kept.

A tenant or administrator who uploads through the REST API gets what
``iostack filter upload`` gives on the command line: code that is not a
storlet, that raises, truncates, writes more than it read or breaks the
sandboxed-filter protocol is refused with a 400 that names the failure, and
nothing is stored or registered.

The check is a program of its own, never run in the controller's process
(the controller does not import the storlet runtime, and the code under
test runs only in a sandbox): config key ``code_check``, the argv it starts
with, default ``python -m iostack.storlet_runtime.tools.upload_check local`` (the
storlet runtime's check in a bubblewrap sandbox of its own on this host, no
Swift needed). It is given the storlet's file name and its
``<module>.<Class>`` (from the filter's ``extra.storlet`` and
``extra.storlet_main`` when registered; otherwise ``DEFAULT_STORLET`` and
its only storlet class), the code on its standard input, and answers with
exit status 0, or a last line of JSON ``{"error": "..."}``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

DEFAULT_CHECK = (sys.executable, "-m", "iostack.storlet_runtime.tools.upload_check", "local")
DEFAULT_STORLET = "iostack_upload.py"
# A cold sandbox and storlet daemon (~1.5 s) plus three samples round-tripped.
CHECK_TIMEOUT = 300


class CodeCheck:
    """Runs the configured check over one upload; ``failure`` says why it is refused."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.argv = [str(part) for part in config.get("code_check", DEFAULT_CHECK)]

    def failure(self, meta: dict[str, Any], code: bytes) -> str | None:
        """Why ``code`` may not become filter ``meta``'s code; None when it passed."""
        extra = meta.get("extra", {})
        storlet = extra.get("storlet") or DEFAULT_STORLET
        main = extra.get("storlet_main")
        try:
            checked = subprocess.run(  # noqa: S603 - the configured argv, no shell
                [*self.argv, storlet, *([main] if main else [])], input=code,
                capture_output=True, timeout=CHECK_TIMEOUT, check=False)
        except subprocess.TimeoutExpired:
            return f"its check did not finish within {CHECK_TIMEOUT} s"
        if checked.returncode == 0:
            return None
        try:
            return str(json.loads(checked.stdout.decode().strip().splitlines()[-1])["error"])
        except (ValueError, KeyError, IndexError, TypeError):
            lines = checked.stderr.decode(errors="replace").strip().splitlines()
            return lines[-1] if lines else f"its check exited with status {checked.returncode}"
