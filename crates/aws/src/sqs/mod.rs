//! Owns how the programs talk to SQS: message attributes mapped between the SDK, the Lambda
//! event and a letter, with SQS's one limit (`attributes`), and the dead-letter adapter with its
//! in-memory twin (`deadletter`, `memory`). Must not know why a message is dead-lettered or what
//! its attributes mean: that is the caller's format.

pub mod attributes;
pub mod deadletter;
pub mod memory;

pub use attributes::{Attribute, MAX_ATTRIBUTES, room};
pub use deadletter::{DeadLetter, SendError, SqsDeadLetterQueue};
pub use memory::MemoryDeadLetterQueue;
