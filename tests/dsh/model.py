"""A scripted loopback stand-in for DeepSeek's chat completions API, for driving the real dsh.

dsh (``@deepseek-ai/dsh-llm-deepseek``) posts every model call to ``$DEEPSEEK_BASE_URL/chat/completions``
with ``stream: true`` and reads server-sent events until ``[DONE]``; a request without ``stream``
gets one JSON completion, as the public API answers it. The fixture records every request body, as
bytes and parsed, so a test can compare what dsh sent the model with what the product says it will
send.

What it answers is decided from the request, so a test scripts a session by what it types:

- dsh's title request (its system prompt asks for a concise title): the title ``Fixture title: `` and
  the first words of the human message;
- dsh's compaction request (its last user message asks for checkpoint text): a short checkpoint;
- a turn whose last message is a tool result: ``tool finished: `` and the start of the result;
- a turn whose newest user text holds ``#tool:COMMAND``: a call of dsh's ``bash`` tool running COMMAND;
- ``#long:N``: an answer of N bytes (ASCII lines);
- ``#overflow``: the first request for that message is refused as DeepSeek refuses a prompt over
  the context window (HTTP 400, "maximum context length"), so dsh compacts the conversation (its
  context-overflow trigger) and asks again, which gets the answer the rest of the text calls for;
- ``#hold`` (with any of the above): the answer waits until the test calls ``release()``, so a
  test can act while the session is mid-turn;
- anything else: ``answer: `` and the start of the newest user text.

Run it alone (``python tests/dsh/model.py --port 8765``) to point a hand-started dsh at it.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TITLE_SYSTEM_START = "Create a concise title for an AI coding-assistant session"
"""How dsh's session-title-llm plugin's system prompt begins (0.1.0-rc.8)."""
COMPACTION_MARK = "Output only the checkpoint text"
"""A line of dsh's compaction-basic instruction, appended as the last user message (0.1.0-rc.8)."""
RUNTIME_CONTEXT_START = "Current runtime context."
"""How the user message dsh appends to each request with its runtime context begins (0.1.0-rc.8)."""
SNAPSHOT_START = "## Referenced sessions"
"""How the snapshot of mentioned sessions begins (upstream's model-facing framing)."""
TITLE_PREFIX = "Fixture title: "
HOLD_TIMEOUT = 120.0
"""The longest a ``#hold`` answer waits for ``release()``."""
OVERFLOW_ERROR = {
    "error": {
        "message": "This model's maximum context length is 1000000 tokens. However, you requested "
        "1000100 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_request_error",
    }
}
"""DeepSeek's (OpenAI-compatible) refusal of a prompt over the context window."""


@dataclass
class Answer:
    """One scripted completion: text, or a call of one tool, and the usage it reports."""

    text: str = ""
    tool_call: tuple[str, dict[str, Any]] | None = None
    prompt_tokens: int = 1_000
    kind: str = "text"
    hold: bool = False


@dataclass
class Recorded:
    """A request as it arrived: the body's bytes, its JSON, and what the fixture made of it."""

    raw: bytes
    body: dict[str, Any]
    kind: str = ""
    answered: float = field(default_factory=time.time)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", []))

    def user_texts(self) -> list[str]:
        """The text of every user message, in order (a list of parts joined as dsh's wire has them)."""
        return [message_text(m) for m in self.messages if m.get("role") == "user"]


def message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def is_human(message: dict[str, Any]) -> bool:
    """Whether a user message is one a person wrote: not dsh's runtime context, not a snapshot."""
    return not message_text(message).startswith((RUNTIME_CONTEXT_START, SNAPSHOT_START))


def _long_text(size: int) -> str:
    """``size`` bytes of numbered ASCII lines (a long answer that still reads as one)."""
    lines: list[str] = []
    total = 0
    number = 0
    while total < size:
        line = f"line {number:06d} of a long fixture answer, padded to make the size asked for.\n"
        lines.append(line)
        total += len(line)
        number += 1
    return "".join(lines)[:size]


def _directive(text: str, name: str) -> str | None:
    """The argument of ``#name:ARG`` (to the end of its line), ``""`` for a bare ``#name``, else None."""
    marker = "#" + name
    at = text.rfind(marker)
    if at < 0:
        return None
    rest = text[at + len(marker) :]
    if rest.startswith(":"):
        return rest[1:].split("\n", 1)[0]
    return "" if not rest[:1].isalnum() else None


def scripted_answer(body: dict[str, Any]) -> Answer:
    """What the fixture answers to a request body (see the module docstring)."""
    answer = _answer(body)
    if answer.kind not in ("title", "compaction", "after-tool"):
        messages = body.get("messages", [])
        humans = [message_text(m) for m in messages if m.get("role") == "user" and is_human(m)]
        answer.hold = bool(humans) and _directive(humans[-1], "hold") is not None
    return answer


def _answer(body: dict[str, Any]) -> Answer:
    messages = body.get("messages", [])
    system = next((message_text(m) for m in messages if m.get("role") == "system"), "")
    last = messages[-1] if messages else {}
    last_text = message_text(last)
    if system.startswith(TITLE_SYSTEM_START):
        framed = last_text.split("\n", 1)[1] if "\n" in last_text else last_text
        try:
            first = json.loads(framed)[0]["text"]
            words = " ".join(first.split()[:4]) if isinstance(first, str) else "untitled"
        except (ValueError, IndexError, TypeError, KeyError):
            words = "untitled"
        return Answer(TITLE_PREFIX + words, kind="title")
    if last.get("role") == "user" and COMPACTION_MARK in last_text:
        return Answer("## Goal\n- fixture checkpoint\n", kind="compaction")
    humans = [i for i, m in enumerate(messages) if m.get("role") == "user" and is_human(m)]
    newest = humans[-1] if humans else -1
    newest_user = message_text(messages[newest]) if humans else ""
    tool_results = [message_text(m) for m in messages[newest + 1 :] if m.get("role") == "tool"]
    if tool_results:
        return Answer("tool finished: " + tool_results[-1][:60], kind="after-tool")
    command = _directive(newest_user, "tool")
    if command is not None:
        return Answer(tool_call=("bash", {"command": command, "description": "fixture command"}), kind="tool")
    size = _directive(newest_user, "long")
    if size is not None and size.strip().isdigit():
        return Answer(_long_text(int(size)), kind="long")
    return Answer("answer: " + " ".join(newest_user.split())[:60])


def _usage(answer: Answer) -> dict[str, int]:
    completion = max(1, len(answer.text) // 4)
    return {
        "prompt_tokens": answer.prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": answer.prompt_tokens + completion,
        "prompt_cache_hit_tokens": 0,
        "prompt_cache_miss_tokens": answer.prompt_tokens,
    }


def _chunks(answer: Answer, model: str, ident: str) -> Iterator[dict[str, Any]]:
    """The streamed completion as DeepSeek sends it: a role delta, content (or one tool call) in
    pieces, the finish reason, then usage in a chunk of its own."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": ident,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    yield chunk({"role": "assistant", "content": ""})
    if answer.tool_call is not None:
        name, arguments = answer.tool_call
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": f"call_{ident}",
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(arguments)},
                    }
                ]
            }
        )
        finish = "tool_calls"
    else:
        step = 16 * 1024
        for start in range(0, len(answer.text), step):
            yield chunk({"content": answer.text[start : start + step]})
        finish = "stop"
    yield chunk({}, finish)
    last = chunk({})
    last["choices"] = []
    last["usage"] = _usage(answer)
    yield last


def _completion(answer: Answer, model: str, ident: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text}
    finish = "stop"
    if answer.tool_call is not None:
        name, arguments = answer.tool_call
        message["tool_calls"] = [
            {
                "id": f"call_{ident}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ]
        finish = "tool_calls"
    return {
        "id": ident,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": _usage(answer),
    }


class ModelFixture:
    """The loopback model: ``base_url`` for ``$DEEPSEEK_BASE_URL``; ``requests`` every body dsh sent."""

    def __init__(self, port: int = 0) -> None:
        self.requests: list[Recorded] = []
        self._overflowed: set[str] = set()
        self._released = threading.Event()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        fixture = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    ids = ["deepseek-v4-flash", "deepseek-v4-pro"]
                    self._json(200, {"object": "list", "data": [{"id": i, "object": "model"} for i in ids]})
                else:
                    self._json(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._json(404, {"error": {"message": f"no route {self.path}"}})
                    return
                body = json.loads(raw)
                if fixture._overflows(body):
                    fixture._record(Recorded(raw, body, "overflow"))
                    self._json(400, OVERFLOW_ERROR)
                    return
                answer = scripted_answer(body)
                fixture._record(Recorded(raw, body, answer.kind))
                if answer.hold:
                    fixture._released.wait(HOLD_TIMEOUT)
                model = str(body.get("model", "deepseek-v4-flash"))
                ident = f"fixture-{len(fixture.requests)}"
                if not body.get("stream"):
                    self._json(200, _completion(answer, model, ident))
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for piece in _chunks(answer, model, ident):
                    self.wfile.write(b"data: " + json.dumps(piece).encode() + b"\n\n")
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

            def _json(self, status: int, value: Any) -> None:
                data = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="model-fixture", daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def _overflows(self, body: dict[str, Any]) -> bool:
        """Whether to refuse this request as over the context window: the first main-loop request
        for a message that says ``#overflow`` (the retry after dsh compacts is answered)."""
        if scripted_answer(body).kind in ("title", "compaction"):
            return False
        messages = body.get("messages", [])
        humans = [message_text(m) for m in messages if m.get("role") == "user" and is_human(m)]
        if not humans or _directive(humans[-1], "overflow") is None:
            return False
        with self._lock:
            if humans[-1] in self._overflowed:
                return False
            self._overflowed.add(humans[-1])
            return True

    def _record(self, recorded: Recorded) -> None:
        with self._changed:
            self.requests.append(recorded)
            self._changed.notify_all()

    def release(self) -> None:
        """Let every ``#hold`` answer go, now and from now on."""
        self._released.set()

    def mark(self) -> int:
        """The number of requests so far, to look at only the ones after it."""
        with self._lock:
            return len(self.requests)

    def since(self, mark: int, kind: str | None = None) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests[mark:] if kind is None or r.kind == kind]

    def wait_for(self, mark: int, kind: str | None = None, timeout: float = 60) -> Recorded:
        """The first request after ``mark`` (of ``kind``), waiting for it to arrive."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = [r for r in self.requests[mark:] if kind is None or r.kind == kind]
                if found:
                    return found[0]
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no {kind or 'model'} request within {timeout} s")
                self._changed.wait(left)

    def start(self) -> ModelFixture:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> ModelFixture:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    with ModelFixture(args.port) as fixture:
        print(f"DEEPSEEK_BASE_URL={fixture.base_url}", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
