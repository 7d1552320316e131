"""Faust's examples/ scenarios (faust-streaming), rewritten as a Faust user writes them, importing
only ``agentstream as faust`` (the one-word rewrite). Run on the real broker by
tests/integration/test_faust_examples.py; each module says what Faust prints for it."""
