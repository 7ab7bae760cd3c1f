"""What upstream does with a log's events after reading them, in one streaming pass.

Upstream's persistence coordinator (``prepareCore``) runs these stages over
the whole event list, each to completion before the next:

1. reject obsolete vocabulary (``request/header-delta``, ``mode/set``, a
   ``request/header`` with reason ``fallback``), each found by its own scan;
2. upgrade legacy shapes and check every message's shape (:mod:`.migration`);
3. refuse unknown event types not marked ``ignorable``;
4. compute the recovery closers for an open last turn, and check them (:mod:`.closers`);
5. validate the header, then every event's envelope (:mod:`.validation`) and the surface fold
   (:mod:`.surface`).

The first failing stage decides the error. Here the stages run side by side
over a stream, each remembering its own first failure; a stage stops working
once an earlier stage has failed (its outcome can no longer matter), so the
reported error is the same as upstream's and no event list is ever held.
The last ``session/title`` is kept on the way and folded as upstream's ``foldSessionTitle``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from .closers import TURN_TYPES, OpenTurn
from .jsvalue import UNDEFINED, JsTypeError, is_safe_integer, js_string, read_prop
from .migration import MIGRATED_TYPES, Migration
from .surface import SurfaceError, SurfaceFold, SurfaceKeeper
from .validation import (
    KNOWN_SESSION_EVENT_TYPES,
    ReplayFailure,
    assert_envelope,
    assert_message_shape,
    validate_header,
)

# Stages, in upstream's order; the lowest failing stage is the reported error.
_DELTA, _MODE, _FALLBACK, _MIGRATE, _UNKNOWN, _CLOSERS, _CLOSER_SHAPE, _HEADER, _EVENTS = range(9)
_LEGACY_STAGES: Final = {"request/header-delta": _DELTA, "mode/set": _MODE, "request/header": _FALLBACK}


@dataclass(frozen=True)
class TitleFold:
    """``foldSessionTitle`` over the log: the last ``session/title``'s ``title``
    (``UNDEFINED`` when it has none), or ``error`` when upstream's fold throws."""

    title: Any
    error: str | None = None


@dataclass(frozen=True)
class ReplayResult:
    captured_through_seq: int | None
    surface: list[Mapping[str, Any]]
    title: TitleFold | None


def fold_title(data: object) -> Any:
    """``foldSessionTitle`` on the last title event's data: its ``title``, or raise as upstream throws."""
    title = read_prop(data, "title")
    seqs = read_prop(data, "messageSeqs")
    if not isinstance(seqs, list | str):
        raise JsTypeError("event.data.messageSeqs is not iterable")
    source = read_prop(data, "source")
    kind = read_prop(source, "kind")
    if not isinstance(kind, str) or kind not in ("fallback", "provider", "user"):
        raise ReplayFailure(f"Unhandled SessionTitleSource: {js_string(kind)}")
    return title


class Replay:
    """Feed a log's committed events in order with :meth:`push`, then :meth:`finish`.

    ``log_path`` is the path upstream names in format refusals (``locate()``).
    """

    def __init__(
        self,
        session_id: str,
        header: Mapping[str, Any],
        log_path: str,
        *,
        keep_surface: bool | SurfaceKeeper = True,
    ) -> None:
        self._id = session_id
        self._header = header
        self._log_path = log_path
        self._errors: dict[int, ReplayFailure] = {}
        self._migration = Migration(session_id)
        self._fold = SurfaceFold(keep_events=keep_surface)
        self._turn = OpenTurn()
        self._last: tuple[Any, Any] | None = None
        self._title_event: Mapping[str, Any] | None = None
        self._first_failed = _EVENTS + 1
        try:
            validate_header(header)
        except ReplayFailure as failure:
            self._fail(_HEADER, failure)

    def _alive(self, stage: int) -> bool:
        """Whether ``stage`` can still decide the outcome (no earlier or equal stage has failed)."""
        return self._first_failed > stage

    def _fail(self, stage: int, failure: ReplayFailure) -> None:
        self._errors.setdefault(stage, failure)
        self._first_failed = min(self._first_failed, stage)

    def push(self, event: dict[str, Any]) -> None:
        """One committed stored event (a dict whose ``seq`` is its index)."""
        seq = event["seq"]
        raw_kind = event.get("type")
        if raw_kind == "assistant/chunk" and len(event) == 4 and "data" in event:
            time: Any = event.get("time")
            if is_safe_integer(time):
                # Exactly type, seq, time and data, with a safe time: every check below passes and
                # nothing is folded (a chunk is neither legacy, migrated, a turn event nor on the
                # surface). Big logs are mostly chunks: this spares most of a replay's validation.
                self.push_unread(seq, time)
                return
        kind = raw_kind if isinstance(raw_kind, str) else None  # an object type is unhashable, never known
        if kind in _LEGACY_STAGES:
            self._legacy_checks(event, kind, seq)
        if not self._alive(_MIGRATE):
            return
        current = event
        migrated = kind in MIGRATED_TYPES
        if migrated:
            try:
                current = self._migration.upgrade(event)
            except ReplayFailure as failure:
                self._fail(_MIGRATE, failure)
                return
            kind = current["type"]
        self._last = (seq, current.get("time", UNDEFINED))
        if kind == "session/title":
            self._title_event = current
        if self._alive(_UNKNOWN) and not (
            kind in KNOWN_SESSION_EVENT_TYPES or current.get("ignorable") is True
        ):
            self._fail(
                _UNKNOWN,
                ReplayFailure(
                    f'session "{js_string(self._header.get("id"))}" '
                    f'contains event type "{js_string(raw_kind)}" '
                    f"(seq {js_string(seq)}) unknown to this harness and not marked ignorable; refusing to "
                    "interpret the log — it was likely written by a newer harness "
                    f"(raw log: {self._log_path})",
                    unsupported=True,
                ),
            )
        if self._alive(_CLOSERS) and kind in TURN_TYPES:
            try:
                self._turn.track(current)
            except JsTypeError as error:
                self._fail(_CLOSERS, ReplayFailure(str(error), "TypeError"))
        if self._alive(_EVENTS):
            self._validate(current, seq, shape_checked=migrated)

    def push_chunks(self, first_seq: int, times: list[Any]) -> None:
        """A packed row's chunk events: what :meth:`push` does with each of them."""
        self.push_unread(first_seq + len(times) - 1, times[-1])

    def push_unread(self, seq: int, time: int) -> None:
        """An event a discovery read skipped unread: taken as valid, never a title."""
        if self._alive(_MIGRATE):
            self._last = (seq, time)

    def _legacy_checks(self, event: dict[str, Any], kind: str, seq: int) -> None:
        """Stage 1: an obsolete event type (each its own scan upstream, so each its own stage)."""
        stage = _LEGACY_STAGES[kind]
        if stage in self._errors:
            return
        if kind == "request/header":
            try:
                reason = read_prop(event.get("data", UNDEFINED), "reason")
            except JsTypeError as error:
                self._fail(stage, ReplayFailure(str(error), "TypeError"))
                return
            if reason != "fallback":
                return
            what = 'request/header reason "fallback"'
        else:
            what = f"{kind} event"
        self._fail(
            stage,
            ReplayFailure(f'session "{self._id}" contains unsupported legacy {what} at seq {js_string(seq)}'),
        )

    def _validate(self, event: Mapping[str, Any], index: int, shape_checked: bool = False) -> None:
        try:
            assert_envelope(event, index, shape_checked)
        except ReplayFailure as failure:
            self._fail(_EVENTS, failure)
            return
        try:
            self._fold.apply(event)
        except SurfaceError as error:
            self._fail(_EVENTS, ReplayFailure(f"invalid seed event at index {index}: {error}"))

    def finish(self) -> ReplayResult:
        """Close the log: add recovery closers, then raise upstream's error or return the result."""
        last_seq = self._last[0] if self._last is not None else None
        if self._alive(_CLOSER_SHAPE):
            closers = self._turn.closers(self._last)
            for closer in closers:  # a shape failure decides over any validation failure before it
                try:
                    assert_message_shape(closer, f"session event at seq {js_string(closer['seq'])}")
                except ReplayFailure as failure:
                    self._fail(_CLOSER_SHAPE, failure)
                    break
                if self._alive(_EVENTS):
                    self._validate(closer, closer["seq"])
            if closers:
                last_seq = closers[-1]["seq"]
        if self._errors:
            raise self._errors[min(self._errors)]
        title: TitleFold | None = None
        if self._title_event is not None:
            try:
                title = TitleFold(fold_title(self._title_event.get("data", UNDEFINED)))
            except (JsTypeError, ReplayFailure) as error:
                title = TitleFold(UNDEFINED, str(error))
        return ReplayResult(last_seq, self._fold.current_events(), title)
