"""How deeply the records of a JSON Lines block nest, measured before a parser sees them.

pyarrow's JSON reader recurses once per level of arrays and objects: a
~20 KB record nested 10,000 deep kills the process (SIGSEGV), and 3,000
levels cost seconds and a gigabyte. On a shared proxy or object-server
worker that is every tenant's outage, so ``json_select`` refuses a block
any of whose records nests deeper than ``MAX_DEPTH`` before parsing it.

``nesting_depth`` never recurses and runs in C (bytes methods, Arrow
kernels), linear in the block:

1. escaped backslashes and quotes are dropped, then every byte but
   brackets, braces, quotes and newlines (``bytes.translate``);
2. fast path: adjacent pairs (``""``, ``[]``, ``{}``) are removed a few
   times over; if no opener is left the block nests at most four levels per
   pass (typical records are 2-4 levels deep and take a pass or two);
3. otherwise, exactly: per line, a running count of quotes says which
   brackets lie inside strings, and a running sum of the others (+1 for an
   opener, -1 for a closer) gives each line's deepest level.

Unbalanced input (not JSON anyway) can only make the measure larger.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from iostack.filters.errors import FilterError

MAX_DEPTH = 64  # levels of arrays and objects a record may nest
FAST_PASSES = 16  # passes of pair removals tried before the exact count

_PAIRS = (b"[]", b"{}", b"[}", b"{]")
_KEPT = b'[]{}"\n'
_DROPPED = bytes(b for b in range(256) if b not in _KEPT)
_STEP = pa.array([1 if b in b"[{" else -1 if b in b"]}" else 0 for b in range(256)], pa.int32())
_QUOTE = pa.array([int(b == ord('"')) for b in range(256)], pa.int32())
_NEWLINE = pa.array([int(b == ord("\n")) for b in range(256)], pa.int32())
_NEWLINE_BYTE = pa.scalar(ord("\n"), pa.uint8())
_START = pa.array([0], pa.int32())
_ZERO = pa.scalar(0, pa.int32())
_ONE = pa.scalar(1, pa.int32())


class TooDeep(FilterError):
    """A record nests deeper than allowed."""


def check_depth(block: bytes, limit: int = MAX_DEPTH) -> None:
    """``TooDeep`` naming the limit if a record of ``block`` nests deeper than ``limit``."""
    depth = nesting_depth(block, limit)
    if depth > limit:
        raise TooDeep(f"a record nests {depth} levels deep, over the JSON depth limit "
                      f"({limit})")


def nesting_depth(block: bytes, limit: int = MAX_DEPTH) -> int:
    """The deepest level of arrays and objects on any line of ``block`` (strings
    skipped), or a number at most that deep when it is at most ``limit``."""
    if b"\\" in block:
        block = block.replace(b"\\\\", b"").replace(b'\\"', b"")
    text = block.translate(None, _DROPPED)
    if _shallow(text, min(limit // len(_PAIRS), FAST_PASSES)):
        return 0
    codes = pa.Array.from_buffers(pa.uint8(), len(text), [None, pa.py_buffer(text)])
    ends = pc.indices_nonzero(pc.equal(codes, _NEWLINE_BYTE))
    line = pc.cumulative_sum(pc.take(_NEWLINE, codes))  # each byte's line number
    quotes = _per_line(pc.take(_QUOTE, codes), ends, line)
    in_string = pc.bit_wise_and(quotes, _ONE).cast(pa.bool_())
    steps = pc.if_else(in_string, _ZERO, pc.take(_STEP, codes))
    return pc.max(_per_line(steps, ends, line)).as_py() or 0


def _shallow(text: bytes, passes: int) -> bool:
    """Whether removing adjacent pairs ``passes`` times leaves no opener: then no
    line nests deeper than ``4 * passes`` (each pass's four bracket pairs
    remove at most one level each).

    Two adjacent bytes are both inside one string or both outside any, so
    dropping ``""`` keeps every other bracket's side, a pair of brackets
    inside a string changes nothing, and one outside is an innermost level:
    an opener outside strings goes only after all levels inside it went,
    one per pass. A string's closer never cancels a real opener (a quote
    lies between them until the string's own brackets are gone).
    """
    for _ in range(passes):
        if b"[" not in text and b"{" not in text:
            return True
        before = len(text)
        text = text.replace(b'""', b"")
        for pair in _PAIRS:
            text = text.replace(pair, b"")
        if len(text) == before:
            return False  # unbalanced: let the exact count decide
    return b"[" not in text and b"{" not in text


def _per_line(values: pa.Array, ends: pa.Array, line: pa.Array) -> pa.Array:
    """The running sum of ``values`` from the start of each one's line."""
    total = pc.cumulative_sum(values)
    base = pa.concat_arrays([_START, pc.take(total, ends)])
    return pc.subtract(total, pc.take(base, line))
