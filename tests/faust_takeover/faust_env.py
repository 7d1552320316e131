"""A test-only virtualenv with faust-streaming (never a dependency of agentstream itself).

Made once under ``.venv/faust-takeover`` (or ``$AGENTSTREAM_FAUST_VENV``) by ``make faust-venv``
or by the first test that needs it; a lock keeps parallel sessions from building it twice.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FAUST_VENV = Path(os.environ.get("AGENTSTREAM_FAUST_VENV", ROOT / ".venv" / "faust-takeover"))
FAUST_REQUIREMENT = "faust-streaming>=0.10"


def faust_python() -> Path:
    return FAUST_VENV / "bin" / "python"


def _works() -> bool:
    py = faust_python()
    return (
        py.exists()
        and subprocess.run([str(py), "-c", "import faust"], capture_output=True, timeout=120).returncode == 0
    )


def ensure_faust_venv() -> tuple[Path | None, str]:
    """``(python of the Faust venv, "")``, or ``(None, why it could not be made)``."""
    if _works():
        return faust_python(), ""
    FAUST_VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(FAUST_VENV.parent / ".faust-takeover.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _works():
            return faust_python(), ""
        steps = [
            [sys.executable, "-m", "venv", "--clear", str(FAUST_VENV)],
            [str(faust_python()), "-m", "pip", "install", "-q", FAUST_REQUIREMENT],
        ]
        for cmd in steps:
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            except (OSError, subprocess.TimeoutExpired) as exc:
                return None, f"{' '.join(cmd[:4])}: {exc}"
            if done.returncode != 0:
                return None, f"{' '.join(cmd[:4])} failed: {(done.stderr or done.stdout)[-800:]}"
    return (faust_python(), "") if _works() else (None, "faust-streaming installed but `import faust` fails")


if __name__ == "__main__":  # make faust-venv
    py, why = ensure_faust_venv()
    print(py or f"cannot make the Faust virtualenv: {why}")
    sys.exit(0 if py else 1)
