"""The characters ``parse_prompt_text`` trims are the ones dsh's own Node trims (``draft.trim()``
in dsh web's composer)."""

from __future__ import annotations

import json
import subprocess

import pytest

from dsh_session_reference.uri import JS_TRIMMED

from .realdsh import install_dsh

pytestmark = pytest.mark.dsh


def test_the_trimmed_characters_are_nodes() -> None:
    install = install_dsh()
    script = (
        "const out = [];"
        "for (let c = 0; c <= 0x10ffff; c++) {"
        "  if (c >= 0xd800 && c <= 0xdfff) continue;"
        "  if (String.fromCodePoint(c).trim() === '') out.push(c);"
        "}"
        "process.stdout.write(JSON.stringify(out));"
    )
    done = subprocess.run([str(install.node), "-e", script], capture_output=True, text=True, check=True)
    assert sorted(map(ord, JS_TRIMMED)) == json.loads(done.stdout)
