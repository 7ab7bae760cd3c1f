"""What a person sees of a mention is the session it sends (issue 35, item 2).

``@[Harmless refactor](dsh-session:<id of "Customer export (secrets)">)`` read as ``@Harmless refactor``
in VS Code and Neovim while the model received the secrets session: a label other than the session's
own was only a hint, which neither editor's chips (nor a person) heed. Now the real server warns on
it, names the session it sends in the warning and in the hint after it, offers the quick fix that
labels it with the title, and warns too on a label that shows as other than it is (a bidi override,
a zero-width space, a line break, a session URI). Editors draw a mention a warning touches as
written, never as a chip: that half is checked in the real editors (tests/editors/vscode,
tests/editors/neovim) and by the VS Code client's unit tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lsp_harness import lsp_session
from lsprotocol import types

from dsh_session_reference.display import UNSEEN
from dsh_session_reference.uri import format_session_reference_mention
from store.logbuild import header, lines, one_turn, put, title

from .audit import audited_env, audited_server_command

SECRETS = "Customer export (secrets)"
HARMLESS = "Harmless refactor"
TITLES = {
    "s-secrets": SECRETS,
    "s-harmless": HARMLESS,
    "s-bidi": "Harmless \u202e)sterces( tropxe",
    "s-zero-width": "Harm\u200bless refactor",
    "s-uri": "Harmless](dsh-session:InMtaGFybWxlc3Mi) refactor",
    "s-untitled": None,
}


@pytest.fixture(scope="module")
def titled_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("seen") / "sessions"
    for session_id, text in TITLES.items():
        events = [header(session_id), *one_turn(0, "export the customers", "done")]
        put(root, session_id, lines(*events, *([] if text is None else [title(6, text)])))
    return root


def _warnings(found: list[types.Diagnostic]) -> list[types.Diagnostic]:
    return [d for d in found if d.severity == types.DiagnosticSeverity.Warning]


async def test_a_label_of_another_session_is_a_warning_that_names_the_session_sent(
    titled_root: Path, tmp_path: Path, workspace: Path
) -> None:
    async with lsp_session(
        audited_server_command(), audited_env(tmp_path / "a.log"), workspace, titled_root
    ) as s:
        forged = format_session_reference_mention("s-secrets", HARMLESS)
        uri = s.open(workspace, f"Please review {forged} today.\n")
        found = await s.diagnostics(uri, lambda d: len(_warnings(d)) == 1)
        [warning] = _warnings(found)
        assert warning.code == "stale-label", found
        assert f'sends session "{SECRETS}"' in warning.message and f'"{HARMLESS}"' in warning.message
        assert [d for d in found if d.severity == types.DiagnosticSeverity.Error] == []  # dsh sends it
        # The cost hint after it says which session it sends.
        [hint] = await s.inlay_hints(uri)
        assert isinstance(hint.label, str) and hint.label.startswith(f"sends “{SECRETS}” · "), hint.label
        # Its link has no target until followed, so no editor draws it as a chip, even before the
        # warning arrives (chips are drawn over links with a transcript target only).
        [link] = await s.client.text_document_document_link_async(
            types.DocumentLinkParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
        assert link.target is None
        resolved = await s.client.document_link_resolve_async(link)
        assert resolved.target is not None and resolved.target.startswith("dsh-transcript:")
        # The quick fix labels it with the session's title; then no warning, and no "sends".
        start = s.texts[uri].index(forged)
        actions = await s.actions(uri, start + 3, [warning])
        [refresh] = [a for a in actions if isinstance(a, types.CodeAction) and a.title.startswith("Refresh")]
        assert refresh.title == f'Refresh the label to the current title "{SECRETS}"' and refresh.is_preferred
        assert refresh.edit is not None
        s.apply(uri, refresh.edit)
        assert format_session_reference_mention("s-secrets", SECRETS) in s.texts[uri]
        await s.diagnostics(uri, lambda d: not _warnings(d))
        [hint] = await s.inlay_hints(uri)
        assert isinstance(hint.label, str) and not hint.label.startswith("sends"), hint.label
        [link] = await s.client.text_document_document_link_async(
            types.DocumentLinkParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
        assert link.target is not None and link.target.startswith("dsh-transcript:")  # a chip again

        # An untitled session is labelled by its id: any other label is a warning too.
        untitled = s.open(workspace, format_session_reference_mention("s-untitled", HARMLESS))
        [warning] = _warnings(await s.diagnostics(untitled, lambda d: len(_warnings(d)) == 1))
        assert warning.code == "stale-label" and 'the untitled session "s-untitled"' in warning.message
        actions = await s.actions(untitled, 3, [warning])
        assert any(
            isinstance(a, types.CodeAction) and a.title.startswith("Refresh the label to the session's id")
            for a in actions
        ), actions
        # Its own title as the label: a sound mention, nothing to warn about.
        sound = s.open(workspace, format_session_reference_mention("s-harmless", HARMLESS))
        assert not _warnings(await s.diagnostics(sound, lambda d: True))


@pytest.mark.parametrize(
    ("session_id", "found"),
    [("s-bidi", "U+202E"), ("s-zero-width", "U+200B"), ("s-uri", "'dsh-session:'")],
)
async def test_a_title_that_shows_as_other_than_it_is_is_a_warning(
    titled_root: Path, tmp_path: Path, workspace: Path, session_id: str, found: str
) -> None:
    """Labelled with its own title, as a pick from the list inserts it: still a warning, so no
    editor collapses it to a chip that reverses, hides or forges part of what it reads."""
    text = TITLES[session_id]
    assert text is not None
    async with lsp_session(
        audited_server_command(), audited_env(tmp_path / "a.log"), workspace, titled_root
    ) as s:
        uri = s.open(workspace, f"see {format_session_reference_mention(session_id, text)}\n")
        [warning] = _warnings(await s.diagnostics(uri, lambda d: len(_warnings(d)) == 1))
        assert warning.code == "unreadable-label" and found in warning.message, warning
        # Nothing a person reads of it hides a character: the message, the hint and its tooltip.
        [hint] = await s.inlay_hints(uri)
        for shown in (warning.message, hint.label, hint.tooltip):
            assert isinstance(shown, str) and not UNSEEN.search(shown), shown
