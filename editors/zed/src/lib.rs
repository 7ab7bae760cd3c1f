//! Zed's side of dsh-session-reference: Zed asks an extension how to start a language server, so
//! this one answers with `dsh-session-reference lsp` from the PATH of the project's shell (where
//! `pipx install dsh-session-reference` or the project's virtual environment puts it), and passes
//! the user's `lsp.dsh-session-reference` settings through: `initialization_options` and
//! `settings` reach the server as its `dshSessionReference` settings.
//!
//! What a project's own `.zed/settings.json` could make it run or read is closed here. Zed merges
//! that file into the settings this API returns (`LspSettings::for_worktree`), and zed_extension_api
//! 0.7.0 has no way to read the user's alone, so:
//! - `binary.arguments` and `binary.env` are never used: the command is always `dsh-session-reference
//!   lsp` with the shell's environment (an env such as `PYTHONPATH=.` would run the project's code
//!   in the server). `binary.path` is Zed's own: Zed runs it itself, without asking the extension,
//!   and only once the user has trusted the worktree.
//! - `sessionsRoot` and `profile` are dropped from both settings objects: a project must not point
//!   the server at a store it ships or another dsh profile. The server's default is dsh's own
//!   (`$DSH_HOME/sessions`, the `web` profile); set `DSH_HOME` in your environment to move both.
//!   Every budget a project could send is clamped by the server itself.

use zed_extension_api::{self as zed, serde_json, settings::LspSettings, LanguageServerId, Result};

const SERVER: &str = "dsh-session-reference";
const SECTION: &str = "dshSessionReference";
/// Settings that choose what is read, which a project's settings must not reach.
const USER_ONLY: [&str; 2] = ["sessionsRoot", "profile"];

struct DshSessionReference;

fn lsp_settings(language_server_id: &LanguageServerId, worktree: &zed::Worktree) -> LspSettings {
    // Settings that do not parse are Zed's to report; the server then starts with its defaults.
    LspSettings::for_worktree(language_server_id.as_ref(), worktree).unwrap_or_default()
}

/// `value` without the [`USER_ONLY`] keys, in the section itself or wrapped in `dshSessionReference`
/// (the server accepts both).
fn without_user_only(value: Option<serde_json::Value>) -> Option<serde_json::Value> {
    let mut value = value?;
    if let Some(object) = value.as_object_mut() {
        for key in USER_ONLY {
            object.remove(key);
        }
        if let Some(section) = object.get_mut(SECTION).and_then(|inner| inner.as_object_mut()) {
            for key in USER_ONLY {
                section.remove(key);
            }
        }
    }
    Some(value)
}

impl zed::Extension for DshSessionReference {
    fn new() -> Self {
        DshSessionReference
    }

    fn language_server_command(
        &mut self,
        _language_server_id: &LanguageServerId,
        worktree: &zed::Worktree,
    ) -> Result<zed::Command> {
        let command = worktree.which(SERVER).ok_or_else(|| {
            format!(
                "{SERVER} is not on the PATH: install it (pipx install {SERVER}) or set \
                 lsp.{SERVER}.binary.path in Zed's user settings"
            )
        })?;
        Ok(zed::Command {
            command,
            args: vec!["lsp".to_string()],
            env: worktree.shell_env(),
        })
    }

    fn language_server_initialization_options(
        &mut self,
        language_server_id: &LanguageServerId,
        worktree: &zed::Worktree,
    ) -> Result<Option<serde_json::Value>> {
        Ok(without_user_only(lsp_settings(language_server_id, worktree).initialization_options))
    }

    fn language_server_workspace_configuration(
        &mut self,
        language_server_id: &LanguageServerId,
        worktree: &zed::Worktree,
    ) -> Result<Option<serde_json::Value>> {
        Ok(without_user_only(lsp_settings(language_server_id, worktree).settings))
    }
}

zed::register_extension!(DshSessionReference);
