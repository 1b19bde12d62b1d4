'''The file ``iostack filter new NAME`` writes: a working filter to start from.

It is a plain OpenStack Storlets storlet (the API ``storlets_api`` runs
under IOStack's protocol), with one declared parameter, and its header says
how to test it in the sandbox, upload it and set it in a policy
(docs/filters-sdk.md walks through it).
'''

from __future__ import annotations

TEMPLATE = '''"""{name}: an IOStack filter, written to the OpenStack Storlets API.

On PUT IOStack runs it over the tenant's body and stores its output; on GET
it runs it over the stored bytes and returns its output (Range is IOStack's
job). This one XORs every byte with ``key``, which is its own inverse; a
filter that transforms differently each way reads ``params["direction"]``
("put" or "get").

    iostack filter test {name}.py                           # in the sandbox, nothing stored
    iostack filter upload {name}.py --name {name} --tenant t1 --param key:int:0..255=90
    iostack policy add "FOR CONTAINER t1/docs DO SET {name} WITH key=7"
"""

CHUNK = 1 << 20


class {cls}:
    def __init__(self, logger):
        self.logger = logger

    def __call__(self, in_files, out_files, params):
        key = int(params.get("key", "90"))  # policy parameters arrive as strings
        if params.get("direction") == "get":
            table = self.decode_table(key)
        else:
            table = self.encode_table(key)
        out_files[0].set_metadata({{}})
        while True:
            chunk = in_files[0].read(CHUNK)
            if not chunk:
                break
            out_files[0].write(chunk.translate(table))
        in_files[0].close()
        out_files[0].close()

    @staticmethod
    def encode_table(key):
        return bytes(i ^ key for i in range(256))

    @staticmethod
    def decode_table(key):
        return bytes(i ^ key for i in range(256))
'''


def filter_template(name: str) -> str:
    """The source of a new filter called ``name`` (a Python module name)."""
    cls = "".join(part.capitalize() for part in name.split("_")) + "Filter"
    return TEMPLATE.format(name=name, cls=cls)
