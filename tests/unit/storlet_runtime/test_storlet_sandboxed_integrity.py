"""What the data path believes of a sandboxed filter: its code, its lengths (fake runners;
the real sandbox is in tests/integration/storlet_runtime/test_storlet_hostile.py)."""

from __future__ import annotations

import hashlib

import pytest

from iostack.filters.base import FilterContext
from iostack.filters.errors import FilterError, FilterUnavailable
from iostack.filters.metadata import FilterMetadata
from iostack.storlet_runtime.host.packaging import code_mismatch, filter_storlet, keep_only
from iostack.swift_middleware.enforce.sandboxed import (
    CODE_KEY,
    SandboxedEncoder,
    SandboxedView,
    exactly,
    storlet_code,
)

T1 = FilterContext(account="AUTH_t1", container="c", obj="o")


def uploaded(**extra) -> FilterMetadata:
    return FilterMetadata(name="mine", description="uploaded", sandboxable=True,
                          extra={"runtime": "storlet", "storlet": "iostack_mine.py", **extra})


def test_a_decode_never_passes_on_a_byte_past_its_range():
    """Regression: the check came after the chunk had been yielded to the client."""
    sent = []
    with pytest.raises(FilterError, match="more than the 10 bytes"):
        for chunk in exactly(iter([b"12345", b"678901234"]), 10, "decode"):
            sent.append(chunk)
    assert sent == [b"12345"]


def test_a_short_decode_fails_at_its_end():
    with pytest.raises(FilterError, match="sent 5 bytes, not 10"):
        list(exactly(iter([b"12345"]), 10, "decode"))


def test_library_filters_are_pinned_to_their_generated_storlet():
    meta = FilterMetadata(name="noop", description="library", sandboxable=True)
    name, digest = storlet_code(meta, "AUTH_t1")
    assert name == "iostack_noop.py"
    assert digest == hashlib.sha256(filter_storlet("noop").code).hexdigest()


def test_uploaded_filters_need_recorded_code_and_run_only_for_their_tenant():
    assert storlet_code(uploaded(code_sha256="ab" * 32), "AUTH_t1") == ("iostack_mine.py",
                                                                        "ab" * 32)
    with pytest.raises(FilterUnavailable, match="recorded no code"):
        storlet_code(uploaded(), "AUTH_t1")
    with pytest.raises(FilterUnavailable, match="tenant AUTH_t1's own"):
        storlet_code(uploaded(code_sha256="ab" * 32, tenant="AUTH_t1"), "AUTH_t2")


def test_code_mismatch_names_the_code_found(tmp_path):
    path = tmp_path / "iostack_mine.py"
    path.write_bytes(b"print('hi')\n")
    good = hashlib.sha256(b"print('hi')\n").hexdigest()
    assert code_mismatch(str(path), good.upper()) is None
    assert "has SHA-256" in code_mismatch(str(path), "0" * 64)
    assert "cannot read" in code_mismatch(str(tmp_path / "gone.py"), good)


class EncodeRunner:
    """Answers like a storlet: ``metadata``, then ``output``; reads ``read`` input chunks."""

    def __init__(self, metadata, output, read=None):
        self.metadata, self.output, self.read = metadata, output, read
        self.code_sha256 = None

    def run(self, account, storlet, params, data_iter, metadata=None, code_sha256=None):
        self.code_sha256 = code_sha256
        for n, _chunk in enumerate(data_iter, start=1):
            if n == self.read:
                break
        return self.metadata, iter(self.output)


def encoder(runner) -> SandboxedEncoder:
    return SandboxedEncoder(runner, uploaded(code_sha256="cd" * 32), {}, T1)


def test_an_encode_that_delivers_what_it_announced_records_the_code():
    runner = EncodeRunner({"Iostack-Sysmeta": "{}", "Iostack-Encoded-Length": "6"},
                          [b"abc", b"def"])
    enc = encoder(runner)
    assert b"".join(enc.encode(iter([b"body", b"more"]))) == b"abcdef"
    assert runner.code_sha256 == "cd" * 32
    assert enc.sysmeta()[CODE_KEY] == "cd" * 32 and enc.sysmeta()["iostack.length"] == "8"


@pytest.mark.parametrize(("metadata", "output", "read", "match"), [
    # Regression: a storlet that died after its metadata left a short object committed.
    ({"Iostack-Sysmeta": "{}", "Iostack-Encoded-Length": "6"}, [b"abc"], None, "sent 3 bytes"),
    ({"Iostack-Sysmeta": "{}", "Iostack-Encoded-Length": "2"}, [b"abc"], None, "more than"),
    ({"Iostack-Sysmeta": "{}"}, [b"abc"], None, "did not announce Iostack-Encoded-Length"),
    ({"Iostack-Sysmeta": "{}", "Iostack-Encoded-Length": "3"}, [b"abc"], 1,
     "before the end of the body"),
])
def test_an_encode_that_breaks_its_word_fails_the_put(metadata, output, read, match):
    enc = encoder(EncodeRunner(metadata, output, read))
    with pytest.raises(FilterError, match=match):
        b"".join(enc.encode(iter([b"body", b"more", b"rest"])))


def test_another_tenants_filter_is_refused_before_the_sandbox_is_asked():
    runner = EncodeRunner({}, [])
    enc = SandboxedEncoder(runner, uploaded(code_sha256="cd" * 32, tenant="AUTH_t2"), {}, T1)
    with pytest.raises(FilterUnavailable):
        list(enc.encode(iter([b"x"])))
    assert runner.code_sha256 is None  # never called


def test_a_view_checks_the_code_its_record_names():
    class Runner:
        def run(self, account, storlet, params, data_iter, metadata=None, code_sha256=None):
            self.code_sha256 = code_sha256
            return {}, iter([b"x" * 4])

    class Source:
        length = 4

        def read(self, start, end):
            yield b"y" * (end - start)

    runner = Runner()
    sysmeta = {"iostack.runtime": "storlet", "iostack.storlet": "s.py", "iostack.length": "4",
               CODE_KEY: "ef" * 32}
    assert b"".join(SandboxedView(runner, Source(), sysmeta, T1).read(0, 4)) == b"xxxx"
    assert runner.code_sha256 == "ef" * 32



def test_a_pinned_storlet_runs_from_a_folder_holding_only_its_own_file(tmp_path):
    (tmp_path / "iostack_noop.py").write_text("genuine")
    (tmp_path / "json.py").write_text("a tenant's leftover dependency")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "__pycache__").mkdir()
    assert keep_only(str(tmp_path), "iostack_noop.py") == ["json.py", "pkg"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["__pycache__", "iostack_noop.py"]
    # Nothing left to remove: the daemon is not restarted for nothing.
    assert keep_only(str(tmp_path), "iostack_noop.py") == []
