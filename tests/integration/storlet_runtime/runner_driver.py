"""``python runner_driver.py SWIFT_DIR ACCOUNT STORLET``: a middleware's view of SandboxRunner.

Runs in its own process because the runner monkey-patches with eventlet, as
Swift servers are. Encodes a body through the storlet, decodes it whole and a
range of it, and prints JSON with what came back.

``python runner_driver.py reads SWIFT_DIR ACCOUNT STORLET``: encodes once
(the sandbox may start: longer than ``REGISTRATION_TTL``), then three times
at once, then again after ``REGISTRATION_TTL``; prints how many times the
last two rounds read the storlet's registration from Swift.
"""

import hashlib
import json
import logging
import sys
import time

from swift.common import internal_client, utils

from iostack.storlet_runtime.host.runner import REGISTRATION_TTL, SandboxRunner

BODY = b"".join(b"record %05d,ok\n" % i for i in range(20000))


def encode(runner: SandboxRunner, account: str, storlet: str) -> None:
    _, chunks = runner.run(account, storlet, {"mode": "encode", "params": "{}"}, [BODY])
    b"".join(chunks)


def registration_reads(runner: SandboxRunner, account: str, storlet: str) -> None:
    encode(runner, account, storlet)
    time.sleep(REGISTRATION_TTL + 0.1)
    reads = []
    real_read = internal_client.InternalClient.get_object_metadata

    def counting_read(self, *args, **kwargs):
        reads.append(args)
        return real_read(self, *args, **kwargs)

    internal_client.InternalClient.get_object_metadata = counting_read
    rounds = []
    for calls in (3, 1):
        reads.clear()
        for _ in range(calls):
            encode(runner, account, storlet)
        rounds.append(len(reads))
        time.sleep(REGISTRATION_TTL + 0.1)
    print(json.dumps({"reads": rounds}))


def main() -> None:
    reads = sys.argv[1] == "reads"
    swift_dir, account, storlet = sys.argv[1 + reads:4 + reads]
    utils.set_swift_dir(swift_dir)  # a Swift server's launcher does this before loading
    runner = SandboxRunner(swift_dir, logging.getLogger("runner"))
    if reads:
        registration_reads(runner, account, storlet)
        return
    metadata, chunks = runner.run(account, storlet, {"mode": "encode", "params": "{}"},
                                  [BODY[:100000], BODY[100000:]])
    stored = b"".join(chunks)
    sysmeta = metadata["Iostack-Sysmeta"]
    _, whole = runner.run(account, storlet, {"mode": "decode", "sysmeta": sysmeta}, [stored])
    _, part = runner.run(account, storlet, {"mode": "decode", "sysmeta": sysmeta,
                                            "range": "1000-1100"}, iter([stored]))
    print(json.dumps({
        "stored": len(stored), "original": len(BODY), "sysmeta": json.loads(sysmeta),
        "whole_ok": hashlib.md5(b"".join(whole)).digest() == hashlib.md5(BODY).digest(),
        "part_ok": b"".join(part) == BODY[1000:1100],
    }))


if __name__ == "__main__":
    main()
