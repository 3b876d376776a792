//! The audit event shared by the three programs (the receiver, the archiver, auditctl): body
//! rules, canonical time, the item and its key and buckets, reasons with their disposition, the
//! access queue's rule, the `failureContext` of a dead-lettered message, the digests. Pure: no AWS SDK, no async
//! runtime, no I/O, no Lambda telemetry (that is `audit_aws::telemetry`).

pub mod access;
pub mod archive;
pub mod attest;
pub mod context;
pub mod digest;
pub mod evidence;
pub mod keys;
pub mod line;
pub mod message;
pub mod note;
pub mod payload;
pub mod range;
pub mod reason;
pub mod repair;
pub mod tlog;

pub use message::envelope;
pub use reason::{Disposition, Reason};
