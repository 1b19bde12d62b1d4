"""A tenant's own sandboxed compression filter (standard library only).

Follows IOStack's sandboxed-filter protocol (``iostack.storlet_runtime.filter_runner``):
``mode=encode`` compresses and reports ``Iostack-Sysmeta`` (the original
length) and ``Iostack-Encoded-Length``; ``mode=decode`` decompresses,
optionally only ``range=start-end``.
Parameter ``params`` is JSON with an optional ``level`` (1-9).
"""

import json
import zlib

CHUNK = 64 * 1024


class ZlibFilter:
    def __init__(self, logger):
        self.logger = logger

    def __call__(self, in_files, out_files, params):
        source, sink = in_files[0], out_files[0]
        if params.get("mode") == "encode":
            level = int(json.loads(params.get("params") or "{}").get("level", 6))
            packer = zlib.compressobj(level)
            pieces, length = [], 0
            while True:
                chunk = source.read(CHUNK)
                if not chunk:
                    break
                length += len(chunk)
                pieces.append(packer.compress(chunk))
            pieces.append(packer.flush())
            sink.set_metadata({"Iostack-Sysmeta": json.dumps({"len": str(length)}),
                               "Iostack-Encoded-Length": str(sum(map(len, pieces)))})
            for piece in pieces:
                sink.write(piece)
        else:
            length = int(json.loads(params.get("sysmeta") or "{}")["len"])
            start, _, end = (params.get("range") or f"0-{length}").partition("-")
            start, end = int(start), min(int(end), length)
            sink.set_metadata({"Iostack-Length": str(length)})
            unpacker, offset = zlib.decompressobj(), 0
            while offset < end:
                chunk = source.read(CHUNK)
                if not chunk:
                    break
                plain = unpacker.decompress(chunk)
                piece = plain[max(0, start - offset):max(0, end - offset)]
                offset += len(plain)
                if piece:
                    sink.write(piece)
        source.close()
        sink.close()
