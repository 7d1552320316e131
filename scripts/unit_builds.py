"""The unit suite on both builds at once: the compiled hot path and its pure-Python source
(``AGENTSTREAM_PURE=1``), as two pytest processes side by side (the unit tests are CPU-bound and
the machine has two cores; one after the other they would add a minute and a half to `make test`).

Each run's output goes to ``build/unit-<build>.log`` and is printed when both have finished; the
exit status is the first failing run's (0 when both pass). Used by `make test`."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILDS = {"compiled": {}, "pure": {"AGENTSTREAM_PURE": "1"}}


def main() -> int:
    logs = ROOT / "build"
    logs.mkdir(exist_ok=True)
    started = time.monotonic()
    runs: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
    for build, extra in BUILDS.items():
        log = logs / f"unit-{build}.log"
        env = {k: v for k, v in os.environ.items() if k != "AGENTSTREAM_PURE"} | extra
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit"],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        runs[build] = (process, log)
    status = 0
    for build, (process, log) in runs.items():
        code = process.wait()
        print(f"== unit tests, {build} build (exit {code}):", flush=True)
        sys.stdout.write(log.read_text(errors="replace"))
        status = status or code
    print(f"== both unit runs took {time.monotonic() - started:.0f}s", flush=True)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
