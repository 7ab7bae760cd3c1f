"""The code action feature: quick fixes for mentions and the preview source action, from the
document's analysis."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from lsprotocol import types

from ..actions import code_actions
from ..contract import Feature, Handler


class CodeActions(Feature):
    """Owns nothing."""

    uses: ClassVar = frozenset({"analysis", "encoding", "capability", "client_command"})
    reads: ClassVar = "the findings and mentions in the range, and the sessions a fix may name (code_actions)"

    def handlers(self) -> Sequence[Handler]:
        options = types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.Source],
        )
        return (Handler(types.TEXT_DOCUMENT_CODE_ACTION, self.code_action, options, reads_store=True),)

    async def code_action(
        self, params: types.CodeActionParams
    ) -> list[types.CodeAction | types.Command] | None:
        ls = self.ls
        result = await ls.analysis(params.text_document.uri)
        if result is None:
            return None
        return code_actions(
            result.analysis,
            result.index,
            ls.encoding,
            params,
            version=result.version,
            literal_support=ls.capability("text_document.code_action.code_action_literal_support")
            is not None,
            document_changes=bool(ls.capability("workspace.workspace_edit.document_changes", False)),
            suggest_command=ls.client_command("triggerSuggestCommand"),
        )
