"""A Storlets-API storlet that is not its own inverse: every byte shifted by ``by``.

It reads its parameter as a plain Storlets parameter (``params["by"]``) and
the direction IOStack gives it (``params["direction"]``: ``put`` or ``get``).
"""


class ShiftStorlet:
    def __init__(self, logger):
        self.logger = logger

    def __call__(self, in_files, out_files, params):
        by = int(params.get("by", "1")) % 256
        if params.get("direction") == "get":
            by = -by % 256
        table = bytes((i + by) % 256 for i in range(256))
        out_files[0].set_metadata({})
        while True:
            buf = in_files[0].read(65536)
            if not buf:
                break
            out_files[0].write(buf.translate(table))
        in_files[0].close()
        out_files[0].close()
