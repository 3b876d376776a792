//! Owns the operator's command line as a library (docs/architecture.md "The crates", auditctl):
//! the words for people of every error (`words.rs`), the flags' choices, the table's adapter for
//! verify (`table`), repair. Must not know the Lambda runtime or batching; reading the trail is
//! `audit_trail`'s, the time range `audit_model::range`'s, proving the trail (verify, prove, the
//! witness, the transparency log) `audit_proof`'s, the viewer's pages `audit_viewer`'s.

pub mod choices;
pub mod repair;
pub mod table;
pub mod words;

/// The transparency log's reader and checks, where the black-box tests have always found them.
pub use audit_proof::tlog;
pub use words::TrailError;
