"""Swift server configs as ConfigParser documents, for tests that write edited copies.

Imported by tests anywhere under tests/ (pytest puts this directory, where
conftest.py is, on sys.path).
"""

from __future__ import annotations

from configparser import ConfigParser
from pathlib import Path


def read_conf(path: Path) -> ConfigParser:
    conf = ConfigParser(interpolation=None)
    conf.optionxform = str  # keys as written (tempauth's user_<account>_<user>)
    conf.read(path)
    return conf


def write_conf(conf: ConfigParser, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        conf.write(f)


def pipeline(conf: ConfigParser) -> list[str]:
    return conf["pipeline:main"]["pipeline"].split()


def set_pipeline(conf: ConfigParser, names: list[str]) -> None:
    conf["pipeline:main"]["pipeline"] = " ".join(names)
