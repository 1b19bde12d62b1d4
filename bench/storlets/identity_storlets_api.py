"""A pass-through written to the plain Storlets API, as upstream's samples are."""


class IdentityStorlet:
    def __init__(self, logger):
        self.logger = logger

    def __call__(self, in_files, out_files, params):
        out_files[0].set_metadata({})
        while True:
            buf = in_files[0].read(1 << 20)
            if not buf:
                break
            out_files[0].write(buf)
        in_files[0].close()
        out_files[0].close()
