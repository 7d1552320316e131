"""Runs every compatibility scenario in this one process and prints one JSON line per scenario.

    python -m tests.faust_compat.runner faust        # under faust-streaming (its virtualenv's python)
    python -m tests.faust_compat.runner agentstream  # under agentstream (``import faust`` aliased)

Options: ``--only NAME`` (repeatable), ``--broker URL`` (scenarios that need the real broker run
only when given). Each line: ``COMPAT {"name", "item", "out": printed lines, "result": returned
value}`` or ``{"name", "item", "error": "Type: message"}``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import sys
import time
import traceback
from typing import Any

PREFIX = "COMPAT "
TIMEOUT = 15.0  # seconds per scenario (each takes milliseconds under Faust, the first one a few seconds on a busy machine): a hung one fails, the rest run


def _jsonable(obj: Any) -> Any:
    return json.loads(json.dumps(obj, default=repr))


async def _run_one(sc: Any) -> dict[str, Any]:
    from . import kit

    kit.reset()
    buf = io.StringIO()
    row: dict[str, Any] = {"name": sc.name, "item": sc.item}
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(buf):
            result = await asyncio.wait_for(sc.body(), sc.timeout or TIMEOUT)
        row["result"] = _jsonable(result)
    except BaseException as exc:  # a scenario's failure is its result
        if isinstance(exc, KeyboardInterrupt):
            raise
        if isinstance(exc, TimeoutError | asyncio.TimeoutError):
            row["error"] = f"TimeoutError: no result within {sc.timeout or TIMEOUT}s"
        else:
            row["error"] = f"{type(exc).__name__}: {exc}"
        row["traceback"] = traceback.format_exc(limit=-6)
    row["out"] = buf.getvalue().splitlines()
    row["seconds"] = round(time.perf_counter() - start, 3)
    return row


async def _main(framework: str, only: list[str], broker: str | None) -> None:
    if framework == "agentstream":
        from . import shim

        shim.install()
    if broker:
        os.environ["COMPAT_BROKER"] = broker
    from . import scenarios  # noqa: F401  (registers every scenario)
    from .kit import FRAMEWORK
    from .registry import SCENARIOS

    assert FRAMEWORK == framework, f"`import faust` gives {FRAMEWORK}, not {framework}"
    for sc in SCENARIOS.values():
        if (only and sc.name not in only) or (sc.broker and not broker):
            continue
        row = await _run_one(sc)
        sys.stdout.write(PREFIX + json.dumps(row) + "\n")
        sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("framework", choices=["faust", "agentstream"])
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--broker")
    args = parser.parse_args()
    asyncio.run(_main(args.framework, args.only, args.broker))
    os._exit(0)  # leftover client tasks of a failed scenario must not hold the process


if __name__ == "__main__":
    main()
