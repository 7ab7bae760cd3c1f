"""dsh web's API as data (``dsh_web``): the composer's text, the hosts a prompt may go to, the
requests and the replies, as dsh web 0.1.0-rc.8's own client has them."""

from __future__ import annotations

import pytest

from dsh_session_reference.dsh_web import (
    DEFAULT_URL,
    NotAHost,
    WebError,
    client_request,
    create_payload,
    created_session,
    is_loopback_address,
    prompt_payload,
    reply_value,
    web_host,
)
from dsh_session_reference.uri import composer_text


def test_composer_text_trims_only_the_ends_as_javascript_does() -> None:
    """The composer sends ``draft.trim()`` (the set itself is checked against Node in
    ``tests/dsh/test_composer_trim.py``): both ends, nothing inside, and not what Python's
    ``strip()`` adds (U+001C-U+001F, U+0085)."""
    assert composer_text("\ufeff\n  look at @[a](dsh-session:x)\r\n\n") == "look at @[a](dsh-session:x)"
    assert composer_text("a\n\nb\n") == "a\n\nb"
    assert composer_text("\x1c\x85text\x85") == "\x1c\x85text\x85"
    assert composer_text("hello\n") == "hello"


@pytest.mark.parametrize(
    ("url", "host", "port", "shown"),
    [
        (DEFAULT_URL, "127.0.0.1", 3080, "http://127.0.0.1:3080"),
        ("http://127.0.0.1:3080/", "127.0.0.1", 3080, "http://127.0.0.1:3080"),
        ("http://localhost:4000", "localhost", 4000, "http://localhost:4000"),
        ("http://LOCALHOST:4000", "localhost", 4000, "http://localhost:4000"),
        ("http://[::1]:3080", "::1", 3080, "http://[::1]:3080"),
        ("http://127.1.2.3", "127.1.2.3", 80, "http://127.1.2.3:80"),
    ],
)
def test_loopback_hosts_are_accepted(url: str, host: str, port: int, shown: str) -> None:
    found = web_host(url)
    assert (found.host, found.port, found.url) == (host, port, shown)


def test_the_host_header_is_the_authority_dsh_checks() -> None:
    assert web_host("http://[::1]:3080").authority == "[::1]:3080"
    assert web_host(DEFAULT_URL).authority == "127.0.0.1:3080"


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://192.168.1.20:3080", "not on this machine"),
        ("http://example.com:3080", "not on this machine"),
        ("http://127.0.0.1.example.com:3080", "not on this machine"),
        ("http://0.0.0.0:3080", "not on this machine"),
        ("http://127.0.0.256:3080", "not on this machine"),
        ("http://0x7f.0.0.1:3080", "not on this machine"),
        ("https://127.0.0.1:3080", "not an http:// URL"),
        ("127.0.0.1:3080", "not an http:// URL"),
        ("http://user@127.0.0.1:3080", "more than a host and port"),
        ("http://127.0.0.1:3080/?x=1", "more than a host and port"),
        ("http://127.0.0.1:3080/api", "has a path"),
        ("http://127.0.0.1:99999", "is no URL"),
        ("http://127.0.0.1:0", "port 0"),
    ],
)
def test_anything_else_is_refused_with_the_reason(url: str, says: str) -> None:
    with pytest.raises(NotAHost, match=says):
        web_host(url)


def test_a_huge_address_is_quoted_bounded_in_the_reason() -> None:
    """urlsplit's own words quote a port whole: a megabyte of it is not said back."""
    with pytest.raises(NotAHost, match="is no URL") as refused:
        web_host("http://127.0.0.1:" + "x" * 1_000_000)
    assert len(str(refused.value)) < 600


def test_a_connected_peer_is_checked_as_an_address() -> None:
    assert is_loopback_address("127.0.0.1") and is_loopback_address("::1")
    assert not is_loopback_address("10.0.0.1") and not is_loopback_address("localhost")


def test_requests_are_the_composers() -> None:
    """``callUnary``'s envelope; ``session.prompt`` as the composer's default sink sends it."""
    assert client_request("session.create", create_payload("/work/app"), "r1") == {
        "type": "client-request",
        "rpcId": "r1",
        "method": "session.create",
        "payload": {"cwd": "/work/app"},
    }
    assert prompt_payload("s1", "hi", "Europe/Paris") == {
        "sessionId": "s1",
        "mode": "queue",
        "content": [{"type": "text", "text": "hi"}],
        "clientTimeZone": "Europe/Paris",
    }
    assert prompt_payload("s1", "hi", "UTC")["clientTimeZone"] == "UTC"
    # dsh fails the whole prompt on a zone that is no IANA Area/Location name: left out instead.
    for zone in (None, "", "Paris", "../../etc", "x" * 100, "Europe/Paris\n"):
        assert "clientTimeZone" not in prompt_payload("s1", "hi", zone)


def test_a_success_reply_gives_its_value() -> None:
    reply = {"type": "server-response", "rpcId": "r1", "result": {"ok": True, "value": {"sessionId": "s9"}}}
    assert created_session(reply_value(reply, "r1")) == "s9"


@pytest.mark.parametrize(
    ("reply", "code", "says"),
    [
        (
            {
                "type": "server-response",
                "rpcId": "r1",
                "result": {
                    "ok": False,
                    "error": {"code": "session-not-found", "message": "no s1", "details": {}},
                },
            },
            "session-not-found",
            "no s1",
        ),
        ({"type": "server-response", "rpcId": "r2", "result": {"ok": True}}, "bad-reply", "another request"),
        ({"type": "client-request"}, "bad-reply", "no dsh server-response"),
        ([], "bad-reply", "no dsh server-response"),
        ({"type": "server-response", "rpcId": "r1"}, "bad-reply", "no result"),
        ({"type": "server-response", "rpcId": "r1", "result": {"ok": False}}, "error", "no message"),
    ],
)
def test_anything_but_success_is_a_web_error(reply: object, code: str, says: str) -> None:
    with pytest.raises(WebError, match=says) as raised:
        reply_value(reply, "r1")
    assert raised.value.code == code


def test_a_create_reply_without_an_id_is_an_error() -> None:
    with pytest.raises(WebError, match="without a sessionId"):
        created_session({"agentPreset": "x"})
