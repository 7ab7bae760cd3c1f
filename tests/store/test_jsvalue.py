"""``JSON.parse`` / ``String()`` semantics for log values (expected values from Node 24)."""

from __future__ import annotations

import pytest

from dsh_session_reference.jsjson import js_stringify
from dsh_session_reference.store.jsvalue import (
    UNDEFINED,
    deep_equal_json,
    is_negative_zero,
    is_safe_integer,
    js_parse,
    js_parse_line,
    js_string,
    strict_equal,
)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            "[12345678901234567890, 1e20, 123456789012345678, 9007199254740993, 1e21, 1.5e300]",
            "12345678901234567000,100000000000000000000,123456789012345680,9007199254740992,1e+21,1.5e+300",
        ),
        (
            "[1e-7, 0.000001, 1.5e-10, 123e-20, 2.5e25, 1.0, -0, -0.0, 0.1]",
            "1e-7,0.000001,1.5e-10,1.23e-18,2.5e+25,1,0,0,0.1",
        ),
        ("[1e400, -1e400]", "Infinity,-Infinity"),
        ('[null, true, "s", [1, [2, 3]], {}, [null]]', ",true,s,1,2,3,[object Object],"),
    ],
)
def test_numbers_parse_and_print_as_in_js(text: str, shown: str) -> None:
    assert js_string(js_parse(text)) == shown


def test_integral_values_are_ints_so_they_print_as_js_does() -> None:
    value = js_parse('{"a": 1.0, "b": 2e3, "c": 12345678901234567890}')
    assert value == {"a": 1, "b": 2000, "c": 12345678901234567000}
    assert js_stringify(value) == '{"a":1,"b":2000,"c":12345678901234567000}'


def test_negative_zero_is_kept_only_for_header_checks() -> None:
    assert not is_negative_zero(js_parse("-0"))
    assert is_negative_zero(js_parse("-0", keep_negative_zero=True))
    assert is_negative_zero(js_parse("-0.0e5", keep_negative_zero=True))


def test_object_key_order_follows_js() -> None:
    value = js_parse('{"b":1,"10":2,"2":3,"a":4,"b":5,"4294967295":6,"01":7}')
    assert list(value) == ["2", "10", "b", "a", "4294967295", "01"]
    assert value["b"] == 5
    assert list(js_parse('{"z":1,"\\u0031":2}')) == ["1", "z"]
    # Unicode digits are not array indices in JS (Node: ["2","b","²","٣"]); Python's isdigit says they are.
    assert list(js_parse('{"b":1,"²":2,"٣":3,"2":4}')) == ["2", "b", "²", "٣"]


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", "\ufeff{}", "{'a':1}", "", "[1,]", "01"])
def test_invalid_json_is_rejected(text: str) -> None:
    with pytest.raises(ValueError):
        js_parse(text)


def _typed(value: object) -> object:
    """``value`` with every number tagged by its Python type and every object by its key order."""
    if isinstance(value, dict):
        return ("object", [(key, _typed(item)) for key, item in value.items()])
    if isinstance(value, list):
        return [_typed(item) for item in value]
    return (type(value).__name__, value)


@pytest.mark.parametrize(
    "line",
    [
        b"[12345678901234567890, 1e20, 123456789012345678, 9007199254740993, 1e21, 1.5e300]",
        b"[1e-7, 0.000001, 1.5e-10, 123e-20, 2.5e25, 1.0, -0, -0.0, 0.1]",
        b"[999999999999999, -999999999999999, 9007199254740991, -9007199254740992, 1234567890123456]",
        b'{"seq0":1,"time0":1733000000000,"data":{"dt":[1,2,3],"texts":["a","b","c","d"]}}',
        b'{"b":1,"10":2,"2":3,"a":4,"b":5,"4294967295":6,"01":7}',
        b'{"z":1,"\\u0031":2}',
        b'{"b":1,"\xc2\xb2":2,"\xd9\xa3":3,"2":4}',
        b'{"text":"id 12345678901234567 in a string","n":5}',
        b'{"bad utf-8":"\xff\xfe"}',
        b"[1e400, -1e400]",
        b'[null, true, "s", [1, [2, 3]], {}, [null]]',
    ],
)
def test_a_log_line_parses_as_js_parse_does(line: bytes) -> None:
    """The fast path for lines without long digit runs gives exactly :func:`js_parse`'s values:
    the same types (``1.0`` is an int, big integers round as JS's numbers do) and key order."""
    expected = js_parse(line.decode("utf-8", "replace"))
    assert _typed(js_parse_line(line)) == _typed(expected)
    assert js_string(js_parse_line(line)) == js_string(expected)


@pytest.mark.parametrize("line", [b"NaN", b"[Infinity]", b"{'a':1}", b"", b"[1,]", b"01", b"[" * 100_000])
def test_a_log_line_that_is_not_json_is_rejected(line: bytes) -> None:
    with pytest.raises(ValueError):
        js_parse_line(line)


def test_deep_nesting_counts_as_unparsable() -> None:
    with pytest.raises(ValueError):
        js_parse("[" * 100_000 + "]" * 100_000)


def test_type_checks_are_javascripts() -> None:
    assert not is_safe_integer(True)
    assert is_safe_integer(2**53 - 1) and not is_safe_integer(2**53)
    assert is_safe_integer(3.0) and not is_safe_integer(3.5)
    assert not strict_equal(True, 1)
    assert strict_equal(1, 1.0)
    assert not strict_equal({}, {})
    assert deep_equal_json({"a": [1, {"b": None}]}, {"a": [1.0, {"b": None}]})
    assert not deep_equal_json({"a": True}, {"a": 1})
    assert not deep_equal_json({"a": 1}, {"a": 1, "b": 2})
    assert js_string(UNDEFINED) == "undefined"
