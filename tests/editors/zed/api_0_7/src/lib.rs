//! The part of zed_extension_api 0.7.0's public API that editors/zed uses, signature for
//! signature: the `Extension` trait, `register_extension!`, `Command`, `LanguageServerId`,
//! `Worktree`, `Result` and `settings::LspSettings` (src/extension_api.rs and src/settings.rs in
//! zed-industries/zed, the worktree resource and settings types of the WIT it binds). Bodies are
//! placeholders: the crate lets `cargo check` prove the extension type-checks against that API
//! where neither crates.io nor Rust's wasm targets can be reached.

use std::collections::HashMap;

/// `pub use serde_json;` in the real crate; the type the extension names and the methods of
/// serde_json 1.x it calls (`Value::as_object_mut`, `Map::remove`, `Map::get_mut`), same signatures.
pub mod serde_json {
    #[derive(Debug, Clone, PartialEq)]
    pub enum Value {
        Null,
        Object(Map<String, Value>),
    }

    impl Value {
        pub fn as_object_mut(&mut self) -> Option<&mut Map<String, Value>> {
            match self {
                Value::Object(map) => Some(map),
                _ => None,
            }
        }
    }

    #[derive(Debug, Clone, PartialEq, Default)]
    pub struct Map<K, V> {
        entries: Vec<(K, V)>,
    }

    impl Map<String, Value> {
        pub fn remove<Q>(&mut self, key: &Q) -> Option<Value>
        where
            String: std::borrow::Borrow<Q>,
            Q: ?Sized + Ord + Eq + std::hash::Hash,
        {
            use std::borrow::Borrow;
            let index = self.entries.iter().position(|(k, _)| k.borrow() == key)?;
            Some(self.entries.remove(index).1)
        }

        pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut Value>
        where
            String: std::borrow::Borrow<Q>,
            Q: ?Sized + Ord + Eq + std::hash::Hash,
        {
            use std::borrow::Borrow;
            self.entries.iter_mut().find(|(k, _)| k.borrow() == key).map(|(_, v)| v)
        }
    }
}

pub type Result<T, E = String> = core::result::Result<T, E>;

pub type EnvVars = Vec<(String, String)>;

#[derive(Debug, Clone)]
pub struct Command {
    pub command: String,
    pub args: Vec<String>,
    pub env: EnvVars,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LanguageServerId(String);

impl AsRef<str> for LanguageServerId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[derive(Debug)]
pub struct Worktree {
    handle: u32,
}

impl Worktree {
    pub fn id(&self) -> u64 {
        u64::from(self.handle)
    }
    pub fn root_path(&self) -> String {
        unimplemented!()
    }
    pub fn read_text_file(&self, _path: &str) -> Result<String, String> {
        unimplemented!()
    }
    pub fn which(&self, _binary_name: &str) -> Option<String> {
        unimplemented!()
    }
    pub fn shell_env(&self) -> EnvVars {
        unimplemented!()
    }
}

pub trait Extension: Send + Sync {
    fn new() -> Self
    where
        Self: Sized;

    fn language_server_command(
        &mut self,
        _language_server_id: &LanguageServerId,
        _worktree: &Worktree,
    ) -> Result<Command> {
        Err("`language_server_command` not implemented".to_string())
    }

    fn language_server_initialization_options(
        &mut self,
        _language_server_id: &LanguageServerId,
        _worktree: &Worktree,
    ) -> Result<Option<serde_json::Value>> {
        Ok(None)
    }

    fn language_server_workspace_configuration(
        &mut self,
        _language_server_id: &LanguageServerId,
        _worktree: &Worktree,
    ) -> Result<Option<serde_json::Value>> {
        Ok(None)
    }
}

/// The real macro exports `init-extension` and registers a boxed instance; this one checks the
/// same thing at compile time: the type implements [`Extension`] and can be boxed as one.
#[macro_export]
macro_rules! register_extension {
    ($extension_type:ty) => {
        pub extern "C" fn __init_extension() {
            let _: Box<dyn $crate::Extension> =
                Box::new(<$extension_type as $crate::Extension>::new());
        }
    };
}

pub mod settings {
    use super::{serde_json, HashMap, Result, Worktree};

    #[derive(Default, Debug)]
    pub struct LspSettings {
        pub binary: Option<CommandSettings>,
        pub initialization_options: Option<serde_json::Value>,
        pub settings: Option<serde_json::Value>,
    }

    #[derive(Debug, PartialEq, Eq)]
    pub struct CommandSettings {
        pub path: Option<String>,
        pub arguments: Option<Vec<String>>,
        pub env: Option<HashMap<String, String>>,
    }

    impl LspSettings {
        pub fn for_worktree(_language_server_name: &str, _worktree: &Worktree) -> Result<Self> {
            unimplemented!()
        }
    }
}
