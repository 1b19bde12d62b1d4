"""A pass-through that speaks IOStack's sandboxed-filter protocol itself (``filter_runner``):
what an author had to write before Storlets-API storlets ran unchanged."""

import json
import shutil
import tempfile


class IdentityFilter:
    def __init__(self, logger):
        self.logger = logger

    def __call__(self, in_files, out_files, params):
        source, sink = in_files[0], out_files[0]
        if params.get("mode") == "encode":
            with tempfile.TemporaryFile(dir="/tmp") as spool:
                shutil.copyfileobj(source, spool, 1 << 20)
                sink.set_metadata({"Iostack-Sysmeta": json.dumps({}),
                                   "Iostack-Encoded-Length": str(spool.tell())})
                spool.seek(0)
                shutil.copyfileobj(spool, sink, 1 << 20)
        else:
            start, end = (int(n) for n in params["range"].split("-"))
            sink.set_metadata({"Iostack-Length": params.get("length", "")})
            offset = 0
            while offset < end:
                buf = source.read(1 << 20)
                if not buf:
                    break
                piece = buf[max(0, start - offset):max(0, end - offset)]
                offset += len(buf)
                if piece:
                    sink.write(piece)
            while source.read(1 << 20):  # the server must never block on a full pipe
                pass
        source.close()
        sink.close()
