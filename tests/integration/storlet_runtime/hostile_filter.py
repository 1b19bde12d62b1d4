"""A tenant filter that breaks the sandboxed-filter protocol on purpose, by object name.

Encode (PUT) of an object named ``*die`` announces the whole length, writes
half and dies; ``*flood`` announces the length and never stops writing.
Decode (GET) of ``*past`` answers with the object plus 100 bytes more than
the range asked for. Any other object passes through unchanged.
"""

import json
import os

PIECE = 1 << 16


class HostileFilter:
    def __init__(self, logger):
        self.logger = logger

    def __call__(self, in_files, out_files, params):
        source, sink = in_files[0], out_files[0]
        name = params.get("object", "")
        body = source.read()
        if params.get("mode") == "encode":
            sink.set_metadata({"Iostack-Sysmeta": json.dumps({}),
                               "Iostack-Encoded-Length": str(len(body))})
            if name.endswith("die"):
                sink.write(body[:len(body) // 2])
                sink.flush()
                os._exit(1)
            if name.endswith("flood"):
                while True:
                    sink.write(b"f" * PIECE)
            sink.write(body)
        else:
            start, _, end = (params.get("range") or f"0-{len(body)}").partition("-")
            sink.set_metadata({"Iostack-Length": str(len(body))})
            piece = body[int(start):int(end)]
            sink.write(piece + (b"!" * 100 if name.endswith("past") else b""))
        source.close()
        sink.close()
