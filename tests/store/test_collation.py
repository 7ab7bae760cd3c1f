"""``localeCompare`` order for ``createdAt`` ties (expected values from Node 24 / ICU 78)."""

from __future__ import annotations

import functools
import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_session_reference import collation
from dsh_session_reference.model import SessionRecord
from dsh_session_reference.store.listing import newest_first

# `xs.sort((a, b) => a.localeCompare(b))` in Node 24 with LC_ALL=C.UTF-8.
NODE_ORDER = [
    "",
    "😀",
    "1",
    "a",
    "A",
    "a_b",
    "a-b",
    "a1",
    "a10",
    "a2",
    "ab",
    "é",
    "sess-b",
    "sess-C",
    "x-ä",
    "x-Z",
    "\ud800",
    "\udfff",
    "\uffff",
]


def test_icu_order_matches_node() -> None:
    assert collation.icu_available()
    shuffled = list(reversed(NODE_ORDER))
    assert sorted(shuffled, key=collation.locale_compare_key) == NODE_ORDER


@pytest.mark.parametrize(
    ("a", "b", "sign"),
    [("sess-b", "sess-C", -1), ("x-ä", "x-Z", -1), ("a\x00", "a", 0), ("é", "e\u0301", 0), ("b", "a", 1)],
)
def test_locale_compare(a: str, b: str, sign: int) -> None:
    assert collation.locale_compare(a, b) == sign


def test_lone_surrogates_do_not_crash() -> None:
    assert collation.locale_compare("\ud800", "\ud800") == 0
    assert collation.locale_compare("\ud800", "\ufffd") == -1  # Node: '\ud800'.localeCompare('\ufffd') === -1
    assert isinstance(collation.locale_compare_key("a\udc00b"), bytes)


def test_fallback_approximates_icu_and_warns_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(collation, "_icu", None)
    collation._warn_once.cache_clear()
    with caplog.at_level(logging.WARNING, logger="dsh_session_reference.collation"):
        ascii_ids = ["sess-C", "x-Z", "ab", "a-b", "sess-b", "a", "x-ä", "1", "A", "é", "\ud800"]
        ordered = sorted(ascii_ids, key=collation.locale_compare_key)
        collation.locale_compare("a", "b")
    assert ordered == ["1", "a", "A", "a-b", "ab", "é", "sess-b", "sess-C", "x-ä", "x-Z", "\ud800"]
    assert collation.locale_compare("a\x00", "a") == 0
    assert not collation.icu_available()
    warnings = [record for record in caplog.records if "PyICU is not available" in record.getMessage()]
    assert len(warnings) == 1


def test_sort_is_a_consistent_comparator() -> None:
    compare = functools.cmp_to_key(collation.locale_compare)
    assert sorted(reversed(NODE_ORDER), key=compare) == NODE_ORDER


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.sampled_from([*NODE_ORDER, "a", "A", "ａ"])),
        max_size=12,
    )
)
def test_the_listing_sorts_ties_by_collation_only_and_stays_stable(entries: list[tuple[int, str]]) -> None:
    """ICU keys are computed for ``createdAt`` ties only; the order must be the plain rule's."""
    records = [
        SessionRecord(session_id, created, None, {"n": n}) for n, (created, session_id) in enumerate(entries)
    ]
    expected = sorted(records, key=lambda r: (-r.created_at, collation.locale_compare_key(r.id)))
    assert newest_first(list(records)) == expected
