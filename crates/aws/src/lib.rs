//! How audit-receiver's programs (the receiver, the archiver, auditctl) talk to AWS, once: SDK
//! configuration presets (`config`), one typed classification of AWS's errors (`error`), the
//! S3, KMS, SQS and DynamoDB adapters with their in-memory twins, environment parsing that names
//! the variable (`env`), and the Lambda telemetry both functions share (`telemetry`). Each
//! service is a feature, so a program links only the clients it uses. What an audit event is
//! stays in `audit_model`; what a program does with these stays in that program: this crate must
//! not know batching, archiving or any command.

pub mod config;
#[cfg(feature = "dynamodb")]
pub mod dynamodb;
pub mod env;
pub mod error;
#[cfg(feature = "sqs")]
pub mod sqs;
pub mod telemetry;

#[cfg(feature = "kms")]
pub mod kms;
#[cfg(feature = "lambda")]
pub mod lambda;
#[cfg(feature = "s3")]
pub mod s3;

pub use error::{AwsError, ErrorKind};
