//! audit-receiver: SQS audit messages -> DynamoDB, written exactly once in effect, with
//! partial batch failures. The flow: handler -> batch -> message -> store -> telemetry.

pub mod attest;
pub mod batch;
pub mod config;
pub mod deadletter;
pub mod handler;
pub mod store;
pub mod telemetry;

pub use audit_model::{message, reason::Reason};
pub use batch::{BatchSettings, RetryPolicy};
pub use config::{Config, Redrivers};
pub use handler::Handler;

impl Config {
    /// The batch settings this configuration stands for.
    pub fn batch_settings(&self) -> BatchSettings {
        BatchSettings {
            max_concurrency: self.max_concurrency,
            deadline_margin: self.deadline_margin,
            retention_days: self.retention_days,
            retry: RetryPolicy::default(),
            max_receive_count: self.max_receive_count,
            access_queue_arn: self.access_queue_arn.clone(),
            redrivers: self.redrivers.clone(),
        }
    }
}
