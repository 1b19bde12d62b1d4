"""rot13 written to the plain OpenStack Storlets API, as the upstream samples are.

It knows nothing of IOStack: no modes, no sysmeta, no ranges. rot13 is its own
inverse, so the same code encodes on PUT and decodes on GET.
"""

import string

LOWER, UPPER = string.ascii_lowercase, string.ascii_uppercase
TABLE = bytes.maketrans((LOWER + UPPER).encode(),
                        (LOWER[13:] + LOWER[:13] + UPPER[13:] + UPPER[:13]).encode())


class Rot13Storlet:
    def __init__(self, logger):
        self.logger = logger

    def __call__(self, in_files, out_files, params):
        self.logger.debug("rot13: returning metadata")
        metadata = in_files[0].get_metadata()
        metadata["transformed-by"] = "rot13"
        out_files[0].set_metadata(metadata)
        while True:
            buf = in_files[0].read(65536)
            if not buf:
                break
            out_files[0].write(buf.translate(TABLE))
        in_files[0].close()
        out_files[0].close()
