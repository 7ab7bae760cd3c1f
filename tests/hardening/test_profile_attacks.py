"""dsh's profile files and the ``profile`` setting, attacked: what they hold is untrusted input, so
nothing in them may stop the server, and what the preview's Budgets block says must be dsh's.

The expected budgets below are dsh 0.1.0-rc.8's own: its js-yaml (JSON schema plus ``!!js``)
and its patch code (``applyEntryPatches`` of ``@deepseek-ai/cordis-plugin-include``) were run on
each text over the ``web`` profile's bundle layers, and the session-reference row's ``config`` read.
"""

from __future__ import annotations

import ntpath
from pathlib import Path

import pytest
from lsp_harness import lsp_session
from lsp_support import Spec, wait_until, write_store
from lsprotocol import types

from dsh_session_reference import assembly, dsh_profile
from dsh_session_reference.config import BUDGET_BOUNDS
from dsh_session_reference.dsh_profile import (
    ProfileBudgets,
    ProfileLayer,
    budgets_from_layers,
    combine_limits,
    profile_name_problem,
)
from dsh_session_reference.report import budget_lines
from dsh_session_reference.uri import format_session_reference_mention
from dsh_session_reference.yaml_subset import parse_yaml

from .audit import audited_env, audited_server_command
from .test_framing import frame
from .test_framing import server as framing_server

DIGITS = "7" * 5_000
"""Past Python's 4,300-digit limit for ``int()`` (a ``ValueError``, which no caller caught)."""
ROW = "- id: session-reference\n"


def home_with(tmp_path: Path, text: str) -> Path:
    home = tmp_path / "dsh-home"
    (home / "profiles" / "web").mkdir(parents=True)
    (home / "profiles" / "web" / "cordis.patch.yml").write_text(text, encoding="utf-8")
    return home


@pytest.mark.parametrize("form", [f"{{maxReferences: {DIGITS}}}", f"\n    maxReferences: {DIGITS}"])
def test_a_number_past_pythons_digit_limit_is_refused_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    """Before: ``int()`` raised ValueError out of the reader, through ``initialize``."""
    monkeypatch.setenv("DSH_HOME", str(home_with(tmp_path, f"{ROW}  config: {form}\n")))
    read = assembly.dsh_profile_budgets()
    assert read.values == {}
    assert len(read.warnings) == 1 and "maxReferences is not a plain positive integer" in read.warnings[0]
    assert parse_yaml(f"- {DIGITS}\n- -{DIGITS}\n") == [float(DIGITS), float("-" + DIGITS)]


def test_a_profile_name_no_file_name_can_hold_is_refused_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """JSON's ``"\\ud800"`` is a lone surrogate: before, ``os.open`` raised UnicodeEncodeError."""
    monkeypatch.setenv("DSH_HOME", str(home_with(tmp_path, "[]\n")))
    read = assembly.dsh_profile_budgets("\ud800")
    assert read.values == {} and len(read.warnings) == 1
    assert "is not text a file name can hold" in read.warnings[0]


def test_a_windows_drive_profile_name_never_leaves_the_home(monkeypatch: pytest.MonkeyPatch) -> None:
    """On Windows ``os.path.join(home, "profiles", "D:x", ...)`` is ``D:x\\...``: another drive's
    folder, not one under the home (dsh's ``path.join`` keeps the home)."""
    assert ntpath.join("C:\\home", "profiles", "D:x", "cordis.patch.yml") == "D:x\\cordis.patch.yml"
    monkeypatch.setattr(dsh_profile.os, "path", ntpath)
    assert profile_name_problem("D:x") is not None
    assert profile_name_problem("web") is None


NAMED = "  config: {maxReferences: 1}\n"
CASES = {
    # dsh tests a patch's name for truthiness: an empty or null name does not skip the patch.
    "name null": (f"{ROW}  name: ~\n{NAMED}", {"maxReferences": 1}),
    "name empty": (f"{ROW}  name: ''\n{NAMED}", {"maxReferences": 1}),
    "name false": (f"{ROW}  name: false\n{NAMED}", {"maxReferences": 1}),
    "name zero": (f"{ROW}  name: 0\n{NAMED}", {"maxReferences": 1}),
    "name other": (f"{ROW}  name: other\n{NAMED}", {}),
    # ...and any truthy insert makes an insert patch: its config is never the row's.
    "insert text": (f"{ROW}  insert: x\n{NAMED}", {}),
    "insert mapping": (f"{ROW}  insert: {{}}\n{NAMED}", {}),
    "insert true": (f"{ROW}  insert: true\n{NAMED}", {}),
    "insert empty list": (f"{ROW}  insert: []\n{NAMED}", {}),
    "insert null": (f"{ROW}  insert: ~\n{NAMED}", {"maxReferences": 1}),
    # A row inserted into a group exists only if that group does: dsh skips "nope".
    "insert into a group": (
        "- id: nope\n  insert: [{id: session-reference, config: {maxReferences: 1}}]\n",
        {},
    ),
    "insert at the top": (
        "- insert: [{id: session-reference, config: {maxReferences: 1}}]\n",
        {"maxReferences": 1},
    ),
    # A CR alone ends a line, for js-yaml as for YAML.
    "CR line ends": ("- id: session-reference\r  config:\r    maxReferences: 1\r", {"maxReferences": 1}),
    # A complex key in a flow mapping is not "? maxReferences".
    "flow complex key": (f"{ROW}  config: {{? maxReferences : 1}}\n", {}),
}


@pytest.mark.parametrize("case", CASES)
def test_patches_decide_as_dshs_patch_code_decides(case: str) -> None:
    text, expected = CASES[case]
    read = budgets_from_layers("web", [ProfileLayer("p", text)])
    assert dict(read.values) == expected, read.warnings
    dsh_reads = expected == {"maxReferences": 1} or case in ("name other", "insert null")
    if not dsh_reads and case not in ("insert text", "insert mapping", "insert true", "insert empty list"):
        assert read.warnings, "a budget dsh reads differently must be said"


@pytest.mark.parametrize("home", ["", "# only a comment\n", "- 5\n", "- id: x\n- [1]\n"])
def test_a_layer_dsh_refuses_is_said_never_silently_skipped(home: str) -> None:
    """dsh refuses an empty patch file and any entry that is not a mapping (it does not start)."""
    read = budgets_from_layers("web", [ProfileLayer("p", f"{ROW}{NAMED}"), ProfileLayer("h", home)])
    assert any("h is not a YAML list of patch mappings (dsh refuses it too)" in w for w in read.warnings)


def test_a_clamped_profile_budget_is_not_said_to_be_the_profiles() -> None:
    """Before: "maxReferenceBytes 1,048,576 from dsh profile 'web' (...)" while the profile (and
    so the model) says 2 MiB: the Budgets block named dsh's profile for a number it never set."""
    origin = "dsh profile 'web' (/h/profiles/web/cordis.patch.yml)"
    profile = ProfileBudgets({"maxReferenceBytes": 2 << 20}, {"maxReferenceBytes": origin})
    config, warnings = combine_limits({}, profile, bounded=True)
    assert config.max_reference_bytes == BUDGET_BOUNDS["maxReferenceBytes"] and warnings
    line = budget_lines(config)[3]
    assert line.strip() == (
        f"maxReferenceBytes 1,048,576 from this server's bound, below the 2,097,152 of {origin}"
    ), line


async def test_a_hostile_profile_and_profile_setting_never_stop_the_server(
    tmp_path: Path, workspace: Path
) -> None:
    """Before: ``initialize`` failed (the digit string); a pushed ``profile: "\\ud800"`` raised
    in the settings task, so its warning never came, and ``sessionsRoot: "\\ud800"`` showed
    "Error in server: UnicodeEncodeError" (valid JSON, as any client may send)."""
    root = write_store(tmp_path / "root", [Spec("s-1", "/work/p", "one", [("user", "hi")])], "none")
    home = home_with(tmp_path, f"{ROW}  config: {{maxReferences: {DIGITS}}}\n")
    env = audited_env(tmp_path / "server.log") | {"DSH_HOME": str(home)}
    async with lsp_session(audited_server_command(), env, workspace, root) as s:
        uri = s.open(workspace, f"see {format_session_reference_mention('s-1', 'one')}")
        preview = await s.command("dshSessionReference.preview", uri)
        assert "    maxReferences     3 from dsh's default" in preview["text"].split("\n")
        pushed = {"profile": "\ud800", "sessionsRoot": str(tmp_path / "\ud800")}
        s.client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"dshSessionReference": pushed})
        )
        said = [f"dshSessionReference.{key}" for key in pushed]
        await wait_until(
            lambda: all(
                any(f"{k} " in m.message and "is not Unicode text" in m.message for m in s.client.messages)
                for k in said
            )
        )
        assert (await s.command("dshSessionReference.preview", uri))["text"]
        assert not [m.message for m in s.client.messages if "Error in server" in m.message]


SPACES = {
    # YAML's whitespace is a space or a tab: js-yaml reads "2\u3000" as text (dsh refuses it).
    "ideographic space after": (f"{ROW}  config:\n    maxReferences: 2\u3000\n", {}, True),
    "no-break space after": (f"{ROW}  config: {{maxReferences: 2\xa0}}\n", {}, True),
    "NEL after": (f"{ROW}  config:\n    maxReferences: 2\x85\n", {}, True),
    # ...and a tab after the colon separates, in block and flow mappings alike.
    "tab after colon": (f"{ROW}  config:\n    maxReferences:\t2\n", {"maxReferences": 2}, False),
    "tab in flow": (
        f"{ROW}  config: {{maxReferences:\t2,\tcandidateLimit: 9}}\n",
        {"maxReferences": 2, "candidateLimit": 9},
        False,
    ),
    "tab before colon": (f"{ROW}  config:\n    maxReferences\t: 2\n", {"maxReferences": 2}, False),
    # A control character js-yaml refuses in any stream: dsh does not start.
    "form feed": (f"{ROW}  config:\n    maxReferences: 2\x0c\n", {}, True),
}


@pytest.mark.parametrize("case", SPACES)
def test_only_yamls_whitespace_separates(case: str) -> None:
    """Before: ``str.rstrip()`` took Unicode spaces and controls for YAML's (a budget dsh refuses
    read as 2), and a tab after a flow key's colon made the key ``"maxReferences:\\t2"``."""
    text, expected, said = SPACES[case]
    read = budgets_from_layers("web", [ProfileLayer("p", text)])
    assert dict(read.values) == expected, read.warnings
    assert bool(read.warnings) == said, read.warnings


def test_a_setting_of_5000_digits_in_json_is_answered(tmp_path: Path) -> None:
    """Before: ``json.loads`` raised ValueError past Python's int-string limit, the message was
    dropped, and the client waited for its ``initialize`` answer for ever."""
    options = f'{{"dshSessionReference": {{"candidateLimit": {DIGITS}}}}}'
    initialize = f'{{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {{"capabilities": {{}}, "processId": null, "initializationOptions": {options}}}}}'
    messages = [
        initialize.encode(),
        b'{"jsonrpc": "2.0", "id": 2, "method": "shutdown"}',
        b'{"jsonrpc": "2.0", "method": "exit"}',
    ]
    process = framing_server(tmp_path)
    out, err = process.communicate(b"".join(frame(body) for body in messages), timeout=60)
    assert process.returncode == 0, err.decode()
    assert b'"id": 1, "jsonrpc": "2.0", "result": {"capabilities"' in out, out[:400]
    assert b"Exceeds the limit" not in err


UNKNOWN = {
    # dsh evaluates the !!js (300) and reads 0x10 as 16: the block must not present 65,536 as dsh's.
    "js value": (
        [f"{ROW}  config: {{maxReferenceBytes: !!js '300'}}\n", None],
        "maxReferenceBytes 65,536 from dsh's default, but dsh's may differ: it is '!!js 300' in p",
    ),
    "hex value": (
        [f"{ROW}  config: {{maxReferenceBytes: 0x10}}\n", None],
        "maxReferenceBytes 65,536 from dsh's default, but dsh's may differ: it is '0x10' in p",
    ),
    # The home layer is read after the profile's: one this reader refuses may set the row.
    "later layer not read": (
        [f"{ROW}  config: {{maxReferenceBytes: 300}}\n", "- id: x\n  config: &a {}\n"],
        "maxReferenceBytes 300 from dsh profile 'web' (p), but dsh's may differ: h not read",
    ),
    "earlier layer not read": (
        ["- id: x\n  config: &a {}\n", f"{ROW}  config: {{maxReferenceBytes: 300}}\n"],
        "maxReferenceBytes 300 from dsh profile 'web' (h)",
    ),
}


@pytest.mark.parametrize("case", UNKNOWN)
def test_the_budgets_block_never_shows_a_number_dsh_may_not_use_as_dshs(case: str) -> None:
    """Before: "65,536 from dsh's default" for a ``!!js`` or ``0x10`` value dsh reads as a number,
    and "300 from dsh profile" while a later layer that may replace it was not read."""
    (profile_text, home_text), expected = UNKNOWN[case]
    read = budgets_from_layers("web", [ProfileLayer("p", profile_text), ProfileLayer("h", home_text)])
    config, _ = combine_limits({}, read, bounded=True)
    assert budget_lines(config)[3].strip() == expected


@pytest.mark.parametrize("name", ["/" * 1_000_000, "a" * 1_000_000])
def test_a_megabyte_profile_name_is_not_quoted_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """Before: the warning quoted all of it (and the path it made), once per distinct value, and
    the server keeps up to 256 warnings to say each once: 256 such values held 256 MB."""
    monkeypatch.setenv("DSH_HOME", str(home_with(tmp_path, "[]\n")))
    read = assembly.dsh_profile_budgets(name)
    assert read.values == {} and len(read.warnings) == 1
    assert len(read.warnings[0]) < 300, len(read.warnings[0])


def test_a_profile_file_makes_a_bounded_number_of_warnings() -> None:
    """Each warning is a message a person must dismiss: a 64 KiB file of group inserts made one
    per patch (1,300 here)."""
    patch = "- {id: g, insert: [{id: session-reference, config: {maxReferences: 1}}]}\n"
    text = patch * ((64 << 10) // len(patch))
    read = budgets_from_layers("web", [ProfileLayer("p", text), ProfileLayer("h", text)])
    assert len(read.warnings) == 2, len(read.warnings)
