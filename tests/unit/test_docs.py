"""Every ```python sample in docs/*.md and README.md runs (on memory://).

The samples of one page run in order in one module namespace (a page tells one story); afterwards
every ``test_*`` function the page defined is called (``async`` ones on an event loop), so the
testing examples are tested the way a user's pytest would run them. A sample that cannot run here
(it needs Spark's JVM or a remote cluster) is preceded by ``<!-- no-run: why -->``.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
FENCE = re.compile(r"(?P<skip><!-- no-run: [^>]+-->\s*\n)?^```python[^\n]*\n(?P<code>.*?)^```", re.S | re.M)


def samples(page: Path) -> list[tuple[int, str]]:
    text = page.read_text()
    return [
        (text[: m.start("code")].count("\n") + 1, m.group("code")) for m in FENCE.finditer(text) if not m.group("skip")
    ]


def test_the_docs_have_samples_and_every_skip_says_why() -> None:
    assert sum(len(samples(p)) for p in PAGES) >= 12
    for page in PAGES:
        for m in re.finditer(r"<!-- no-run:(.*?)-->", page.read_text()):
            assert m.group(1).strip(), f"{page.name}: a no-run marker without a reason"


@pytest.mark.parametrize("page", [p for p in PAGES if samples(p)], ids=lambda p: p.name)
def test_page_samples_run(page: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AGENTSTREAM_BROKER", "memory://")  # App(broker="kafka://...") samples run in-process
    monkeypatch.setenv("AGENTSTREAM_DATA_DIR", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    name = "docs_" + re.sub(r"\W", "_", page.stem)
    module = types.ModuleType(name)
    module.__file__ = str(page)
    monkeypatch.setitem(sys.modules, name, module)
    ns: dict[str, Any] = module.__dict__
    for line, code in samples(page):
        tree = ast.parse(code, filename=f"{page.name}:{line}")
        ast.increment_lineno(tree, line - 1)
        exec(compile(tree, str(page), "exec"), ns)
    tests = [(n, f) for n, f in ns.items() if n.startswith("test_") and callable(f)]
    for _n, fn in tests:
        if inspect.iscoroutinefunction(fn):
            asyncio.run(asyncio.wait_for(fn(), 60))
        else:
            fn()


def test_generated_references_cover_every_setting_and_command() -> None:
    import dataclasses

    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import mkdocs_hooks
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    from agentstream.cli import cli
    from agentstream.settings import Settings

    settings = mkdocs_hooks.settings_reference()
    for f in dataclasses.fields(Settings):
        if f.name not in ("id", "extra"):
            assert f"`AGENTSTREAM_{f.name.upper()}`" in settings, f.name
    commands = mkdocs_hooks.cli_reference()
    for name in cli.commands:
        assert f"## {name}\n" in commands and f"Usage: agentstream {name}" in commands, name
    page = mkdocs_hooks.on_page_markdown((ROOT / "docs" / "configuration.md").read_text(), None, None, None)
    assert mkdocs_hooks.SETTINGS_MARK not in page and "`AGENTSTREAM_BROKER`" in page
