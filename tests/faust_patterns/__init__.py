"""Faust apps of issue 44's four patterns, written with ``import faust`` (run by
tests/integration/test_faust_patterns.py under faust-streaming and under agentstream)."""
