"""``upper``: a minimal Python storlet that upper-cases a text object.

Upload as ``upper.py`` with ``X-Object-Meta-Storlet-Main: upper.UpperStorlet``.
Parameters (query string or ``X-Storlet-Parameter-N: key:value``):

``prefix``
    Text written before the body (default none).

It sets ``X-Object-Meta-Transformed-By: upper`` on its output and
streams the body in 64 KiB pieces, so it works on objects of any size.
"""

CHUNK = 64 * 1024


class UpperStorlet:
    def __init__(self, logger):
        self.logger = logger

    def __call__(self, in_files, out_files, params):
        source, sink = in_files[0], out_files[0]
        metadata = dict(source.get_metadata())
        metadata["Transformed-By"] = "upper"
        sink.set_metadata(metadata)
        prefix = params.get("prefix", "")
        if prefix:
            sink.write(prefix.encode("utf-8"))
        while True:
            chunk = source.read(CHUNK)
            if not chunk:
                break
            sink.write(chunk.upper())
        source.close()
        sink.close()
