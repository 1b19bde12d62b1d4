"""``iostack --help`` and every verb's help read as plain text and end with an example."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import iostack
from iostack.cli import EXAMPLES, build_parser, leaf_parsers


def help_texts(parser: argparse.ArgumentParser) -> list[str]:
    texts = [parser.description or "", parser.epilog or ""]
    return texts + [action.help or "" for action in parser._actions]


def test_every_verb_shows_an_example_that_runs_that_verb():
    verbs = leaf_parsers(build_parser())
    assert set(verbs) - set(EXAMPLES) == set()  # a new verb needs its example
    for words, parser in verbs.items():
        help_text = parser.format_help()
        assert "example:\n  " in help_text, words
        first = EXAMPLES[words].splitlines()[0]
        assert first.startswith(f"iostack {words}"), words


def test_help_is_plain_text_without_rest_markup():
    parser = build_parser()
    assert "IOStack: storage policies" in parser.format_help()
    for words, verb in {"": parser, **leaf_parsers(parser)}.items():
        assert not [t for t in help_texts(verb) if "``" in t], words


def test_a_verb_s_error_is_all_it_writes_to_stderr(tmp_path):
    # No all-in-one in an empty state dir: the verb fails with its own one-line message,
    # and no library's import-time warning comes before it.
    exe = Path(sys.executable).with_name("iostack")
    run = subprocess.run([str(exe), "policy", "list"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60, check=False,
                         env={"PATH": os.environ["PATH"], "HOME": str(tmp_path),
                              "IOSTACK_STATE_DIR": str(tmp_path)})
    assert run.returncode != 0
    assert run.stderr.startswith("iostack: no all-in-one found"), run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr


def test_version_names_the_release():
    exe = Path(sys.executable).with_name("iostack")
    run = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=60,
                         check=True)
    assert run.stdout.strip() == f"iostack {iostack.__version__}"
    assert re.fullmatch(r"\d+\.\d+\.\d+", iostack.__version__)  # semantic versioning
