"""Unit-test settings shared by every module here.

Hypothesis runs derandomized (the same examples on every run: a failure reproduces, a pass is not
luck) and with no per-example deadline nor "too slow" health check: on a loaded CI machine one
slow example is no bug, and Hypothesis would report it as one (DeadlineExceeded, or Flaky when the
rerun is fast).
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile(
    "agentstream",
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("agentstream")
