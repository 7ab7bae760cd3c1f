"""The documented Emacs + eglot setup sends a prompt to the real dsh web (docs/editors.md, "Sending a
prompt to dsh"): batch Emacs with the eglot block and the send snippet, the host's address in the
snippet's arguments as the docs say, ``C-c d s`` typed. The prompt starts a dsh
session in the workspace folder, the echo area says where it went, and the request dsh sends the
scripted model holds the messages of the prompt's model-facing text.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from test_emacs import _elisp_string, _emacs

from dsh.realdsh import check_send_notice
from dsh.sent import sent_messages, shown_messages

if TYPE_CHECKING:
    from collections.abc import Callable

    from conftest import SendFromEditor
    from dsh.realdsh import SendScene

pytestmark = [pytest.mark.editor, pytest.mark.dsh]

DRIVER = Path(__file__).resolve().parent / "drive_send.el"


def test_emacs_sends_the_prompt_to_real_dsh(
    send_from_editor: SendFromEditor, documented_config: Callable[[str, dict[str, str]], str]
) -> None:
    def config(dsh: SendScene) -> str:
        root, url = _elisp_string(str(dsh.home.sessions)), _elisp_string(dsh.web.url)
        eglot = documented_config("eglot", {':sessionsRoot ""': f":sessionsRoot {root}"})
        return eglot + documented_config(
            "eglot-send", {"(:notify :json-false)": f"(:notify :json-false :dshWebUrl {url})"}
        )

    done = send_from_editor(
        "init.el", config, lambda _config, _prompt: [_emacs(), "-Q", "--batch", "-l", str(DRIVER)]
    )
    sent = done.run.result["sent"]
    assert done.run.result["echoed"] == sent
    check_send_notice(sent, done.created, done.workspace, done.url)
    assert sent_messages(done.request) == shown_messages(done.run.result["model_text"])
