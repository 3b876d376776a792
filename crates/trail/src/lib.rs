//! Owns reading the trail (docs/architecture.md "The crates", trail): the shard fan-out over the
//! table's indexes and the k-way merge, reading full items by key, filters, output formats, the
//! recording of each access, what the stack's table says in its tags, and the dead-letter queue's
//! policy (list, redrive); its errors are types (`Error`, `AccessError`, `TagError`). Must not
//! know the command line (clap, flags, the words for people: auditctl), the Lambda runtime or
//! batching; it reuses the model's item names, bucket rule, `failureContext` and time range.

pub mod access;
pub mod dlq;
mod error;
pub mod fetch;
pub mod filter;
pub mod hot;
pub mod item;
pub mod merge;
pub mod output;
pub mod query;
pub mod reader;
pub mod stack;

pub use error::Error;
pub use reader::{Reader, Stats};
