"""Static validation of Python storlets before deployment (the code is parsed, never run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from iostack.filters.metadata import Param
from iostack.storlet_runtime.cli import parse_param
from iostack.storlet_runtime.deploy import (
    MAX_STORLET_BYTES,
    StorletValidationError,
    check_python_storlet,
)
from iostack.storlet_runtime.storlets import upper

GOOD = b"class Shout:\n    def __init__(self, logger):\n        pass\n\n" \
       b"    def __call__(self, in_files, out_files, params):\n        pass\n"


def test_shipped_storlet_is_valid():
    code = Path(upper.__file__).read_bytes()
    storlet = check_python_storlet("upper.py", code)
    assert storlet.main == "upper.UpperStorlet"
    assert storlet.headers["X-Object-Meta-Storlet-Main"] == "upper.UpperStorlet"
    assert storlet.headers["X-Object-Meta-Storlet-Language"] == "Python"


def test_main_is_inferred_or_checked():
    assert check_python_storlet("shout.py", GOOD).main == "shout.Shout"
    assert check_python_storlet("shout.py", GOOD, "shout.Shout").main == "shout.Shout"


@pytest.mark.parametrize(("name", "code", "main", "message"), [
    ("shout.txt", GOOD, None, "must be a Python module name"),
    ("my-shout.py", GOOD, None, "must be a Python module name"),
    ("shout.py", b"class Shout(:\n", None, r"shout.py:1:\d+: syntax error"),
    ("shout.py", b"\xff\xfe", None, "not UTF-8"),
    ("shout.py", GOOD, "other.Shout", "must be <module>.<Class>"),
    ("shout.py", GOOD, "shout.sub.Shout", "must be <module>.<Class>"),
    ("shout.py", GOOD, "shout.Missing", "no top-level class 'Missing'"),
    ("shout.py", b"class A:\n    pass\n", None, "classes with __call__: none"),
    ("shout.py", GOOD + GOOD.replace(b"Shout", b"Whisper"), None, "Shout, Whisper"),
    ("shout.py", b"#" * (MAX_STORLET_BYTES + 1), None, "larger than"),
])
def test_refusals_say_why(name, code, main, message):
    with pytest.raises(StorletValidationError, match=message):
        check_python_storlet(name, code, main)


def test_code_is_not_executed(tmp_path):
    marker = tmp_path / "ran"
    code = f"open({str(marker)!r}, 'w').close()\n".encode() + GOOD
    check_python_storlet("shout.py", code)
    assert not marker.exists()


def test_an_uploads_declared_parameters_are_parsed_and_bad_ones_named():
    assert parse_param("by:int:0..255=1") == Param("by", "int", default="1", minimum=0,
                                                   maximum=255)
    assert parse_param("prefix:str") == Param("prefix", "str")
    for bad, why in (("by", "NAME:TYPE"), ("by:number", "unknown type"),
                     ("By:int", "NAME:TYPE")):
        with pytest.raises(StorletValidationError, match=why):
            parse_param(bad)
