"""The block bridge as the console sees it: its volumes and storage groups, over JSON-RPC.

Config key (controller JSON): ``block_bridge`` = {``url`` (``.../targetrpc``),
``user``, ``password``}; the all-in-one sets it. Without it the console's
Block page shows only what VOLUME and STORAGE_GROUP policies name.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from typing import Any

TIMEOUT = 5.0


class BridgeError(Exception):
    pass


class BlockBridge:
    def __init__(self, conf: dict[str, Any]) -> None:
        self.url = conf["url"]
        basic = base64.b64encode(f"{conf['user']}:{conf['password']}".encode()).decode()
        self.headers = {"Content-Type": "application/json", "Authorization": f"Basic {basic}"}

    def call(self, method: str) -> Any:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": {}}).encode()
        req = urllib.request.Request(self.url, data=body, headers=self.headers, method="POST")  # noqa: S310 - configured URL
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:  # noqa: S310 - config
                reply = json.loads(resp.read())
        except (OSError, ValueError) as exc:
            raise BridgeError(f"the block bridge at {self.url} did not answer: {exc}") from None
        if "error" in reply:
            raise BridgeError(f"the block bridge refused {method}: {reply['error']}")
        return reply["result"]

    def inventory(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(volumes, storage groups) as the bridge describes them."""
        return self.call("list_filtered_volumes"), self.call("list_storage_groups")
