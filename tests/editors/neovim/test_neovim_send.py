"""The documented Neovim setup sends a prompt to the real dsh web (docs/editors.md, "Sending a prompt
to dsh"): headless Neovim 0.7 with the configuration block and the send snippet, the host's
address in the snippet's arguments as the docs say, ``<Leader>dS`` typed. The
prompt starts a dsh session in the workspace folder, the snippet shows where it went, and the
request dsh sends the scripted model holds the messages of the prompt's model-facing text.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from test_neovim import _lua_string, _nvim

from dsh.realdsh import check_send_notice
from dsh.sent import sent_messages, shown_messages

if TYPE_CHECKING:
    from collections.abc import Callable

    from conftest import SendFromEditor
    from dsh.realdsh import SendScene

pytestmark = [pytest.mark.editor, pytest.mark.dsh]

DRIVER = Path(__file__).resolve().parent / "driver_send.lua"


def test_neovim_sends_the_prompt_to_real_dsh(
    send_from_editor: SendFromEditor, documented_config: Callable[[str, dict[str, str]], str]
) -> None:
    def config(dsh: SendScene) -> str:
        root = _lua_string(str(dsh.home.sessions))
        block = documented_config("neovim-0.7", {'sessionsRoot = "",': f"sessionsRoot = {root},"})
        return block + documented_config(
            "neovim-send",
            {"{ notify = false }": f"{{ notify = false, dshWebUrl = {_lua_string(dsh.web.url)} }}"},
        )

    def argv(config_path: Path, prompt: Path) -> list[str]:
        return [_nvim("0.7"), "--headless", "--clean", "-n", "-u", str(DRIVER), str(prompt)]

    done = send_from_editor("init.lua", config, argv)
    sent = done.run.result["sent"]
    assert sent["level"] == 2, sent  # vim.log.levels.INFO
    check_send_notice(sent["message"], done.created, done.workspace, done.url)
    assert sent_messages(done.request) == shown_messages(done.run.result["model_text"])
