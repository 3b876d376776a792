//! Owns the operator's command line as a library (docs/architecture.md "The crates", auditctl):
//! the words for people of every error (`words.rs`), the flags' choices, and, until they move out,
//! the proof that the archive and the table were not changed (`verify`), prove, the witness,
//! repair and the viewer (`ui`). Must not know the Lambda runtime or batching; reading the trail
//! is `audit_trail`'s, the time range `audit_model::range`'s.

pub mod choices;
pub mod prove;
pub mod repair;
pub mod tlog;
pub mod ui;
pub mod verify;
pub mod witness;
pub mod words;

pub use words::TrailError;
