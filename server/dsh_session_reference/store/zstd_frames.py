"""The zstd container of a ``.jsonl.zstd`` log, read as upstream's JSONL backend reads it.

Frames are found by their headers without decoding (:func:`zstd_frames`), fed to the decoder a
block at a time so a bomb costs time, not memory, and validated before any of their records is
used; a torn final frame is recovered as upstream recovers it (see :mod:`.logfile`).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Final, NamedTuple

from ..cancellation import AbortSignal, check
from .logbase import (
    HEADER_BUFFER,
    MAX_LINE_BYTES,
    READ_CHUNK,
    ZSTD_MAGIC,
    LogError,
    file_size,
    header_too_long,
    read_span,
    zstd_codec,
)


class Frame(NamedTuple):
    """One zstd frame's byte range and the most plaintext it can hold (``end`` ``None``: torn)."""

    start: int
    end: int | None
    bound: int


@dataclass
class FrameScan:
    """A zstd log's frame structure, validated whole: how many complete frames, the first one,
    and where a torn final frame starts. Nothing per frame is kept (a log of eight million
    empty frames costs no more memory than one of three)."""

    count: int
    first: Frame | None
    torn_start: int | None


_FRAME_HEAD_MAX: Final = 4 + 1 + 14 + 3
"""A frame's magic, descriptor, longest header rest and first block header."""


def zstd_frames(
    handle: IO[bytes], size: int, stop: AbortSignal | None = None, offset: int = 0
) -> Iterator[Frame]:
    """Upstream's ``scanZstdFrames`` over the first ``size`` bytes of a file, lazily, without decoding.

    Invalid complete structure raises :class:`LogError`; end of data inside the last frame
    yields it as torn (``end`` ``None``). Each frame's ``bound`` is its plaintext at most: a raw
    or RLE block's size, a compressed block's :data:`_BLOCK_MAX_OUTPUT`. The file is read
    through a :data:`READ_CHUNK` buffer and headers are parsed in place: a log may be millions
    of tiny frames, so this loop is the cost of reading one. ``offset``: where a frame starts.
    """
    data = b""
    base = 0  # file offset of data[0]
    count = 0
    from_bytes = int.from_bytes
    while offset < size:
        count += 1
        if not count & 1023:
            check(stop)
        start = offset
        if offset - base + _FRAME_HEAD_MAX > len(data) and base + len(data) < size:
            handle.seek(offset)
            data = b""  # drop the old buffer first: one buffer at a time, not two
            data, base = handle.read(min(READ_CHUNK, size - offset)), offset
        at = offset - base
        if size - offset >= 4 and from_bytes(data[at : at + 4], "little") != ZSTD_MAGIC:
            raise LogError(f"corrupt Zstandard session log: invalid frame magic at byte {offset}")
        if size - offset < 5:
            yield Frame(start, None, 0)
            return
        descriptor = data[at + 4]
        offset += 5
        if descriptor & 24:
            raise LogError(f"corrupt Zstandard session log: reserved frame-header bit at byte {offset - 1}")
        offset += _HEADER_REST[descriptor]
        bound = 0
        while True:
            if size - offset < 3:  # also when the header or a payload ran past the end
                yield Frame(start, None, 0)
                return
            at = offset - base
            if at < 0 or at + 3 > len(data):
                handle.seek(offset)
                data = b""
                data, base, at = handle.read(min(READ_CHUNK, size - offset)), offset, 0
            block_header = from_bytes(data[at : at + 3], "little")
            offset += 3
            block_type = (block_header >> 1) & 3
            if block_type == 3:
                raise LogError(f"corrupt Zstandard session log: reserved block type at byte {offset - 3}")
            if block_type == 1:  # RLE: one stored byte, ``size`` copies of it
                payload, bound = 1, bound + (block_header >> 3)
            elif block_type == 2:
                payload, bound = block_header >> 3, bound + _BLOCK_MAX_OUTPUT
            else:
                payload = block_header >> 3
                bound += payload
            offset += payload
            if block_header & 1:
                break
        if descriptor & 4:
            offset += 4  # the checksum
        if offset > size:
            yield Frame(start, None, 0)
            return
        yield Frame(start, offset, bound)


def scan_zstd_frames(handle: IO[bytes], size: int, stop: AbortSignal | None = None) -> FrameScan:
    """The structure :func:`zstd_frames` finds, validated to the end."""
    count = 0
    first: Frame | None = None
    for frame in zstd_frames(handle, size, stop):
        if frame.end is None:
            return FrameScan(count, first, frame.start)
        count += 1
        first = first or frame
    return FrameScan(count, first, None)


def _header_rest(descriptor: int) -> int:
    """Bytes of a frame header after its magic number and descriptor byte: the window
    descriptor, dictionary id and content size that ``descriptor``'s flags declare."""
    single_segment = bool(descriptor & 32)
    dictionary_flag = descriptor & 3
    content_flag = descriptor >> 6
    return (
        (0 if single_segment else 1)
        + (4 if dictionary_flag == 3 else dictionary_flag)
        + ((1 if single_segment else 0) if content_flag == 0 else 1 << content_flag)
    )


_HEADER_REST: Final = tuple(_header_rest(descriptor) for descriptor in range(256))


def _frame_pieces(handle: IO[bytes], start: int, end: int) -> Iterator[bytes]:
    """A frame's bytes cut at block boundaries, so each decoder call yields at most one block.

    For a torn frame ``end`` is the end of the data and the last piece may be partial.
    """
    header = read_span(handle, start, min(end - start, 5))
    if len(header) < 5:
        if header:
            yield header
        return
    rest = _HEADER_REST[header[4]]
    offset = start + 5 + rest
    yield header + read_span(handle, start + 5, min(rest, end - start - 5))
    while offset < end:
        block_header = read_span(handle, offset, min(3, end - offset))
        if len(block_header) < 3:
            yield block_header
            return
        value = int.from_bytes(block_header, "little")
        payload = 1 if (value >> 1) & 3 == 1 else value >> 3  # an RLE block stores its one byte
        length = min(3 + payload, end - offset)
        while length > 0:  # a declared block may be up to 2 MiB: hand it over in bounded slices
            piece = read_span(handle, offset, min(length, READ_CHUNK))
            if not piece:
                return
            yield piece
            offset += len(piece)
            length -= len(piece)
        if value & 1:
            break
    if offset < end:
        yield read_span(handle, offset, end - offset)


class FrameFailed(Exception):
    pass


def decode_frame(
    handle: IO[bytes], start: int, end: int, complete: bool, stop: AbortSignal | None
) -> Iterator[bytes]:
    """One frame's plaintext, each piece at most one block's output; :class:`FrameFailed` if the
    frame does not decode.

    A complete frame must end exactly at ``end`` (checksum verified); a torn
    frame is decoded as far as its bytes go (upstream's ``ZSTD_e_flush`` read).
    """
    zstd = zstd_codec()
    with zstd.frame_decoder() as decoder:
        try:
            for piece in _frame_pieces(handle, start, end):
                check(stop)
                if decoder.eof:
                    raise FrameFailed("trailing input")
                output = decoder.decompress(piece)
                if output:
                    yield output
        except zstd.error as error:
            raise FrameFailed(str(error)) from error
    if complete and (not decoder.eof or decoder.unused_data):
        raise FrameFailed("incomplete frame")


def zstd_plaintext(handle: IO[bytes], stop: AbortSignal | None = None) -> Iterator[bytes]:
    """The plaintext of a zstd log (as long as it is now) in order, for scans that need no replay.

    Each piece is at most one block's output (a frame may expand to gigabytes), each frame is
    decoded from exactly its own bytes (so no backend copies the rest of the input after a frame
    end), and the pieces end quietly at the first damage or at a torn end, after everything that
    decoded before it.
    """
    size = file_size(handle)
    try:
        for frame in zstd_frames(handle, size, stop):
            end = size if frame.end is None else frame.end
            yield from decode_frame(handle, frame.start, end, False, stop)
    except (LogError, FrameFailed):
        return


_QUICK_FRAME_OUTPUT: Final = 1 << 20
"""Most plaintext :func:`_quick_first_frame` may decode in one call (a header is a few hundred bytes)."""
_BLOCK_MAX_OUTPUT: Final = 128 * 1024


def _quick_first_frame(prefix: bytes) -> bytes | None:
    """The first frame's plaintext when the frame lies whole in ``prefix`` (a log's first bytes),
    is well formed, and decodes cleanly in one call to at most :data:`_QUICK_FRAME_OUTPUT`.

    ``None`` leaves every other case (torn, corrupt, dictionary, large) to the general path,
    which then reads the file block by block and says exactly what is wrong. When this returns
    bytes, they are what that path would decode: the same frame, validated the same way
    (checksum, nothing after its end), with a bound on the output known before decoding.
    """
    try:
        first = next(zstd_frames(io.BytesIO(prefix), len(prefix)), None)
    except LogError:
        return None
    if first is None or first.end is None or first.bound > _QUICK_FRAME_OUTPUT:
        return None
    zstd = zstd_codec()
    with zstd.frame_decoder() as decoder:
        try:
            output = decoder.decompress(prefix[: first.end])
        except zstd.error:
            return None
    return output if decoder.eof and not decoder.unused_data else None


BATCH_OUTPUT: Final = 1 << 20
"""Most plaintext consecutive frames may hold to be decoded in one call (dsh appends one frame
per event, so a log is mostly small frames; one decoder call each would cost more than the bytes)."""


def frames_output(
    handle: IO[bytes],
    start: int,
    end: int,
    stop: AbortSignal | None,
    watch: Callable[[bytes], None] | None,
) -> bytes | None:
    """The plaintext of the consecutive complete frames from ``start`` to ``end``, decoded in one
    call, or ``None`` if they do not all decode (the caller then decodes them one by one, which
    names the frame that fails).

    The range comes from the validated structure, so its frames end where their blocks say;
    each frame's checksum is verified by the decoder.
    """
    check(stop)
    data = read_span(handle, start, end - start)
    zstd = zstd_codec()
    assert zstd.decode_frames is not None  # only codecs that decode across frames batch them
    try:
        output = zstd.decode_frames(data)
    except zstd.error:
        return None
    if watch is not None:
        watch(output)
    return output


def frame_output(
    handle: IO[bytes],
    start: int,
    end: int,
    stop: AbortSignal | None,
    limit: int,
    *,
    whole: bool = True,
    watch: Callable[[bytes], None] | None = None,
) -> bytes | None:
    """A validated complete frame's plaintext, or ``None`` if it is larger than ``limit``.

    With ``whole=False`` decoding stops as soon as the output passes ``limit``
    (a header frame that large is refused whatever the rest holds, so a
    decompression bomb in it costs ``limit`` bytes, not its full expansion).
    ``watch`` sees each piece of output as it is decoded and may raise to stop.
    """
    held: list[bytes] = []
    held_bytes = 0
    for output in decode_frame(handle, start, end, True, stop):
        if watch is not None:
            watch(output)
        if held_bytes > limit:
            continue
        held_bytes += len(output)
        if held_bytes > limit:
            if not whole:
                return None
            held.clear()
        else:
            held.append(output)
    return None if held_bytes > limit else b"".join(held)


def read_first_zstd_line(handle: IO[bytes], stop: AbortSignal | None = None) -> str | None:
    """Upstream's ``readFirstZstdLine`` (zstd listing): the header line from the first frame.

    ``None`` when the file ends before its first frame does; :class:`LogError`
    (upstream: a root-wide listing failure) for a bad first frame.
    """
    handle.seek(0)
    plaintext = _quick_first_frame(handle.read(HEADER_BUFFER))
    if plaintext is None:
        first = next(zstd_frames(handle, file_size(handle), stop), None)
        if first is None or first.end is None:
            return None
        plaintext = header_frame(handle, first, stop, "header frame")
    else:
        assert_header_frame(plaintext)
    return plaintext[:-1].decode("utf-8", "replace")


def header_frame(handle: IO[bytes], first: Frame, stop: AbortSignal | None, name: str) -> bytes:
    """The plaintext of a zstd log's complete first frame, which must be exactly one header line;
    a :class:`LogError` naming the frame as ``name`` when it fails validation."""
    assert first.end is not None
    try:
        plaintext = frame_output(handle, first.start, first.end, stop, MAX_LINE_BYTES + 1, whole=False)
    except FrameFailed:
        raise LogError(f"corrupt Zstandard session log: {name} failed validation") from None
    if plaintext is None:
        raise header_too_long()
    assert_header_frame(plaintext)
    return plaintext


def assert_header_frame(plaintext: bytes) -> None:
    if len(plaintext) == 0 or plaintext.find(b"\n") != len(plaintext) - 1:
        raise LogError("corrupt Zstandard session log: first frame is not exactly one header line")
