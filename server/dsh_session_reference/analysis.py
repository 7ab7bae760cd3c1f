"""What is wrong with a prompt's mentions, judged the way ``prepare`` judges it.

One pass over a document produces every fact the editor features need: the
mention spans, the distinct referenced sessions in ``prepare``'s order, what
each one would cost, and the findings that become diagnostics. The checks are
``prepare``'s own steps applied per reference instead of stopping at the first
failure, which is what makes the tested invariant hold: a document has an
error finding exactly when ``parse`` + ``prepare`` of its text would fail.

- parse: every span the lenient scanner marks invalid (the strict parser throws on the first);
- self reference: every mention of the target session (checked before dedupe);
- too many: mentions of each distinct session beyond ``maxReferences``;
- read failure / unknown session and byte budget: ``read_surface`` and retention of the
  sessions ``prepare`` would read, using the first mention's label as ``prepare`` does;
- labels (warnings: the mention is sound, but a person would misread it): a label that is not
  the session's own (its title, else its id, as upstream labels a candidate), and one holding
  what a chip would not show as itself. An editor draws neither as a chip.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from .cancellation import AbortSignal, Cancelled
from .display import display_label, legible, shortened
from .errors import BUDGET_EXCEEDED, SessionReferenceError
from .jsjson import js_normalize, js_stringify
from .labels import STALE_LABEL, misleading_labels, own_label
from .model import ConversationSnapshot, SessionRecord, SurfaceSnapshot
from .resolver import AgentRef, SessionReferenceResolver
from .retention import RetainedSource
from .tokens import COUNTER, TokenCount
from .uri import SESSION_REFERENCE_SCHEME, MentionSpan, SessionReference, iter_session_references

Severity = Literal["error", "warning", "information", "hint"]

# Stable diagnostic codes (documented in docs/architecture.md's LSP contract).
MALFORMED_URI: Final = "malformed-uri"
NONCANONICAL_URI: Final = "noncanonical-uri"
SELF_REFERENCE: Final = "self-reference"
TOO_MANY_REFERENCES: Final = "too-many-references"
UNKNOWN_SESSION: Final = "unknown-session"
READ_FAILED: Final = "read-failed"
BUDGET_EXCEEDED_CODE: Final = "budget-exceeded"
DUPLICATE_REFERENCE: Final = "duplicate-reference"
MORE_PROBLEMS: Final = "more-problems"

MAX_KEPT_SPANS: Final = 10_000
"""Spans kept individually; beyond this a pathological document is still judged
(the invariant holds) but only summarised, so memory stays bounded."""
MAX_FINDINGS: Final = 1_000
_STOP_CHECK_EVERY: Final = 256


@dataclass(frozen=True)
class Finding:
    """One problem or hint, positioned by offsets into the analysed (normalized) text."""

    start: int
    end: int
    severity: Severity
    code: str
    message: str
    session_id: str | None = None


@dataclass
class Reference:
    """One distinct session the document mentions, with ``prepare``'s view of it."""

    session_id: str
    label: str
    spans: list[MentionSpan] = field(default_factory=list)
    index: int | None = None
    """Position among the distinct non-self references (``inputIndex``), ``None`` for self."""
    self_reference: bool = False
    record: SessionRecord | None = None
    title: str | None = None
    error: SessionReferenceError | None = None
    retained: RetainedSource | None = None
    snapshot: SurfaceSnapshot | ConversationSnapshot | None = None
    tokens: TokenCount | None = None
    """The tokens of this source's data as the snapshot serializes it (exact where it can be);
    ``None`` where the analysis was asked not to count them."""


@dataclass(frozen=True)
class Intended:
    """The session an invalid mention meant, found in the store: the id its URI decodes to
    (a noncanonical URI), or the id itself pasted where its URI belongs (``raw``)."""

    session_id: str
    title: str | None
    raw: bool

    @property
    def label(self) -> str:
        """Its title, else its id, as a mention's label shows it."""
        return display_label(self.title if self.title is not None else self.session_id)

    @property
    def name(self) -> str:
        """How a message names it: its label, quoted as JS would."""
        return js_stringify(self.label)


@dataclass
class Analysis:
    text: str
    spans: list[MentionSpan]
    references: list[Reference]
    findings: list[Finding]
    mention_count: int
    max_references: int
    max_reference_bytes: int
    intended: dict[int, Intended] = field(default_factory=dict)
    """For an invalid span (by its start) whose session the store has: that session."""
    missing: frozenset[str] = frozenset()
    """Ids invalid spans decode to that were looked up and that no session has."""

    @property
    def error_count(self) -> int:
        return sum(1 for finding in self.findings if finding.severity == "error")

    @property
    def has_errors(self) -> bool:
        return self.error_count > 0

    def reference_for(self, session_id: str) -> Reference | None:
        return next((reference for reference in self.references if reference.session_id == session_id), None)

    def spans_at(self, start: int, end: int | None = None) -> list[MentionSpan]:
        """Kept spans touching ``[start, end]`` (a cursor touches a span at either edge)."""
        stop = start if end is None else end
        return [span for span in self.spans if span.start <= stop and start <= span.end]


@dataclass
class _Scan:
    spans: list[MentionSpan]
    references: dict[str, Reference]
    mention_count: int
    overflow_start: int | None
    overflow_invalid: int


def _scan(text: str, stop: AbortSignal | None) -> _Scan:
    spans: list[MentionSpan] = []
    references: dict[str, Reference] = {}
    count = overflow_invalid = 0
    overflow_start: int | None = None
    for span in iter_session_references(text):
        count += 1
        if stop is not None and count % _STOP_CHECK_EVERY == 0 and stop.aborted:
            raise Cancelled
        kept = len(spans) < MAX_KEPT_SPANS
        if kept:
            spans.append(span)
        elif overflow_start is None:
            overflow_start = span.start
        if span.session_id is None:
            overflow_invalid += 0 if kept else 1
            continue
        reference = references.get(span.session_id)
        if reference is None:
            label = span.session_id if span.label is None else span.label
            reference = references[span.session_id] = Reference(span.session_id, label)
        if kept:
            reference.spans.append(span)
    return _Scan(spans, references, count, overflow_start, overflow_invalid)


async def analyze(
    text: str,
    resolver: SessionReferenceResolver,
    agent: AgentRef,
    stop: AbortSignal | None = None,
    *,
    count_tokens: bool = False,
) -> Analysis:
    """Scan ``text`` and check every reference against the store (reads run in threads).
    ``count_tokens``: count each retained source's tokens too (what the editor shows in hints and
    hovers); off for ``check``, which shows none and would load the 60-70 MB tokenizer for nothing."""
    text = js_normalize(text)
    scan = await asyncio.to_thread(_scan, text, stop)
    config = resolver.config
    references = list(scan.references.values())
    distinct = 0
    for reference in references:
        if agent.id is not None and reference.session_id == agent.id:
            reference.self_reference = True
        else:
            reference.index = distinct
            distinct += 1
    intended, missing = await _load_store_facts(references, scan.spans, resolver, stop)
    to_read = [r for r in references if r.index is not None and r.index < config.max_references]
    await asyncio.gather(*(read_reference(reference, resolver, count_tokens) for reference in to_read))
    # In a thread: 10,000 kept spans make as many findings, which is no work for the event loop.
    findings = await asyncio.to_thread(
        _findings, scan, references, config.max_references, config.max_reference_bytes, intended, missing
    )
    return Analysis(
        text=text,
        spans=scan.spans,
        references=references,
        findings=findings,
        mention_count=scan.mention_count,
        max_references=config.max_references,
        max_reference_bytes=config.max_reference_bytes,
        intended=intended,
        missing=missing,
    )


MAX_INTENDED_LOOKUPS: Final = 64
"""Distinct ids of invalid mentions looked up in the store; a document of thousands of broken
mentions gets fixes for the first ones, and the rest only their diagnostics."""


MAX_RAW_ID: Final = 512
"""The longest text after ``dsh-session:`` looked up as a pasted raw id (a dsh id is a UUID; a
megabyte of pasted text is not one, and is not worth a lookup)."""


def _guess(span: MentionSpan) -> tuple[str, bool] | None:
    """The id an invalid span meant, if it says: ``(id, raw)``."""
    if span.session_id is not None:
        return None
    if span.recovered_id is not None:
        return span.recovered_id, False
    payload = span.uri[len(SESSION_REFERENCE_SCHEME) :]
    return (payload, True) if 0 < len(payload) <= MAX_RAW_ID else None


async def _load_store_facts(
    references: Sequence[Reference],
    spans: Sequence[MentionSpan],
    resolver: SessionReferenceResolver,
    stop: AbortSignal | None,
) -> tuple[dict[int, Intended], frozenset[str]]:
    """Listing record and current title of every referenced session, the sessions invalid
    mentions meant (:class:`Intended`, by span start), and the ids such mentions decode to that
    no session has, in one lookup (cached by the source).

    What an invalid mention meant is looked up so a fix can name the session, and so a fix that
    would produce another error (a session the store does not have) is never offered.
    """
    guesses = {span.start: guess for span in spans if (guess := _guess(span)) is not None}
    meant = list(dict.fromkeys(session_id for session_id, _ in guesses.values()))[:MAX_INTENDED_LOOKUPS]
    wanted = {reference.session_id for reference in references} | set(meant)
    if not wanted:
        return {}, frozenset()
    query = resolver.query
    try:
        by_id = await asyncio.to_thread(query.find_records, wanted, stop)
    except Cancelled:
        raise
    except Exception:
        # An unreadable root: every read below fails too and says why.
        return {}, frozenset()
    records = list(by_id.values())
    titles: dict[str, str | None] = {}
    if records:
        try:
            observations = await asyncio.to_thread(query.read_titles, records, stop)
        except Cancelled:
            raise
        except Exception:
            observations = []
        titles = {
            record.id: observation.title
            for record, observation in zip(records, observations, strict=False)
            if observation.error is None
        }
    for reference in references:
        reference.record = by_id.get(reference.session_id)
        reference.title = titles.get(reference.session_id)
    intended = {
        start: Intended(session_id, titles.get(session_id), raw)
        for start, (session_id, raw) in guesses.items()
        if session_id in by_id
    }
    return intended, frozenset(session_id for session_id in meant if session_id not in by_id)


async def read_reference(
    reference: Reference, resolver: SessionReferenceResolver, count_tokens: bool = False
) -> None:
    """``prepare``'s read and retention for one reference (its failures, one reference at a time):
    its ``snapshot``, ``retained`` and ``tokens`` are set, or its ``error``."""
    inputs = [SessionReference(reference.session_id, reference.label)]
    try:
        snapshots = await resolver.read_sources(inputs)
        reference.snapshot = snapshots[0]
        retained = (await asyncio.to_thread(resolver.render_sources, inputs, snapshots))[0]
        reference.retained = retained
        # In the thread: the source's JSON is made there once, kept for the hints and hovers after.
        if count_tokens:
            reference.tokens = await asyncio.to_thread(lambda: COUNTER.count(retained.serialized))
    except SessionReferenceError as error:
        reference.error = error


def quoted(text: str) -> str:
    """A title, label or id as a message names it: quoted as JS would, at most
    :data:`~.display.SHOWN_CHARS` characters of it, with nothing in it a person would misread
    (:func:`~.display.legible`)."""
    return js_stringify(legible(text))


def _invalid_message(span: MentionSpan, intended: Intended | None, missing: frozenset[str]) -> str:
    """What is wrong, useful half first: the session it meant (by title) and whether a fix
    exists. The URI itself is what the squiggle underlines; repeating it hid the rest."""
    if intended is not None and intended.raw:
        return (
            f"this is the id of session {intended.name}, not its URI (the URI is the id as a JSON "
            "string, base64url-encoded); a quick fix uses that session"
        )
    if intended is not None and span.problem == "noncanonical":  # its reason would repeat the id
        return f"not the canonical URI of session {intended.name}; a quick fix rewrites it"
    if intended is not None:
        return f"a broken URI of session {intended.name}: {span.reason}; a quick fix rewrites it"
    recovered = span.recovered_id
    if recovered == "":
        return "invalid session URI: it decodes to an empty session id, which no session has"
    if recovered is not None and recovered in missing:
        what = "it is not in canonical form" if span.problem == "noncanonical" else span.reason
        return f"invalid session URI: {what}, and no session in the store has the id {quoted(recovered)}"
    return f"invalid session URI: {span.reason}"


def _findings(
    scan: _Scan,
    references: Sequence[Reference],
    max_references: int,
    max_bytes: int,
    intended: dict[int, Intended],
    missing: frozenset[str],
) -> list[Finding]:
    findings: list[Finding] = []
    for span in scan.spans:
        if span.problem is not None:
            end = span.uri_start + len(span.uri)
            code = NONCANONICAL_URI if span.problem == "noncanonical" else MALFORMED_URI
            meant = intended.get(span.start)
            findings.append(
                Finding(
                    span.uri_start,
                    end,
                    "error",
                    code,
                    _invalid_message(span, meant, missing),
                    span.recovered_id if meant is None else meant.session_id,
                )
            )
    overflow = scan.overflow_start if scan.overflow_start is not None else 0
    for reference in references:
        findings.extend(_reference_findings(reference, max_references, max_bytes, overflow))
    findings.sort(key=lambda finding: (finding.start, finding.end))
    if scan.overflow_start is not None:
        severity: Severity = "error" if scan.overflow_invalid else "information"
        findings.append(
            Finding(
                scan.overflow_start,
                scan.overflow_start,
                severity,
                MORE_PROBLEMS,
                f"only the first {MAX_KEPT_SPANS} of {scan.mention_count} mentions are shown individually; "
                f"{scan.overflow_invalid} of the rest are invalid",
            )
        )
    if len(findings) > MAX_FINDINGS:
        hidden = findings[MAX_FINDINGS:]
        findings = findings[:MAX_FINDINGS]
        hidden_errors = sum(1 for finding in hidden if finding.severity == "error")
        findings.append(
            Finding(
                hidden[0].start,
                hidden[0].start,
                "error" if hidden_errors else "information",
                MORE_PROBLEMS,
                f"{len(hidden)} more findings not shown ({hidden_errors} errors)",
            )
        )
    return findings


def _reference_findings(
    reference: Reference, max_references: int, max_bytes: int, overflow: int
) -> list[Finding]:
    """Findings for one distinct session; ``overflow`` places those whose mentions were not kept.

    Each message is made once and shared by every mention it is about: a title or first label
    copied into one message per mention is what made a 300 KB label times 4,000 mentions a
    1.2 GB analysis."""
    sid = reference.session_id
    # A session is named by its title where it has one: that is what a person recognises.
    name = quoted(reference.title if reference.title is not None else sid)
    spans = reference.spans
    places = [(span.start, span.end) for span in spans] or [(overflow, overflow)]
    first = places[0]
    if reference.self_reference:
        message = f"session {name} cannot reference itself (it is the target session)"
        return [Finding(start, end, "error", SELF_REFERENCE, message, sid) for start, end in places]
    out: list[Finding] = []
    if len(spans) > 1:
        again = f"session {name} is already referenced above; prepare ignores this mention"
        relabelled = f"{again}; the first mention's label {quoted(reference.label)} is used"
        out.extend(
            Finding(
                span.start,
                span.end,
                "hint",
                DUPLICATE_REFERENCE,
                again if span.label == reference.label else relabelled,
                sid,
            )
            for span in spans[1:]
        )
    if reference.index is not None and reference.index >= max_references:
        message = (
            f"a message may reference at most {max_references} sessions; "
            f"this is distinct session {reference.index + 1}"
        )
        out.extend(Finding(start, end, "error", TOO_MANY_REFERENCES, message, sid) for start, end in places)
        if reference.record is None:
            out.append(_unknown(first, sid))
        return out
    error = reference.error
    if error is not None:
        if error.code == BUDGET_EXCEEDED:
            message = (
                f"{error.message}: session {name} does not fit in maxReferenceBytes ({max_bytes} bytes) "
                "even with its messages omitted"
            )
            out.append(Finding(*first, "error", BUDGET_EXCEEDED_CODE, message, sid))
        elif reference.record is None:
            out.append(_unknown(first, sid, error.message))
        else:
            out.append(Finding(*first, "error", READ_FAILED, shortened(error.message, MAX_DETAIL), sid))
        return out
    out.extend(_label_findings(reference))
    return out


def _label_findings(reference: Reference) -> list[Finding]:
    """A warning on each mention :func:`misleading_labels` finds. Editors show neither as a chip."""
    misleading = misleading_labels(reference.title, reference.session_id, reference.spans)
    if not misleading:
        return []
    own = own_label(reference.title, reference.session_id)
    whose = f"session {quoted(own)}" if reference.title is not None else f"the untitled session {quoted(own)}"
    messages: dict[tuple[str, str | None], str] = {}  # one message per label, shared by its mentions
    out: list[Finding] = []
    for span in reference.spans:
        if span.start not in misleading or span.label is None:
            continue
        code, part = misleading[span.start]
        key = (span.label, part)
        if key not in messages:
            messages[key] = (
                f"this mention sends {whose}, but its label reads {quoted(span.label)}: "
                "the model gets that session under this label"
                if code == STALE_LABEL
                else f"the label of {whose} holds {part}; it is shown as written"
            )
        out.append(Finding(span.start, span.end, "warning", code, messages[key], reference.session_id))
    return out


MAX_DETAIL: Final = 1_000
"""The most characters of a store's error a finding repeats (it may quote a log's content)."""


def _unknown(place: tuple[int, int], session_id: str, detail: str | None = None) -> Finding:
    message = f"no session {quoted(session_id)} in the sessions store"
    if detail is not None:
        message += f" ({shortened(detail, MAX_DETAIL)})"
    return Finding(place[0], place[1], "error", UNKNOWN_SESSION, message, session_id)
