//! The hub kernel: what every catalogue area builds on and which knows no
//! group. Settings, the database, the error envelope and the extractors,
//! validation, crypto, the gate, the application state, the audit chain
//! and its emitter, mail, the command wake-up bus, and what a URL the hub
//! calls may carry and how the log shows it.
//!
//! Where the gate needs what only an area knows (an API key's row, a
//! persona's permissions, a relationship, a policy), it declares a trait in
//! `gate::directory` that the area implements and the hub binary injects.

pub mod audit;
pub mod body;
pub mod bus;
pub mod catalogue;
pub mod config;
pub mod contract;
pub mod crypto;
pub mod db;
pub mod error;
pub mod extract;
pub mod gate;
pub mod inbound;
pub mod mail;
pub mod nesting;
pub mod nul;
pub mod outbound;
pub mod prelude;
pub mod search;
pub mod security;
pub mod state;
pub mod storage;
pub mod types;
pub mod validate;

#[cfg(test)]
mod floors {
    use std::path::Path;

    /// The code of a kernel file without its comments.
    fn code(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap().lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
    }

    /// ARCHITECTURE.md's floors: the error envelope, the database and
    /// crypto import nothing from the gate, the audit chain or the state.
    #[test]
    fn error_db_and_crypto_import_nothing_from_above() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = vec![src.join("error.rs")];
        for dir in ["db", "crypto"] {
            files.extend(std::fs::read_dir(src.join(dir)).unwrap().map(|e| e.unwrap().path()));
        }
        for file in files {
            let code = code(&file);
            for above in ["crate::gate", "crate::audit", "crate::state", "AppState"] {
                assert!(!code.contains(above), "{} refers to `{above}`", file.display());
            }
            // And in a grouped `use crate::{...};`.
            for group in code.split("use crate::{").skip(1) {
                let group = group.split("};").next().unwrap_or("");
                let names: Vec<&str> = group.split(|c: char| !(c.is_alphanumeric() || c == '_')).collect();
                for above in ["gate", "audit", "state"] {
                    assert!(!names.contains(&above), "{} imports `{above}`", file.display());
                }
            }
        }
    }
}
