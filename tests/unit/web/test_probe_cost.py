"""/readyz and /metadata answer from the cheap status snapshot: no table key counts (counting merges
every partition's unflushed writes); /status and /metrics count keys."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

import agentstream.worker.status as status_module

from .test_web_hardening import _harness

pytestmark = pytest.mark.asyncio


async def test_probes_and_metadata_do_not_count_table_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    counted: list[Any] = []
    real = status_module.key_count

    def counting(part: Any) -> int:
        counted.append(part)
        return real(part)

    monkeypatch.setattr(status_module, "key_count", counting)
    async with await _harness() as h:
        await h.send("sentences", {"text": "a b c"})
        await h.wait_idle()
        async with aiohttp.ClientSession() as s:
            for path in ("/readyz", "/metadata"):
                async with s.get(f"{h.web.url}{path}") as r:
                    assert r.status in (200, 503)
                    body = await r.json()
                    assert "error" not in body, body
            assert counted == []
            async with s.get(f"{h.web.url}/status") as r:
                assert r.status == 200
                assert (await r.json())["tables"]
            assert counted
            n = len(counted)
            async with s.get(f"{h.web.url}/metrics") as r:
                assert r.status == 200 and "agentstream_table_keys{" in await r.text()
            assert len(counted) > n
