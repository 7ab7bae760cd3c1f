"""The scripted model speaks DeepSeek's chat completions as dsh reads it: a streamed answer (server-sent
events ending in ``[DONE]``, usage in a chunk of its own) and a plain JSON completion; every body is
recorded as it came."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from .model import TITLE_SYSTEM_START, ModelFixture

pytestmark = pytest.mark.dsh


def _post(fixture: ModelFixture, body: dict[str, Any]) -> bytes:
    request = urllib.request.Request(
        f"{fixture.base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        data: bytes = answer.read()
        return data


def test_streamed_and_plain_answers_and_the_record() -> None:
    user = {"role": "user", "content": "run it #tool:ls -la"}
    with ModelFixture() as fixture:
        streamed = _post(fixture, {"model": "deepseek-v4-flash", "stream": True, "messages": [user]})
        events = [line[6:] for line in streamed.decode().split("\n\n") if line.startswith("data: ")]
        assert events[-1] == "[DONE]"
        chunks = [json.loads(e) for e in events[:-1]]
        call = chunks[1]["choices"][0]["delta"]["tool_calls"][0]["function"]
        assert call["name"] == "bash" and json.loads(call["arguments"])["command"] == "ls -la"
        assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens"] > 0
        title = {"role": "system", "content": TITLE_SYSTEM_START + "."}
        framed = {"role": "user", "content": 'Generate:\n[{"seq":7,"text":"fix the zstd reader now please"}]'}
        plain = json.loads(_post(fixture, {"model": "deepseek-v4-flash", "messages": [title, framed]}))
        assert plain["choices"][0]["message"]["content"] == "Fixture title: fix the zstd reader"
        assert [r.kind for r in fixture.requests] == ["tool", "title"]
        assert json.loads(fixture.requests[0].raw)["messages"] == [user]
