"""ChurnHook, the connection type and the provider metadata, without running a DAG."""

from __future__ import annotations

import json
import subprocess
import sys
import typing
from importlib.metadata import entry_points

import jsonschema
import pytest
from airflow.providers_manager import ProvidersManager
from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

import churn_connector as cc
from churn_connector._core.declarations import options_of
from churn_connector.airflow import ChurnHook
from churn_connector.airflow.hook import base_url_from, client_options_from_extra
from churn_connector.airflow.provider import CONN_FIELDS, get_provider_info

KEY = "sk_test_hook_key"


@pytest.mark.parametrize(
    ("host", "port", "schema", "url"),
    [
        ("https://api.example.com", None, None, "https://api.example.com"),
        ("https://api.example.com/", None, "", "https://api.example.com"),
        ("api.example.com", None, None, "https://api.example.com"),
        ("https://api.example.com", 8443, None, "https://api.example.com:8443"),
        ("https://api.example.com:9000/base", 8443, None, "https://api.example.com:9000/base"),
        ("https://api.example.com", None, "v1", "https://api.example.com/v1"),
        ("http://127.0.0.1:8123", None, None, "http://127.0.0.1:8123"),
    ],
)
def test_the_base_url_comes_from_host_port_and_schema(
    host: str, port: int | None, schema: str | None, url: str
) -> None:
    assert base_url_from(host, port, schema) == url


@pytest.mark.parametrize(
    "env",
    [
        # JSON form: host kept verbatim, scheme included; extras typed
        json.dumps(
            {
                "conn_type": "churn",
                "host": "https://api.example.com",
                "password": KEY,
                "extra": {"max_concurrency": 3, "read_timeout": 7.5, "deadline": 60},
            }
        ),
        # URI form: the scheme inside host is %-encoded; every extra arrives as a string
        f"churn://:{KEY}@https%3A%2F%2Fapi.example.com?max_concurrency=3&read_timeout=7.5&deadline=60",
        # the URI form Connection.get_uri() writes for a host with a scheme
        f"churn://https://:{KEY}@api.example.com?max_concurrency=3&read_timeout=7.5&deadline=60",
    ],
    ids=["json", "uri", "get_uri"],
)
def test_every_connection_form_gives_the_same_client(
    monkeypatch: pytest.MonkeyPatch, env: str
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_CHURN_DEFAULT", env)
    client = ChurnHook().get_conn()
    assert client.config.base_url == "https://api.example.com"
    assert client.config.api_key.reveal() == KEY
    assert (client.config.max_concurrency, client.config.read_timeout) == (3, 7.5)
    assert client.config.deadline == 60
    assert KEY not in repr(client) and KEY not in repr(client.config)


def test_extras_are_read_as_their_types_and_checked() -> None:
    options = client_options_from_extra(
        {
            "extra__churn__auth_header": "x-api-key",  # the older prefixed spelling
            "bisect_rejected": "false",
            "max_request_bytes": "none",
            "deadline": "null",
            "max_attempts": "2",
            "batch_size": None,  # an empty form field: the package default
            "read_timeout": "",
        }
    )
    assert options == {
        "auth_header": "x-api-key",
        "bisect_rejected": False,
        "max_request_bytes": None,
        "deadline": None,
        "retry": cc.RetryPolicy(max_attempts=2),
    }
    with pytest.raises(cc.ConfigurationError, match=r"unknown key 'concurrency'.*max_concurrency"):
        client_options_from_extra({"concurrency": 4})
    with pytest.raises(cc.ConfigurationError, match="belongs in the connection's password"):
        client_options_from_extra({"api_key": "x"})
    with pytest.raises(cc.ConfigurationError, match="'max_concurrency': cannot read 'many'"):
        client_options_from_extra({"max_concurrency": "many"})
    with pytest.raises(cc.ConfigurationError, match="'trust_env': cannot read 'maybe'"):
        client_options_from_extra({"trust_env": "maybe"})
    with pytest.raises(cc.ConfigurationError, match="max_attempts must be at least 1"):
        client_options_from_extra({"max_attempts": 0})


def test_hook_options_override_the_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = {"max_concurrency": 3, "max_attempts": 5}
    conn = {"conn_type": "churn", "host": "http://127.0.0.1:1", "password": KEY, "extra": extra}
    monkeypatch.setenv("AIRFLOW_CONN_CHURN_DEFAULT", json.dumps(conn))
    assert ChurnHook(max_concurrency=9).get_conn().config.max_concurrency == 9
    assert ChurnHook(max_attempts=1).get_conn().config.retry.max_attempts == 1
    policy = cc.RetryPolicy(max_attempts=4)
    assert ChurnHook(retry=policy).get_conn().config.retry == policy
    with pytest.raises(cc.ConfigurationError, match="unknown key 'base_url'"):
        ChurnHook(base_url="https://elsewhere.example.com").get_conn()


def test_a_timeouts_override_replaces_the_connections_four(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = {"read_timeout": 7, "deadline": 60}
    conn = {"conn_type": "churn", "host": "http://127.0.0.1:1", "password": KEY, "extra": extra}
    monkeypatch.setenv("AIRFLOW_CONN_CHURN_DEFAULT", json.dumps(conn))
    assert ChurnHook().get_conn().config.timeouts == cc.Timeouts(read=7, deadline=60)
    config = ChurnHook(timeouts=cc.Timeouts(read=10)).get_conn().config
    assert config.timeouts == cc.Timeouts(read=10)


def test_test_connection_names_the_problem_without_sending(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def connect(**conn: object) -> tuple[bool, str]:
        monkeypatch.setenv("AIRFLOW_CONN_CHURN_DEFAULT", json.dumps({"conn_type": "churn", **conn}))
        return ChurnHook().test_connection()

    assert connect(host="https://api.example.com") == (
        False,
        "connection 'churn_default' has no password: put the API key there",
    )
    ok, message = connect(password=KEY)
    assert not ok and "no host" in message
    ok, message = connect(host="http://api.example.com", password=KEY)
    assert not ok and "plain http://" in message
    ok, message = connect(host="https://api.example.com", password=KEY)
    assert ok and message.endswith("(nothing was sent)") and KEY not in message


def test_the_provider_info_module_imports_nothing_from_airflow() -> None:
    code = (
        "import sys, churn_connector.airflow.provider as p; p.get_provider_info(); "
        "bad = [m for m in sys.modules if m == 'airflow' or m.startswith('airflow.')]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_connection_forms_fields_are_declared_client_options_of_their_type() -> None:
    declared = {o.name: o for cls in (cc.ClientConfig, cc.RetryPolicy) for o in options_of(cls)}
    json_types = {int: "integer", float: "number"}
    for name, form in CONN_FIELDS.items():
        hint = declared[name].hint  # a KeyError: the form has a field no option declares
        base = next(a for a in (typing.get_args(hint) or (hint,)) if a is not type(None))
        assert form["schema"]["type"][0] == json_types.get(base, "string"), name


def test_the_provider_info_follows_airflows_schema() -> None:
    import airflow  # noqa: PLC0415

    folder = airflow.__path__[0]
    with open(f"{folder}/provider_info.schema.json") as f:
        jsonschema.validate(get_provider_info(), json.load(f))
    with open(f"{folder}/provider.yaml.schema.json") as f:
        connection = json.load(f)["properties"]["connection-types"]["items"]
    for conn_type in get_provider_info()["connection-types"]:
        jsonschema.validate(conn_type, connection)
    (entry,) = [
        e for e in entry_points(group="apache_airflow_provider") if e.value.startswith("churn")
    ]
    assert entry.load() is get_provider_info


def test_airflow_discovers_the_provider_its_hook_and_form() -> None:
    info = get_provider_info()
    runtime = ProvidersManagerTaskRuntime()  # type: ignore[no-untyped-call]  # workers' view
    assert info["package-name"] in runtime.providers
    hook = runtime.hooks["churn"]
    assert hook is not None and hook.hook_class_name == "churn_connector.airflow.hook.ChurnHook"
    # what `airflow providers list` and the API server use
    manager = ProvidersManager()  # type: ignore[no-untyped-call]
    assert manager.providers["churn-connector"].data["name"] == "Churn connector"
    widgets = manager.connection_form_widgets
    assert widgets["extra__churn__max_concurrency"].field["schema"]["type"] == ["integer", "null"]
    behaviour = manager.field_behaviours["churn"]
    assert behaviour["relabeling"] == {"host": "Base URL", "password": "API key"}
    assert "login" in behaviour["hidden_fields"]
