"""Synthetic web access logs as CSV, in the spirit of the IOStack paper's Spark experiment.

Columns: ``timestamp, user_id, ip, method, url, status, bytes, duration_ms,
referrer, user_agent``; user ids follow a skewed (Zipf-like) popularity, as
real users do, so "count the requests of each user" has heavy hitters. Lines
are ~200 bytes; the user id is ~4 % of a line, which is what pushdown saves
when a job needs only that column.

    .venv/bin/python bench/loggen.py 100M > logs.csv        # to a file
    generate(size) / chunks(size, seed)                      # from Python

The output is deterministic for a seed. ``size`` takes K/M/G suffixes.
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
from collections.abc import Iterator

HEADER = b"timestamp,user_id,ip,method,url,status,bytes,duration_ms,referrer,user_agent\n"
USERS = 50_000
PAGES = [f"/{section}/{item}" for section in ("products", "blog", "api/v2/orders", "search",
                                              "account/settings", "static/img")
         for item in ("index.html", "list?page=2", "item-42", "item-1337", "view?id=9001",
                      "logo.png", "checkout", "feed.xml")]
AGENTS = [
    '"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 '
    'Safari/537.36"',
    '"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) '
    'Version/17.5 Safari/605.1.15"',
    '"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0"',
    '"curl/8.5.0"',
    '"python-requests/2.32.3"',
]
REFERRERS = ["-", "https://www.example.com/", "https://search.example.org/?q=storage",
             "https://news.example.net/item?id=123"]
STATUSES = [200] * 16 + [201, 204, 301, 304, 404, 404, 500, 503]
METHODS = ["GET"] * 8 + ["POST", "PUT"]
CHUNK_LINES = 20_000


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().removesuffix("B")
    return int(float(text[:-1]) * units[text[-1]]) if text[-1:] in units else int(text)


def chunks(size: int, seed: int = 1, header: bool = True) -> Iterator[bytes]:
    """About ``size`` bytes of log (whole lines, never more than ``size``), in pieces."""
    rng = random.Random(seed)
    # Zipf-like popularity: weight 1/rank, drawn by cumulative weights.
    cumulative = list(itertools.accumulate(1 / rank for rank in range(1, USERS + 1)))
    users = [f"u{rng.randrange(10**6):06d}" for _ in range(USERS)]
    left = size
    if header:
        yield HEADER
        left -= len(HEADER)
    second = 1_764_000_000
    while left > 0:
        picked = rng.choices(users, cum_weights=cumulative, k=CHUNK_LINES)
        lines = []
        for user in picked:
            second += rng.random() < 0.05
            lines.append(
                f"{second}.{rng.randrange(1000):03d},{user},10.{rng.randrange(256)}."
                f"{rng.randrange(256)}.{rng.randrange(1, 255)},{rng.choice(METHODS)},"
                f"{rng.choice(PAGES)},{rng.choice(STATUSES)},{rng.randrange(200, 90000)},"
                f"{rng.randrange(1, 2500)},{rng.choice(REFERRERS)},{rng.choice(AGENTS)}\n")
        data = "".join(lines).encode()
        if len(data) > left:
            data = data[: data.rfind(b"\n", 0, left) + 1]
            left = 0
        else:
            left -= len(data)
        if data:
            yield data


def generate(size: int, seed: int = 1, header: bool = True) -> bytes:
    return b"".join(chunks(size, seed, header))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("size", type=parse_size, help="bytes to write, e.g. 100M or 1G")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-header", action="store_true")
    args = parser.parse_args()
    for piece in chunks(args.size, args.seed, not args.no_header):
        sys.stdout.buffer.write(piece)
    return 0


if __name__ == "__main__":
    sys.exit(main())
