//! Owns how the programs talk to SQS: message attributes mapped between the SDK, the Lambda
//! event and a letter, with SQS's one limit (`attributes`), the dead-letter adapter with its
//! in-memory twin (`deadletter`, `memory`), and the queue port a reader works a queue through
//! (`port`) with its SDK adapter (`client`) and twin (`memory_queues`). Must not know why a
//! message is dead-lettered or what its attributes mean: that is the caller's format.

pub mod attributes;
pub mod client;
pub mod deadletter;
pub mod memory;
pub mod memory_queues;
pub mod port;

pub use attributes::{Attribute, MAX_ATTRIBUTES, room};
pub use client::SqsClient;
pub use deadletter::{DeadLetter, SendError, SqsDeadLetterQueue};
pub use memory::MemoryDeadLetterQueue;
pub use memory_queues::{Incoming, MemorySqs};
pub use port::{Depth, MAX_BATCH, Receive, Received, Sqs, System, Visibility};
