//! audit-archiver: the audit table's DynamoDB stream -> an immutable archive in S3, each event
//! exactly once: INSERTs under `trail/`, MODIFY and user REMOVE records (tampering) under
//! `tamper/`, TTL deletions counted. The flow: handler -> event -> batch (markers, objects,
//! encode) -> bucket -> telemetry; docs/archive.md tells the layout and the argument.

pub mod attest;
pub mod batch;
pub mod bucket;
pub mod budget;
pub mod clock;
pub mod config;
pub mod encode;
pub mod event;
pub mod handler;
pub mod marker;
pub mod objects;
pub mod repair;
pub mod report;
pub mod seal;
pub mod signer;
pub mod table;
pub mod telemetry;
pub mod words;

pub use batch::Settings;
pub use config::Config;
pub use handler::Handler;
