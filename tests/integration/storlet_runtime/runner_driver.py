"""``python runner_driver.py SWIFT_DIR ACCOUNT STORLET``: a middleware's view of SandboxRunner.

Runs in its own process because the runner monkey-patches with eventlet, as
Swift servers are. Encodes a body through the storlet, decodes it whole and a
range of it, and prints JSON with what came back.
"""

import hashlib
import json
import logging
import sys

from swift.common import utils

from iostack.storlet_runtime.runner import SandboxRunner

BODY = b"".join(b"record %05d,ok\n" % i for i in range(20000))


def main() -> None:
    swift_dir, account, storlet = sys.argv[1:4]
    utils.set_swift_dir(swift_dir)  # a Swift server's launcher does this before loading
    runner = SandboxRunner(swift_dir, logging.getLogger("runner"))
    metadata, chunks = runner.run(account, storlet, {"mode": "encode", "params": "{}"},
                                  [BODY[:100000], BODY[100000:]])
    stored = b"".join(chunks)
    sysmeta = metadata["Iostack-Sysmeta"]
    _, whole = runner.run(account, storlet, {"mode": "decode", "sysmeta": sysmeta}, [stored])
    _, part = runner.run(account, storlet, {"mode": "decode", "sysmeta": sysmeta,
                                            "range": "1000-1100"}, iter([stored]))
    print(json.dumps({
        "stored": len(stored), "original": len(BODY), "sysmeta": json.loads(sysmeta),
        "whole_ok": hashlib.md5(b"".join(whole)).digest() == hashlib.md5(BODY).digest(),  # noqa: S324
        "part_ok": b"".join(part) == BODY[1000:1100],
    }))


if __name__ == "__main__":
    main()
