"""Upstream's surface fold (``dsh-session`` ``surface.ts``) with its exact validation messages.

The surface is the ordered list of events the model currently sees. Only
``user/message``, ``assistant/message`` and ``tool/result`` join it, each
declaring ``surfaceOp``: ``'append'`` adds it at the end, ``{op:'replace',
start, end}`` swaps a current range for it (so surface order is not seq
order). A log whose fold breaks a rule is refused, never half-read: the
error text is what dsh reports for that log.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from .jsvalue import UNDEFINED, deep_equal_json, is_number, is_safe_integer, js_string
from .validation import MESSAGE_TYPES


class SurfaceError(Exception):
    """A fold rule was broken; ``str(error)`` is upstream's message."""


def _is_event_seq(value: object) -> bool:
    return is_safe_integer(value) and value >= 0  # type: ignore[operator]


def _is_replace_op(op: dict[str, Any]) -> bool:
    return (
        op.keys() == {"op", "start", "end"}
        and op["op"] == "replace"
        and _is_event_seq(op["start"])
        and _is_event_seq(op["end"])
    )


def _surface_op(event: Mapping[str, Any]) -> str | dict[str, Any] | None:
    """Upstream's ``surfaceOpOf``: the event's operation, ``None`` for non-surface events."""
    kind = event.get("type")
    if not (isinstance(kind, str) and kind in MESSAGE_TYPES):  # the surface-eligible events
        for marker in ("surfaceOp", "sourceEventSeqs"):
            if marker in event:
                name = js_string(event.get("type", UNDEFINED))
                raise SurfaceError(
                    f'session event "{name}" is not surface-eligible and cannot carry {marker}'
                )
        return None
    if "surfaceOp" not in event:
        raise SurfaceError(f'session event "{kind}" is surface-eligible and requires a surfaceOp marker')
    op = event["surfaceOp"]
    if op == "append":
        return "append"
    if not isinstance(op, dict):
        raise SurfaceError(f'session event "{kind}" carries an invalid surfaceOp')
    if not _is_replace_op(op):
        raise SurfaceError(f'session event "{kind}" carries an invalid replace surfaceOp')
    return op


def _assert_provenance(event: Mapping[str, Any], shadowed: list[int]) -> None:
    seq = event["seq"]
    sources: set[int | float] = set()
    if "sourceEventSeqs" in event:
        raw = event["sourceEventSeqs"]
        if not isinstance(raw, list):
            raise SurfaceError(
                f"sourceEventSeqs on event at seq {js_string(seq)} must be an array when present"
            )
        if len(raw) == 0 and event.get("type") != "assistant/message":
            raise SurfaceError("sourceEventSeqs must not be empty except on assistant/message")
        later: int | float | None = None
        for source in raw:
            if not _is_event_seq(source):
                raise SurfaceError(
                    f'session event "{js_string(event.get("type", UNDEFINED))}" sourceEventSeqs must densely '
                    "contain non-negative safe integers"
                )
            sources.add(source)
            if later is None and source >= seq:
                later = source
        if len(sources) != len(raw):
            raise SurfaceError("sourceEventSeqs must not contain duplicates")
        if later is not None:
            raise SurfaceError(
                f"sourceEventSeqs must reference earlier events: {js_string(later)} "
                f">= current seq {js_string(seq)}"
            )
    missing = [node for node in shadowed if node not in sources]
    if missing:
        raise SurfaceError(
            "surface replace: sourceEventSeqs must include every shadowed surface node; missing "
            + ", ".join(js_string(node) for node in missing)
        )


def _without_result_content(data: Mapping[str, Any]) -> dict[str, Any]:
    rest = dict(data)
    message = data["message"]
    rest["message"] = {**message, "content": [{**message["content"][0], "content": None}]}
    return rest


class SurfaceKeeper(Protocol):
    """Keeps what a caller needs of each current surface node, instead of the whole event.

    ``prepare`` needs only each node's projected text, and of that only what the
    byte budget can retain; a keeper lets it fold a huge log without holding it.
    """

    def start(self) -> None:
        """A fold begins (a read that is retried folds again from the start)."""

    def add(self, seq: int, event: Mapping[str, Any], appended: bool) -> None:
        """A node joined the surface (at the end when ``appended``, else as a replacement)."""

    def drop(self, seq: int) -> None:
        """A node was shadowed by a replacement."""

    def close(self, nodes: Sequence[int]) -> None:
        """The fold is over; ``nodes`` are the current node seqs in surface order."""


class SurfaceFold:
    """Incremental fold state: the current nodes, and what each current node is.

    ``keep_events`` keeps every current node's event (``readSurface`` returns
    them); a :class:`SurfaceKeeper` instead hands each node to the keeper;
    otherwise only what a later ``tool/result`` replacement must be compared
    with is kept (the result without its content), so a title read holds
    almost nothing.
    """

    def __init__(self, keep_events: bool | SurfaceKeeper = True) -> None:
        self.nodes: list[int] = []
        self.events: dict[int, Mapping[str, Any]] = {}
        self.keep_events = keep_events is True
        self.keeper = None if isinstance(keep_events, bool) else keep_events
        if self.keeper is not None:
            self.keeper.start()

    def apply(self, event: Mapping[str, Any]) -> None:
        """Validate ``event`` as the next log entry and fold it; :class:`SurfaceError` on a broken rule.

        The caller has already checked that ``event['seq']`` is its index.
        """
        op = _surface_op(event)
        if op is None:
            return
        seq: int = event["seq"]
        kind: str = event["type"]
        if op == "append":
            _assert_provenance(event, [])
            self._add(seq, kind, event, True)
            self.nodes.append(seq)
            return
        assert isinstance(op, dict)
        start_idx = self._index(op["start"], "start")
        end_idx = self._index(op["end"], "end")
        if start_idx > end_idx:
            raise SurfaceError(
                f"surface replace: start seq {js_string(op['start'])} (index {start_idx}) is after end seq "
                f"{js_string(op['end'])} (index {end_idx})"
            )
        shadowed = self.nodes[start_idx : end_idx + 1]
        _assert_provenance(event, shadowed)
        if kind == "tool/result":
            self._assert_tool_result_rewrite(event, shadowed)
        self.nodes[start_idx : end_idx + 1] = [seq]
        for node in shadowed:
            self.events.pop(node, None)
            if self.keeper is not None:
                self.keeper.drop(node)
        self._add(seq, kind, event, False)

    def _index(self, target: int, which: str) -> int:
        try:
            return self.nodes.index(target)
        except ValueError:
            raise SurfaceError(
                f"surface replace: {which} seq {js_string(target)} not found in surface"
            ) from None

    def _add(self, seq: int, kind: str, event: Mapping[str, Any], appended: bool) -> None:
        if self.keep_events:
            self.events[seq] = event
        elif kind == "tool/result":
            # What a later rewrite is compared with: the result without its content (a tool's
            # output can be megabytes). The event's shape was checked: the content is there.
            self.events[seq] = {"type": "tool/result", "data": _without_result_content(event["data"])}
        if self.keeper is not None:
            self.keeper.add(seq, event, appended)

    def _assert_tool_result_rewrite(self, event: Mapping[str, Any], shadowed: list[int]) -> None:
        if len(shadowed) != 1:
            raise SurfaceError("tool/result surface replacement must rewrite exactly one current node")
        original = self.events.get(shadowed[0])
        if original is None or original["type"] != "tool/result":
            raise SurfaceError("tool/result surface replacement must target a current tool/result")
        if not deep_equal_json(
            _without_result_content(original["data"]), _without_result_content(event["data"])
        ):
            raise SurfaceError("tool/result surface replacement may change only content")

    def current_events(self) -> list[Mapping[str, Any]]:
        """The current surface events in node order (none unless ``keep_events``); closes a keeper."""
        if self.keeper is not None:
            self.keeper.close(list(self.nodes))
        return [self.events[seq] for seq in self.nodes] if self.keep_events else []


def fold_surface(events: Iterable[Mapping[str, Any]]) -> list[int]:
    """Upstream's ``foldSurface`` over a whole log already checked as :class:`~.replay.Replay` checks
    it (envelopes and message shapes: a ``tool/result`` is kept without its content): the current
    node seqs."""
    fold = SurfaceFold(keep_events=False)
    for index, event in enumerate(events):
        if event.get("seq") != index or not is_number(event.get("seq")):
            raise SurfaceError(
                f"session event seq {js_string(event.get('seq', UNDEFINED))} "
                f"is not contiguous; expected {index}"
            )
        fold.apply(event)
    return list(fold.nodes)
