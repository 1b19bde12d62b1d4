'''The file ``iostack filter new NAME`` writes: a working filter to start from.

It is a filter written against the SDK's base class (``sdk.Filter``), hence
a plain OpenStack Storlets storlet too, with one declared parameter; its
header says how to test it in the sandbox, upload it and set it in a policy
(docs/filters-sdk.md walks through it).
'''

from __future__ import annotations

TEMPLATE = '''"""{name}: an IOStack filter, written against the SDK (iostack.storlet_runtime.sdk).

On PUT IOStack runs ``encode`` over the tenant's body and stores what it
yields; on GET it runs ``decode`` over the stored bytes and returns what it
yields (Range, lengths and the object's record are IOStack's job). This one
XORs every byte with ``key``; XOR is its own inverse, but ``decode`` is
written out to show where a filter that transforms differently goes.

    iostack filter test {name}.py                 # in a local sandbox, nothing stored
    iostack filter upload {name}.py --name {name} --tenant t1
    iostack policy add "FOR CONTAINER t1/docs DO SET {name} WITH key=7"
"""

from iostack.storlet_runtime.sdk import Filter


class {cls}(Filter):
    params = ("key:int:0..255=90",)  # NAME:TYPE[:MIN..MAX][=DEFAULT]; the DSL checks it
    changes_size = False  # every byte in gives one byte out
    stages = ("proxy", "object")  # where it may run; the first is the default

    def encode(self, chunks, params):
        table = bytes(byte ^ params["key"] for byte in range(256))  # key arrives as an int
        for chunk in chunks:
            yield chunk.translate(table)

    def decode(self, chunks, params):
        table = bytes(byte ^ params["key"] for byte in range(256))
        for chunk in chunks:
            yield chunk.translate(table)
'''


def filter_template(name: str) -> str:
    """The source of a new filter called ``name`` (a Python module name)."""
    cls = "".join(part.capitalize() for part in name.split("_")) + "Filter"
    return TEMPLATE.format(name=name, cls=cls)
