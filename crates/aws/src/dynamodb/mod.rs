//! Owns the DynamoDB adapter the receiver writes through, and its in-memory twin: the item's
//! attributes, the conditional write, what DynamoDB's answers mean. Must not know SQS or batching.
//!
//! - `store`: `DynamoDbStore`, the conditional `PutItem` and the errors, over a `Transport`;
//! - `item`: `AuditItem` <-> DynamoDB's JSON (the request, the size, `ALL_OLD` read back);
//! - `outcome`: `PutOutcome`, `StoreError`, `StartupError`, and the one payload rule's use;
//! - `port`: `Transport`, one signed call and its whole answer;
//! - `wire`, `sigv4`: the fast wire (hyper, rustls) and its signer, the production `Transport`;
//! - `memory`: `MemoryStore`, the twin, for tests;
//! - `batch_get`: items by key with BatchGetItem, unprocessed keys asked again (auditctl's reads,
//!   the archiver's repair);
//! - `json`: an item the SDK read, as DynamoDB's JSON (auditctl's reads, the archiver's repair).

pub mod batch_get;
pub mod item;
pub mod json;
pub mod memory;
pub mod outcome;
pub mod port;
pub mod sigv4;
pub mod store;
pub mod wire;

pub use item::{check_size, item_line_map, item_size, put_item_body};
pub use memory::MemoryStore;
pub use outcome::{PutOutcome, StartupError, StoreError};
pub use port::{Reply, Transport, WireError};
pub use store::DynamoDbStore;
pub use wire::{SetupError, Wire};
