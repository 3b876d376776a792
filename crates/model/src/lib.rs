//! The audit event shared by the three programs (the receiver, the archiver, auditctl): body
//! rules, canonical time, the item and its key and buckets, reasons with their disposition, and
//! the `failureContext` of a dead-lettered message; and (`lambda`) what the two Lambda functions
//! share at the runtime's edge: the deadline and the EMF document. Pure: no AWS SDK, no async
//! runtime, no I/O of its own (`lambda::write_line` writes to the writer it is given).

pub mod archive;
pub mod context;
pub mod digest;
pub mod envelope;
pub mod keys;
pub mod lambda;
pub mod line;
pub mod message;
pub mod payload;
pub mod reason;

pub use reason::{Disposition, Reason};
