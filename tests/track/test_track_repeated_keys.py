"""``track`` refuses properties or context JSON text that names a key twice, by the batch
path's check (``repeated_key``) and message, and sends nothing of the event."""

from __future__ import annotations

import pytest

import churn_connector as cc


@pytest.mark.parametrize(
    ("properties", "context", "column"),
    [
        ('{"plan":"a","plan":"b"}', None, "properties"),
        (None, '{"app":{"v":"1","v":"1"}}', "context"),
    ],
)
def test_track_refuses_a_repeated_key_by_name_and_sends_nothing(
    client: cc.Client, sandbox: cc.Sandbox, properties: str | None, context: str | None, column: str
) -> None:
    with pytest.raises(cc.DataValidationError) as caught:
        client.track("u1", "login", properties=properties, context=context)
    assert caught.value.checks == ("repeated_key",)
    assert f"repeated_key: {column}: the JSON text names the key" in str(caught.value)
    assert sandbox.requests_log().empty


def test_track_names_both_objects_when_both_repeat_a_key(client: cc.Client) -> None:
    with pytest.raises(cc.DataValidationError) as caught:
        client.track("u1", "login", properties='{"a":1,"a":2}', context='{"b":1,"b":2}')
    assert caught.value.checks == ("repeated_key", "repeated_key")
    text = str(caught.value)
    assert "properties: the JSON text names the key 'a'" in text
    assert "context: the JSON text names the key 'b'" in text
