"""**DSH: Send to dsh** in a real VS Code (code-server, as ``test_vscode.py`` runs it) to the real
dsh web 0.1.0-rc.8 (``scripts/install-dsh``) talking to the scripted loopback model (``tests/dsh``).

A person opens a prompt that mentions two sessions dsh wrote, looks at its model-facing text, then
sends it: the prompt starts a dsh session in the workspace folder (there is no target), the
notification says where it went and what was sent, and the request dsh sends the model holds the
messages the model-facing text showed, byte for byte. The host's address is a machine setting;
the workspace's own settings name a trap (a test double of dsh web) that must get nothing.
"""

from __future__ import annotations

import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

import pytest
from test_vscode import (  # the fixtures and helpers of the other VS Code runs
    Profile,
    Tools,
    _artifacts,
    _code_server,
    _driver_spec,
    _explain,
    _run_driver,
    _workspace_settings,
    profile,  # noqa: F401 - a fixture
    tools,  # noqa: F401 - a fixture
    vsix,  # noqa: F401 - a fixture of the profile fixture
)

from dsh.realdsh import check_send_notice, send_scene
from dsh.sent import sent_messages, shown_messages
from dsh.web_double import web_double

pytestmark = [pytest.mark.editor, pytest.mark.dsh]


@pytest.mark.timeout(900)
def test_vscode_sends_the_prompt_to_real_dsh_and_the_model_gets_its_model_facing_text(
    tools: Tools,  # noqa: F811
    profile: Profile,  # noqa: F811
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "project"
    workspace.mkdir()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(workspace / ".venv")], check=True)
    with ExitStack() as stack:
        dsh = stack.enter_context(send_scene(workspace, tmp_path / "dsh-home", long=3000))
        prompt = dsh.write_prompt(workspace)
        trap = stack.enter_context(web_double(status=500))
        profile.machine_settings(
            {
                "dshSessionReference.sessionsRoot": str(dsh.home.sessions),
                "dshSessionReference.dshWebUrl": dsh.web.url,
            }
        )
        _workspace_settings(workspace, {"dshSessionReference.dshWebUrl": trap.url})
        artifacts = _artifacts("send")
        spec = _driver_spec(
            tools, prompt, artifacts, tmp_path / "result.json", mode="send", statusPattern="2 mentions · "
        )
        with _code_server(
            tools, profile.env, profile.user_data, profile.extensions, workspace, tmp_path / "code-server.log"
        ) as (url, _pid):
            spec["url"] = url
            mark = dsh.model.mark()
            result, output = _run_driver(tools, spec, tmp_path / "spec.json", profile.env)
            assert result["error"] is None, _explain(result, output, profile, artifacts)
            request = dsh.model.wait_for(mark, kind="text", timeout=30)
        created = dsh.created()
        shown = shown_messages(result["steps"]["send-model-text"]["text"])
        message = result["steps"]["send"]["message"]

    # The notification: a new session, in the workspace folder, in the dsh web of the machine setting.
    check_send_notice(message, created, workspace, dsh.web.url)
    # What the model got is what the model-facing text showed just before: the message as dsh's
    # composer sends it (no final newline) and the snapshot of both sessions.
    assert shown[0] == "# Next step\n\nCompare @the parser with @deploy: which is done?"
    assert sent_messages(request) == shown
    # The workspace's own address was never used.
    assert trap.requests == []
