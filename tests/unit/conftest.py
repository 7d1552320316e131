"""Unit-test settings shared by every module here.

Hypothesis runs derandomized (the same examples on every run: a failure reproduces, a pass is not
luck) and with no per-example deadline nor "too slow" health check: on a loaded CI machine one
slow example is no bug, and Hypothesis would report it as one (DeadlineExceeded, or Flaky when the
rerun is fast).

Every test gets the root logger back as it found it: a test that runs a CLI command in process
installs a handler on the stream it was given (pytest's capture, click's runner), which is closed
once the test ends, and later log lines would each print a "--- Logging error ---" traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "agentstream",
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("agentstream")


@pytest.fixture(autouse=True)
def _root_logger_restored() -> Iterator[None]:
    root, aiokafka = logging.getLogger(), logging.getLogger("aiokafka")
    saved = root.handlers[:], root.level, aiokafka.level
    yield
    root.handlers[:], root.level = saved[0], saved[1]
    aiokafka.setLevel(saved[2])
