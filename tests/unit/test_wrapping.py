"""The preview's and the report's wrapping (:func:`dsh_session_reference.display.wrapped`): the lines
``textwrap`` gives, with a word longer than a line cut in one pass rather than one line at a time
(a 2 MB line without a space took 1.8 s; 0.035 s now)."""

from __future__ import annotations

import random
import textwrap

from dsh_session_reference.display import wrapped, wrapped_by


def _library(text: str, columns: int) -> str:
    """What ``wrapped`` gave when it called ``textwrap`` as it is."""
    return wrapped_by(textwrap.TextWrapper, text, columns)


def test_lines_are_the_librarys_for_long_words_whitespace_and_indents() -> None:
    chance = random.Random(5)
    pieces = "ab c\t-é😀  \n"
    for _ in range(4000):
        columns = chance.choice([1, 2, 3, 5, 10, 40, 100])
        parts: list[str] = []
        for _ in range(chance.randint(1, 8)):
            kind = chance.random()
            if kind < 0.3:
                parts.append("x" * chance.randint(1, 5 * columns + 3))  # a word longer than a line
            elif kind < 0.5:
                parts.append(chance.choice(" \t") * chance.randint(1, 3 * columns + 2))
            else:
                parts.append("".join(chance.choice(pieces) for _ in range(chance.randint(0, 3 * columns))))
        text = " \t  "[: chance.randint(0, 4)] + "".join(parts)
        assert wrapped(text, columns) == _library(text, columns), (columns, text)


def test_a_huge_word_and_huge_leading_whitespace_wrap_as_the_library_does() -> None:
    for text in ("y" * 300_000, "  " + "z" * 200_001 + " tail", " \t" * 100_000 + "x y"):
        assert wrapped(text) == _library(text, 100)
