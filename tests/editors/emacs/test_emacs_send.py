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

from dsh.model import ModelFixture
from dsh.realdsh import DshHome, install_dsh
from dsh.sent import sent_messages, shown_messages
from dsh_session_reference.uri import format_session_reference_mention

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
    with ModelFixture() as model:
        home = DshHome(install_dsh(), tmp_path / "dsh-home", model)
        with home.web(cwd=workspace) as web:
            sources = []
            for text in ("How should we split the parser? #long:2000", "Write down the deploy steps"):
                session_id = web.create(workspace)
                web.prompt(session_id, text)
                web.wait_idle(session_id)
                sources.append(session_id)
            before = {item["sessionId"] for item in web.sessions()}
            parser, deploy = (
                format_session_reference_mention(session_id, label)
                for session_id, label in zip(sources, ("the parser", "deploy"), strict=True)
            )
            prompt = workspace / "ask.md"
            prompt.write_text(
                f"# Next step\n\nCompare {parser} with {deploy}: which is done?\n", encoding="utf-8"
            )
            root, url = _elisp_string(str(home.sessions)), _elisp_string(web.url)
            config = documented_config("eglot", {':sessionsRoot ""': f":sessionsRoot {root}"})
            config += documented_config(
                "eglot-send", {"(:notify :json-false)": f"(:notify :json-false :dshWebUrl {url})"}
            )
            config_path = tmp_path / "init.el"
            config_path.write_text(config, encoding="utf-8")
            mark = model.mark()
            run = run_editor(
                [_emacs(), "-Q", "--batch", "-l", str(DRIVER)],
                dataclasses.replace(scenario, prompt=prompt),
                {"config": str(config_path)},
            )
            assert run.result.get("error") is None, run.explain()
            request = model.wait_for(mark, kind="text", timeout=30)
            created = [item for item in web.sessions() if item["sessionId"] not in before]
    ((session,),) = [created]
    assert session["cwd"] == str(workspace)
    sent = run.result["sent"]
    assert run.result["echoed"] == sent
    assert sent.startswith("Sent to dsh: 2 sessions referenced; "), sent
    assert sent.endswith(
        f". Session: a new session ({session['sessionId']}) in {workspace}, at {web.url}."
    ), sent
    assert sent_messages(request) == shown_messages(run.result["model_text"])
