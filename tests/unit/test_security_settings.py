"""Issue 15 items 8 and 10 (settings side): every setting validated up front with its name, broker
TLS/SASL settings and Faust's credential classes, secrets never printed."""

from __future__ import annotations

import logging
import ssl
from pathlib import Path

import pytest

from agentstream.exceptions import ConfigError
from agentstream.settings import Settings

# -- item 8: finite numbers, store URL, data dir, web host, unknown variables -------------------------


@pytest.mark.parametrize(
    "name,value",
    [
        ("commit_interval", float("nan")),
        ("session_timeout", float("inf")),
        ("rebalance_timeout", float("-inf")),
        ("max_task_idle", float("nan")),
        ("producer_linger", float("nan")),
        ("shutdown_timeout", float("inf")),
        ("consumer_fetch_max_wait", float("nan")),
        ("heartbeat_interval", float("nan")),
    ],
)
def test_nan_and_infinity_are_rejected_with_the_setting_name(name: str, value: float) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.build("a", {name: value}, environ={})
    assert info.value.setting == name and "finite" in str(info.value)


@pytest.mark.parametrize("raw", ["nan", "inf", "-inf", "NaN", "Infinity"])
def test_nan_from_the_environment_names_the_variable(raw: str) -> None:
    with pytest.raises(ConfigError, match="AGENTSTREAM_COMMIT_INTERVAL"):
        Settings.build("a", {}, environ={"AGENTSTREAM_COMMIT_INTERVAL": raw})


def test_numbers_of_the_wrong_type_name_the_setting() -> None:
    with pytest.raises(ConfigError) as info:
        Settings.build("a", {"topic_partitions": "eight"}, environ={})
    assert info.value.setting == "topic_partitions"
    with pytest.raises(ConfigError) as info:
        Settings.build("a", {"topic_partitions": 2.5}, environ={})
    assert info.value.setting == "topic_partitions"


@pytest.mark.parametrize("url", ["rocks://", "bogus", "redis://localhost", ""])
def test_bad_store_url_fails_when_settings_are_built(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.build("a", {"store": url}, environ={})
    assert info.value.setting == "store"


def test_data_dir_that_is_a_file_fails_up_front(tmp_path: Path) -> None:
    f = tmp_path / "afile"
    f.write_text("x")
    with pytest.raises(ConfigError) as info:
        Settings.build("a", {"data_dir": f}, environ={}).check_data_dir()
    assert info.value.setting == "data_dir" and "not a directory" in str(info.value)
    with pytest.raises(ConfigError) as info:  # below a file: cannot be created
        Settings.build("a", {"data_dir": f / "sub"}, environ={}).check_data_dir()
    assert info.value.setting == "data_dir"
    s = Settings.build("a", {"data_dir": tmp_path / "new" / "dir"}, environ={})
    s.check_data_dir()
    assert not (tmp_path / "new").exists()  # the check creates nothing


async def test_worker_checks_the_data_dir_before_it_connects(tmp_path: Path) -> None:
    import agentstream
    from agentstream.worker.worker import Worker

    f = tmp_path / "afile"
    f.write_text("x")
    app = agentstream.App("dd-check", broker="kafka://127.0.0.1:1", data_dir=f)  # no broker there: never reached
    app.Table("t", default=int)
    app.topic("src")
    worker = Worker(app)
    try:
        with pytest.raises(ConfigError) as info:
            await worker.start()
        assert info.value.setting == "data_dir"
    finally:
        await worker.stop()


@pytest.mark.parametrize("host", ["http://127.0.0.1", "127.0.0.1:6066", "host name", "a/b", "-x"])
def test_bad_web_host_is_reported_as_web_host(host: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.build("a", {"web_host": host}, environ={})
    assert info.value.setting == "web_host"


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0", "::1", "localhost", "my-host.example.com", ""])
def test_good_web_hosts_pass(host: str) -> None:
    assert Settings.build("a", {"web_host": host}, environ={}).web_host == host


def test_unknown_agentstream_variable_is_named_with_the_closest_match(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="agentstream.settings"):
        Settings.build("a", {}, environ={"AGENTSTREAM_COMIT_INTERVAL": "2", "AGENTSTREAM_ARTIFACTS": "/tmp"})
    text = caplog.text
    assert "AGENTSTREAM_COMIT_INTERVAL" in text and "did you mean AGENTSTREAM_COMMIT_INTERVAL" in text
    assert "AGENTSTREAM_ARTIFACTS" not in text


# -- item 10: TLS and SASL settings ----------------------------------------------------------------------


def test_sasl_settings_from_the_environment_become_client_arguments() -> None:
    from agentstream.transport.kafka.security import client_security

    s = Settings.build(
        "a",
        {},
        environ={
            "AGENTSTREAM_BROKER_SASL_MECHANISM": "scram-sha-512",
            "AGENTSTREAM_BROKER_SASL_USERNAME": "u",
            "AGENTSTREAM_BROKER_SASL_PASSWORD": "hunter2",
            "AGENTSTREAM_BROKER_SSL": "1",
        },
    )
    kw = client_security(s)
    assert kw["security_protocol"] == "SASL_SSL" and kw["sasl_mechanism"] == "SCRAM-SHA-512"
    assert kw["sasl_plain_username"] == "u" and kw["sasl_plain_password"] == "hunter2"
    assert type(kw["sasl_plain_password"]) is str  # aiokafka gets the clear text
    assert isinstance(kw["ssl_context"], ssl.SSLContext) and kw["ssl_context"].verify_mode == ssl.CERT_REQUIRED


def test_secrets_are_redacted_everywhere() -> None:
    from agentstream import OAuthCredentials, SASLCredentials, SSLCredentials

    s = Settings.build(
        "a",
        {
            "broker_sasl_mechanism": "PLAIN",
            "broker_sasl_username": "u",
            "broker_sasl_password": "hunter2",
            "web_token": "tok-secret",
        },
        environ={},
    )
    for text in (
        repr(s),
        str(s),
        f"{s.broker_sasl_password}",
        f"{s.web_token}",
        repr(SASLCredentials(username="u", password="hunter2")),
        repr(SSLCredentials(password="hunter2")),
        repr(OAuthCredentials(token="hunter2")),
    ):
        assert "hunter2" not in text and "tok-secret" not in text, text
    assert s.broker_sasl_password == "hunter2"  # still usable as the value


def test_faust_credential_objects() -> None:
    from agentstream import GSSAPICredentials, OAuthCredentials, SASLCredentials, SSLCredentials
    from agentstream.transport.kafka.security import client_security

    ctx = ssl.create_default_context()
    kw = client_security(
        Settings.build(
            "a",
            {
                "broker_credentials": SASLCredentials(
                    username="u", password="p", mechanism="SCRAM-SHA-256", ssl_context=ctx
                )
            },
            environ={},
        )
    )
    assert kw["security_protocol"] == "SASL_SSL" and kw["ssl_context"] is ctx
    assert client_security(Settings.build("a", {"broker_credentials": SSLCredentials(ctx)}, environ={})) == {
        "security_protocol": "SSL",
        "ssl_context": ctx,
    }
    assert client_security(Settings.build("a", {"ssl_context": ctx}, environ={}))["security_protocol"] == "SSL"

    class Provider:
        async def token(self) -> str:
            return "t"

    provider = Provider()
    kw = client_security(Settings.build("a", {"broker_credentials": OAuthCredentials(provider)}, environ={}))
    assert kw["sasl_mechanism"] == "OAUTHBEARER" and kw["sasl_oauth_token_provider"] is provider
    kw = client_security(
        Settings.build("a", {"broker_credentials": GSSAPICredentials(kerberos_service_name="k")}, environ={})
    )
    assert kw["sasl_mechanism"] == "GSSAPI" and kw["sasl_kerberos_service_name"] == "k"
    assert client_security(Settings.build("a", {}, environ={})) == {}


@pytest.mark.parametrize(
    "options,setting",
    [
        ({"broker_sasl_mechanism": "MD5"}, "broker_sasl_mechanism"),
        ({"broker_sasl_mechanism": "PLAIN", "broker_sasl_password": "p"}, "broker_sasl_username"),
        ({"broker_sasl_mechanism": "SCRAM-SHA-256", "broker_sasl_username": "u"}, "broker_sasl_password"),
        ({"broker_sasl_mechanism": "OAUTHBEARER"}, "broker_sasl_oauth_token"),
        ({"broker_ssl_cafile": "/nonexistent/ca.pem"}, "broker_ssl_cafile"),
        ({"broker_ssl_keyfile": __file__}, "broker_ssl_certfile"),
        ({"broker_credentials": "user:pass"}, "broker_credentials"),
        ({"ssl_context": "yes"}, "ssl_context"),
    ],
)
def test_bad_security_settings_name_the_setting(options: dict[str, object], setting: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.build("a", options, environ={})
    assert info.value.setting == setting


def test_ca_file_that_is_not_a_certificate(tmp_path: Path) -> None:
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate")
    with pytest.raises(ConfigError) as info:
        Settings.build("a", {"broker_ssl_cafile": str(bad)}, environ={})
    assert info.value.setting == "broker_ssl_cafile"
