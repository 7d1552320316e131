"""``faust.web.drivers`` and the ``web`` setting: Faust chooses the web server by the URL's scheme;
agentstream's is aiohttp, so ``aiohttp://...`` is honoured and any other scheme refused at start."""

from __future__ import annotations

import pytest

import agentstream.faust as faust
from agentstream.exceptions import ConfigError
from agentstream.faust.web import drivers
from agentstream.faust.web.drivers import aiohttp as aiohttp_driver
from agentstream.web import Web


def test_the_aiohttp_driver_is_agentstream_s_web_server() -> None:
    assert drivers.by_name("aiohttp") is drivers.by_url("aiohttp://") is drivers.by_url("aiohttp://host:1") is Web
    assert aiohttp_driver.Web is Web and dict(drivers.DRIVERS) == {"aiohttp": Web}


@pytest.mark.parametrize("url", ["uvicorn://", "aiohttp", "asgi://localhost"])
def test_another_driver_is_not_found_naming_the_choices(url: str) -> None:
    with pytest.raises(ModuleNotFoundError, match="Available choices: aiohttp"):
        drivers.by_url(url)


@pytest.mark.parametrize("url", ["aiohttp://", "aiohttp://localhost", "aiohttp:"])
def test_a_web_setting_of_scheme_aiohttp_is_accepted(url: str) -> None:
    assert faust.App("web-driver", web=url).conf.web == url


@pytest.mark.parametrize("url", ["uvicorn://", "aiohttp", "asgi://localhost"])
def test_a_web_setting_of_another_scheme_is_refused_at_start_naming_it(url: str) -> None:
    with pytest.raises(ConfigError, match="routes table lookups between workers") as err:
        faust.App("web-driver", web=url)
    assert err.value.setting == "web"


def test_a_web_setting_given_as_a_yarl_url_is_read_like_its_string() -> None:
    """Faust's settings take yarl URLs (``web=URL('aiohttp://')``); the scheme decides as for a string."""
    from yarl import URL

    assert faust.App("web-driver", web=URL("aiohttp://localhost")).conf.web == "aiohttp://localhost"
    with pytest.raises(ConfigError, match="routes table lookups between workers"):
        faust.App("web-driver", web=URL("uvicorn://"))
