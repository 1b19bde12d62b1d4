"""A tenant filter whose decode hangs on objects named ``*hang``: the data path's timeout test."""

import json
import time


class HangFilter:
    def __init__(self, logger):
        self.logger = logger

    def __call__(self, in_files, out_files, params):
        source, sink = in_files[0], out_files[0]
        if params.get("mode") == "encode":
            body = source.read()
            sink.set_metadata({"Iostack-Sysmeta": json.dumps({}),
                               "Iostack-Encoded-Length": str(len(body))})
            sink.write(body)
        else:
            if params.get("object", "").endswith("hang"):
                time.sleep(3600)
            data = source.read()
            start, _, end = (params.get("range") or f"0-{len(data)}").partition("-")
            sink.set_metadata({"Iostack-Length": str(len(data))})
            sink.write(data[int(start):int(end)])
        source.close()
        sink.close()
