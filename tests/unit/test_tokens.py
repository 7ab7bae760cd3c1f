"""Token counts: DeepSeek-V4's own tokenizer where the `tokens` extra is installed (a dev
dependency, so CI proves the exact path), an estimate labelled as one everywhere else.

The exact vectors were counted by an independent implementation, transformers.js
(`@lenml/tokenizers` on npm) with DeepSeek's tokenizer.json, whose ids matched Hugging Face
`tokenizers` on every sample (see docs/limits.md, "Token counts").
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsh_session_reference.tokens import (
    EXACT_MAX_BYTES,
    TokenCount,
    TokenCounter,
    estimate_tokens,
    load_tokenizer,
    tokenizer_file,
)

VECTORS = [
    ("The quick brown fox jumps over the lazy dog. It's 2026, and we've shipped v0.1.0-rc.8!", 31),
    ("请帮我检查一下这个函数为什么在空输入时会抛出异常。我们需要保留最近的十条消息。", 20),
    ("3.14159265358979 1234567890 ١٢٣٤٥ 0x1F600 1e-9 ½ ²³", 36),
    (
        '{"text":"line1\\nline2\\t\\"quoted\\" \\u003cscript\\u003e C:\\\\Users\\\\dev",'
        '"n":[1,22,333,4444,55555],"ok":true,"x":null}',
        49,
    ),
    ("Done ✅ 🚀 shipped 👍🏽 family: 👨‍👩‍👧‍👦 flags 🇯🇵🇫🇷 ⚠️", 35),
    ("a  b   c\n\n\n   \t\t x \r\n\r\n  y    \n    ", 18),
]


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    counter = TokenCounter()
    assert counter.available, "the `tokens` extra is a dev dependency"
    assert counter.wait(60)
    return counter


@pytest.mark.parametrize(("text", "tokens"), VECTORS)
def test_deepseek_counts(counter: TokenCounter, text: str, tokens: int) -> None:
    assert counter.count(text) == TokenCount(tokens, True)
    assert counter.count(text) == TokenCount(tokens, True)  # kept: the same answer from the cache


def test_without_the_extra_counts_are_estimates_and_say_so() -> None:
    counter = TokenCounter(find=False)
    assert not counter.available and not counter.wait(0.1)
    count = counter.count("x" * 4001)
    assert count == TokenCount(estimate_tokens(4001), False) == TokenCount(1001, False)
    assert count.describe() == "~1,001 tokens, estimated"
    assert TokenCount(4612, True).describe() == "4,612 tokens"  # one way, the code lens's too
    assert (TokenCount(10, True) + TokenCount(5, False)) == TokenCount(15, False)


def test_only_deepseeks_file_is_taken(tmp_path: Path) -> None:
    real = tokenizer_file()
    assert real is not None and load_tokenizer(real) is not None
    forged = tmp_path / "tokenizer.json"
    forged.write_bytes(Path(real).read_bytes().replace(b'"<think>"', b'"<thinK>"'))
    assert load_tokenizer(str(forged)) is None
    assert load_tokenizer(str(tmp_path / "missing.json")) is None
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert load_tokenizer(str(fifo)) is None  # at once: never waits for a writer
    counter = TokenCounter(str(forged))
    assert counter.available and not counter.wait(30)
    assert not counter.available  # unusable: estimates from now on, and no second load
    assert counter.count("hello") == TokenCount(2, False)


def test_a_text_over_the_exact_limit_is_estimated(counter: TokenCounter) -> None:
    """A 1 MB prompt took 0.7 s per count (its summary is asked for at each edit): estimated."""
    assert counter.count("a " * (EXACT_MAX_BYTES // 2)).exact
    assert counter.count("é" * (EXACT_MAX_BYTES // 2 + 1)) == TokenCount(
        estimate_tokens(EXACT_MAX_BYTES + 2), False
    )  # the limit is in UTF-8 bytes, not characters
    assert not counter.count("a" * (EXACT_MAX_BYTES + 1)).exact


def test_a_lone_surrogate_is_counted_not_an_error(counter: TokenCounter) -> None:
    assert counter.count("a\ud800b").exact
