//! Zed's side of dsh-session-reference: Zed asks an extension how to start a language server, so
//! this one answers with `dsh-session-reference lsp` from the PATH of the project's shell (where
//! `pipx install dsh-session-reference` or the project's virtual environment puts it), and passes
//! the user's `lsp.dsh-session-reference` settings through: `binary` replaces the command,
//! `initialization_options` and `settings` reach the server as its `dshSessionReference` settings.

use zed_extension_api::{self as zed, serde_json, settings::LspSettings, LanguageServerId, Result};

const SERVER: &str = "dsh-session-reference";

struct DshSessionReference;

fn lsp_settings(language_server_id: &LanguageServerId, worktree: &zed::Worktree) -> LspSettings {
    // Settings that do not parse are Zed's to report; the server then starts with its defaults.
    LspSettings::for_worktree(language_server_id.as_ref(), worktree).unwrap_or_default()
}

impl zed::Extension for DshSessionReference {
    fn new() -> Self {
        DshSessionReference
    }

    fn language_server_command(
        &mut self,
        language_server_id: &LanguageServerId,
        worktree: &zed::Worktree,
    ) -> Result<zed::Command> {
        let binary = lsp_settings(language_server_id, worktree).binary;
        let configured = binary.as_ref().and_then(|binary| binary.path.clone());
        let command = match configured.or_else(|| worktree.which(SERVER)) {
            Some(command) => command,
            None => {
                return Err(format!(
                    "{SERVER} is not on the PATH: install it (pipx install {SERVER}) or set \
                     lsp.{SERVER}.binary.path in Zed's settings"
                ))
            }
        };
        let args = binary
            .as_ref()
            .and_then(|binary| binary.arguments.clone())
            .unwrap_or_else(|| vec!["lsp".to_string()]);
        let mut env = worktree.shell_env();
        if let Some(extra) = binary.and_then(|binary| binary.env) {
            env.extend(extra);
        }
        Ok(zed::Command { command, args, env })
    }

    fn language_server_initialization_options(
        &mut self,
        language_server_id: &LanguageServerId,
        worktree: &zed::Worktree,
    ) -> Result<Option<serde_json::Value>> {
        Ok(lsp_settings(language_server_id, worktree).initialization_options)
    }

    fn language_server_workspace_configuration(
        &mut self,
        language_server_id: &LanguageServerId,
        worktree: &zed::Worktree,
    ) -> Result<Option<serde_json::Value>> {
        Ok(lsp_settings(language_server_id, worktree).settings)
    }
}

zed::register_extension!(DshSessionReference);
