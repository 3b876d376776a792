//! Owns what proves the trail: the offline check of a proof (`offline`: the log's key, a
//! checkpoint's signature, a witness's cosignature, one event's proof), with the feature `aws`
//! the archive bucket read through one port (`archive`), the transparency log's reader (`tlog`),
//! `verify`, `prove` and the witness, each with a typed error (`Error`). Must not know a command
//! line, the words for people, or DynamoDB: the table is a port its caller adapts
//! (docs/architecture.md).

pub mod offline;

#[cfg(feature = "aws")]
pub mod archive;
#[cfg(feature = "aws")]
mod error;
#[cfg(feature = "aws")]
pub mod evidence;
#[cfg(feature = "aws")]
pub mod prove;
#[cfg(feature = "aws")]
pub mod tlog;
#[cfg(feature = "aws")]
pub mod verify;
#[cfg(feature = "aws")]
pub mod witness;

#[cfg(feature = "aws")]
pub use error::Error;
pub use offline::{
    BundleProblem, BundleVerdict, CheckError, LogKey, Verdict, check_bundle, check_cosignature,
    check_inclusion, check_proof, public_key_pem, witness_key_arg, witness_key_args,
};
