"""The documented Emacs + eglot setup sends a prompt to the real dsh web (docs/editors.md, "Sending a
prompt to dsh"): batch Emacs with the eglot block and the send snippet, the host's address in the
snippet's arguments as the docs say, ``C-c d s`` typed. The prompt starts a dsh
session in the workspace folder, the echo area says where it went, and the request dsh sends the
scripted model holds the messages of the prompt's model-facing text.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from test_emacs import _elisp_string, _emacs

from dsh.realdsh import check_send_notice, send_scene
from dsh.sent import sent_messages, shown_messages

if TYPE_CHECKING:
    from collections.abc import Callable

    from conftest import EditorRun, Scenario

pytestmark = [pytest.mark.editor, pytest.mark.dsh]

DRIVER = Path(__file__).resolve().parent / "drive_send.el"


def test_emacs_sends_the_prompt_to_real_dsh(
    scenario: Scenario,
    run_editor: Callable[[list[str], Scenario, dict[str, Any]], EditorRun],
    documented_config: Callable[[str, dict[str, str]], str],
    tmp_path: Path,
) -> None:
    workspace = scenario.workspace
    with send_scene(workspace, tmp_path / "dsh-home", long=2000) as dsh:
        prompt = dsh.write_prompt(workspace)
        root, url = _elisp_string(str(dsh.home.sessions)), _elisp_string(dsh.web.url)
        config = documented_config("eglot", {':sessionsRoot ""': f":sessionsRoot {root}"})
        config += documented_config(
            "eglot-send", {"(:notify :json-false)": f"(:notify :json-false :dshWebUrl {url})"}
        )
        config_path = tmp_path / "init.el"
        config_path.write_text(config, encoding="utf-8")
        mark = dsh.model.mark()
        run = run_editor(
            [_emacs(), "-Q", "--batch", "-l", str(DRIVER)],
            dataclasses.replace(scenario, prompt=prompt),
            {"config": str(config_path)},
        )
        assert run.result.get("error") is None, run.explain()
        request = dsh.model.wait_for(mark, kind="text", timeout=30)
        created = dsh.created()
    sent = run.result["sent"]
    assert run.result["echoed"] == sent
    check_send_notice(sent, created, workspace, dsh.web.url)
    assert sent_messages(request) == shown_messages(run.result["model_text"])
