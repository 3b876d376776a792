//! What the workspace's tests and benchmarks share, written once: moto's server, the SDK's
//! configuration for a local endpoint, SQS records as Lambda delivers them, small local servers.
//! It knows no program's code (no audit crate): each crate's test support builds on it.

pub mod endpoint;
pub mod moto;
pub mod net;
pub mod sqs;
