//! Owns what proves the trail, for anyone who holds a proof: the log's key, a checkpoint's
//! signature, a witness's cosignature, one event's proof checked offline, each with a typed
//! error. Must not know AWS, a command line or how the proof was fetched (docs/architecture.md).

pub mod offline;

pub use offline::{CheckError, LogKey, Verdict, check_cosignature, check_proof, witness_key_arg};
