"""Summarise a py-spy ``--format raw`` profile (collapsed stacks): top functions by self time and
by inclusive time, as Markdown tables.

    python -m bench.profile_report artifacts/bench/wordcount/agentstream.pyspy.txt [--top 25]
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
from pathlib import Path

FRAME = re.compile(r"^(?P<name>.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def short_path(path: str) -> str:
    for marker in ("site-packages/", "/work/main/", "lib/python3"):
        i = path.find(marker)
        if i >= 0:
            rest = path[i + len(marker) :]
            return rest.split("/", 1)[1] if marker == "lib/python3" and "/" in rest else rest
    return path


def parse(path: Path) -> tuple[collections.Counter[str], collections.Counter[str], int]:
    self_t: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for raw in path.read_text(errors="replace").splitlines():
        raw = raw.strip()
        if not raw:
            continue
        stack, _, count_s = raw.rpartition(" ")
        try:
            count = int(count_s)
        except ValueError:
            continue
        frames = []
        for f in stack.split(";"):
            m = FRAME.match(f)
            if m is None:
                continue  # "process ..." / "thread ..." pseudo-frames
            frames.append(f"{m.group('name')} ({short_path(m.group('file'))})")
        if not frames:
            continue
        total += count
        self_t[frames[-1]] += count
        for f in set(frames):
            incl[f] += count
    return self_t, incl, total


def table(counter: collections.Counter[str], total: int, top: int, title: str) -> str:
    lines = [f"| # | {title} | samples | % |", "|---:|---|---:|---:|"]
    for i, (name, n) in enumerate(counter.most_common(top), 1):
        lines.append(f"| {i} | `{name}` | {n} | {100.0 * n / total:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("profile", type=Path)
    p.add_argument("--top", type=int, default=25)
    p.add_argument(
        "--inclusive-filter",
        default="agentstream/",
        help="inclusive table: only frames whose file contains this (default agentstream/)",
    )
    args = p.parse_args(argv)
    self_t, incl, total = parse(args.profile)
    print(f"{total} samples (active, non-idle)\n")
    print("Self time (the function itself was on top of the stack):\n")
    print(table(self_t, total, args.top, "function (file)"))
    print("\nInclusive time, agentstream frames only:\n")
    filtered = collections.Counter({k: v for k, v in incl.items() if args.inclusive_filter in k})
    print(table(filtered, total, args.top, "function (file)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
