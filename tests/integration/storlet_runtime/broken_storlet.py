"""Storlets that break in the ways an upload must catch before anything is registered."""

import json


class RaisingStorlet:
    """Fails on every call (Storlets API)."""

    def __init__(self, logger):
        self.logger = logger

    def __call__(self, in_files, out_files, params):
        raise ValueError("this storlet always fails")


class TruncatingStorlet:
    """Stores only the first half of what it reads (Storlets API)."""

    def __init__(self, logger):
        self.logger = logger

    def __call__(self, in_files, out_files, params):
        body = in_files[0].read()
        out_files[0].set_metadata({})
        out_files[0].write(body[:len(body) // 2] if params.get("direction") == "put" else body)
        in_files[0].close()
        out_files[0].close()


class OverlongStorlet:
    """Speaks IOStack's protocol, but a decode writes 100 bytes more than it was asked for."""

    def __init__(self, logger):
        self.logger = logger

    def __call__(self, in_files, out_files, params):
        body = in_files[0].read()
        if params.get("mode") == "encode":
            out_files[0].set_metadata({"Iostack-Sysmeta": json.dumps({}),
                                       "Iostack-Encoded-Length": str(len(body))})
            out_files[0].write(body)
        else:
            start, _, end = params["range"].partition("-")
            out_files[0].set_metadata({"Iostack-Length": str(len(body))})
            out_files[0].write(body[int(start):int(end)] + b"!" * 100)
        in_files[0].close()
        out_files[0].close()
