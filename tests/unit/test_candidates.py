"""The candidate table answers every query as upstream's rule would, however queries follow each other.

The rule is restated here in its plainest form (filter every row, stable sort
by cwd rank, cut), and the table, with its narrowing of the previous query's
matches and its per-cwd orders, must agree with it on every step of random
query sequences, including the strings where JS and Python semantics part
(lone surrogates, final sigma, dotted capital I) and a NUL (the table once
joined a row's fields with one).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_session_reference.candidates import CandidateTable, Row, candidate_rank
from dsh_session_reference.jsjson import js_includes, js_lower, js_normalize
from dsh_session_reference.model import SessionRecord

ALPHABET = ["a", "b", "M", "Σ", "ς", "σ", "İ", "i", "\u0307", "\ud83d", "\ude00", "😀", "\x00", "/", " "]
text = st.text(alphabet=st.sampled_from(ALPHABET), max_size=6)
cwds = st.sampled_from([None, "/w", "/other", "/W"])


def label_matches(record: SessionRecord, label: str, needle: str) -> bool:
    """Upstream's test: ``needle`` (already lowered) in the lowered id, cwd or label, as UTF-16."""
    fields = (record.id, record.cwd, label)
    return any(js_includes(js_lower(field), needle) for field in fields if field is not None)


def spec(rows: list[Row], needle: str, target_id: str | None, target_cwd: str | None, cap: int) -> list[Row]:
    kept = [
        (index, row)
        for index, row in enumerate(rows)
        if row.record.id != target_id and (needle == "" or label_matches(row.record, row.label, needle))
    ]
    kept.sort(key=lambda entry: (candidate_rank(entry[1].record.cwd, target_cwd), entry[0]))
    return [row for _, row in kept[:cap]]


@st.composite
def tables(draw: st.DrawFn) -> list[Row]:
    count = draw(st.integers(0, 12))
    rows = []
    for index in range(count):
        session_id = draw(st.sampled_from([f"s{index}", f"S{index}σ", f"İ{index}"]))
        record = SessionRecord(session_id, 0, draw(cwds), {})
        rows.append(Row(record, draw(st.one_of(st.just(session_id), text))))
    return rows


@settings(max_examples=300, deadline=None)
@given(
    rows=tables(),
    queries=st.lists(st.tuples(text, st.booleans(), st.booleans(), cwds), min_size=1, max_size=6),
    cap=st.integers(1, 5),
)
def test_every_query_in_a_sequence_matches_the_plain_rule(
    rows: list[Row], queries: list[tuple[str, bool, bool, str | None]], cap: int
) -> None:
    table = CandidateTable(rows)
    previous, target_cwd = "", None
    for typed, extend, move, cwd in queries:
        # Half the steps extend the previous query, as typing does; the others jump anywhere.
        # Some come from a document with another cwd (another rank order) in between.
        query = previous + typed if extend else typed
        target_cwd = cwd if move else target_cwd
        needle = js_lower(js_normalize(query))
        target_id = rows[0].record.id if rows and extend else None
        assert table.select(needle, target_id, target_cwd, cap) == spec(
            rows, needle, target_id, target_cwd, cap
        )
        previous = query


def test_an_extended_query_only_retests_the_previous_matches() -> None:
    rows = [Row(SessionRecord(f"s{index}", 0, None, {}), f"title {index}") for index in range(1000)]
    table = CandidateTable(rows)
    assert len(table.select("title 1", None, None, 5000)) == 111
    # Plant a match outside the kept ones: the extended query must not look there.
    haystacks = table._lowered()
    haystacks[500] = "title 12"
    assert [row.label for row in table.select("title 12", None, None, 50)] == [
        "title 12",
        *(f"title 12{digit}" for digit in range(10)),
    ]
    assert "title 500" in [row.label for row in table.select("itle 12", None, None, 50)]  # a fresh scan


def test_typing_on_in_a_document_with_another_cwd_ranks_for_that_cwd() -> None:
    rows = [Row(SessionRecord(f"s{index}", 0, cwd, {}), "alpha") for index, cwd in enumerate(["/a", "/b"])]
    table = CandidateTable(rows)
    assert [row.record.id for row in table.select("al", None, "/a", 5)] == ["s0", "s1"]
    # "alp" narrows "al"'s matches, which were kept in /a's order: /b ranks its own first.
    assert [row.record.id for row in table.select("alp", None, "/b", 5)] == ["s1", "s0"]


def test_a_query_never_matches_across_two_fields() -> None:
    table = CandidateTable([Row(SessionRecord("ab", 0, "ef", {}), "cd")])
    assert [table.select(needle, None, None, 5) != [] for needle in ("ab", "cd", "ef", "bc", "de")] == [
        True,
        True,
        True,
        False,
        False,
    ]


@settings(max_examples=200, deadline=None)
@given(
    rows=tables(),
    new_labels=st.lists(st.tuples(st.integers(0, 11), text), max_size=4),
    before=st.lists(text, max_size=3),
    queries=st.lists(text, min_size=1, max_size=4),
    target_cwd=cwds,
)
def test_a_relabelled_table_answers_as_a_fresh_one(
    rows: list[Row],
    new_labels: list[tuple[int, str]],
    before: list[str],
    queries: list[str],
    target_cwd: str | None,
) -> None:
    """Titles verified behind a kept table relabel some rows; what the old table memoised (its
    last matches, orders, haystacks) must not leak into the answers of the new one."""
    table = CandidateTable(rows)
    for query in before:
        table.select(js_lower(js_normalize(query)), None, target_cwd, 5)
    labels = {index: label for index, label in new_labels if index < len(rows)}
    relabelled = table.relabelled(labels)
    expected = [Row(row.record, labels.get(index, row.label)) for index, row in enumerate(rows)]
    assert list(relabelled.rows) == expected
    assert list(table.rows) == rows  # the kept table is not changed under a request using it
    for query in queries:
        needle = js_lower(js_normalize(query))
        assert relabelled.select(needle, None, target_cwd, 5) == spec(expected, needle, None, target_cwd, 5)
