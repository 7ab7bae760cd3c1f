"""Open documents, kept by the server itself with LSP's line rules, and the text of one that is not open.

pygls' own workspace applies incremental edits through ``str.splitlines``,
which breaks lines where editors do not (U+2028, ``\\x0b``, ...), and re-splits
the whole text on every keystroke. These documents are :class:`..lines.Lines`:
an edit is spliced by offset into the pieces it touches, so a keystroke in a
25 MB document costs what the keystroke costs, and the whole string is joined
only for an analysis, in a worker thread. Text is stored JS-normalized
(surrogate pairs joined) because the scanner and parser index that form;
UTF-16 positions are the same either way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import to_fs_path

from ..jsjson import js_normalize, read_text
from ..lines import Encoding
from .positions import LineIndex

UNOPENED_READ_TIMEOUT: Final = 10.0
"""Seconds a command may wait for a file that is not open (a stalled network mount, say)."""


@dataclass
class Document:
    uri: str
    index: LineIndex
    """The text as it is now; each edit replaces it with a new one (an analysis keeps the one it read)."""
    version: int | None = None

    @property
    def text(self) -> str:
        """The whole text (joined on first use: call it in a worker thread for a big document)."""
        return self.index.text


class DocumentStore:
    """uri -> :class:`Document` for every document the client has opened."""

    def __init__(self) -> None:
        self._documents: dict[str, Document] = {}

    def open(self, item: types.TextDocumentItem) -> Document:
        document = Document(item.uri, LineIndex(js_normalize(item.text)), item.version)
        self._documents[item.uri] = document
        return document

    def change(
        self,
        uri: str,
        version: int | None,
        changes: Iterable[types.TextDocumentContentChangeEvent],
        encoding: Encoding,
    ) -> Document | None:
        """Apply ``changes`` in order; ``None`` when the document is not open."""
        document = self._documents.get(uri)
        if document is None:
            return None
        index = document.index
        for change in changes:
            if isinstance(change, types.TextDocumentContentChangePartial):
                start = index.offset_at(change.range.start, encoding)
                end = max(start, index.offset_at(change.range.end, encoding))
                index = index.edited(start, end, change.text)
            else:
                index = LineIndex(js_normalize(change.text))
        document.index = index
        document.version = version
        return document

    def close(self, uri: str) -> Document | None:
        return self._documents.pop(uri, None)

    def get(self, uri: str) -> Document | None:
        return self._documents.get(uri)

    def __iter__(self) -> Iterator[Document]:
        return iter(list(self._documents.values()))


async def text_of(documents: DocumentStore, uri: str) -> str | None:
    """An open document's text, else a ``file:`` document read from disk (off the loop, only a
    regular file under a size cap, within :data:`UNOPENED_READ_TIMEOUT`); ``None`` for another
    scheme. A file that cannot be read is ``InvalidParams`` naming why."""
    document = documents.get(uri)
    if document is not None:
        return await asyncio.to_thread(lambda: document.text)
    path = to_fs_path(uri) if uri.startswith("file:") else None
    if path is None:
        return None
    try:
        reading = asyncio.to_thread(read_text, path, untrusted=True)
        return await asyncio.wait_for(reading, UNOPENED_READ_TIMEOUT)
    except TimeoutError:
        raise JsonRpcInvalidParams(
            f"{uri} is not open and took over {UNOPENED_READ_TIMEOUT:g} s to read"
        ) from None
    except OSError as error:
        raise JsonRpcInvalidParams(
            f"{uri} is not open and cannot be read: {error.strerror or error}"
        ) from None
