//! Owns the port between the DynamoDB store and its wire: send one signed call and get the whole
//! answer back (status, error type header, body, clock skew). Must not know audit items or HTTP.
//!
//! `Wire` is the production side (hyper, rustls, SigV4); a test gives the store a scripted
//! transport and checks its logic (outcomes, errors, clock and credential handling) without a
//! socket. Generic, not `dyn`: the store is compiled for its wire, so the port costs no CPU.

use std::future::Future;

use bytes::Bytes;

/// A whole answer: status, the `x-amzn-ErrorType` header if any, and the body.
#[derive(Debug, Clone, Default)]
pub struct Reply {
    pub status: u16,
    pub error_type: Option<String>,
    pub body: Bytes,
    /// For an error answer with a `Date` header: the service's clock minus ours, in
    /// milliseconds, at the exchange's midpoint (what the SDK's clock-skew correction measures).
    pub skew_ms: Option<i64>,
    /// The clock correction the request was signed with (the service's clock minus ours, in
    /// milliseconds, as the signer knew it then), against which `skew_ms` is judged.
    pub signed_skew_ms: i64,
}

/// A call that got no whole answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("{0}")]
    Credentials(String),
    #[error("connect timed out")]
    ConnectTimeout,
    #[error("connection failed")]
    Connect,
    #[error("the request could not be sent")]
    Send,
    #[error("the response was lost or could not be read")]
    Response,
}

/// What the store needs from DynamoDB's wire.
pub trait Transport: Send + Sync {
    /// One call: `operation` (e.g. `PutItem`) with a JSON body, signed; the whole answer,
    /// whatever its status. Only operations that are idempotent in effect go through here (the
    /// wire may send a call again on a fresh connection).
    fn call(
        &self,
        operation: &str,
        body: Bytes,
    ) -> impl Future<Output = Result<Reply, WireError>> + Send;

    /// Opens a connection (or reuses an idle one) so that it is in the pool for later calls.
    fn probe(&self) -> impl Future<Output = Result<(), WireError>> + Send;

    /// Says whether the call `reply` answers was signed too far off the service's time as
    /// `reply` shows it (judged by the correction it was signed with, `Reply::signed_skew_ms`),
    /// so that signing it again is worth it; if so, signs from now on at the service's time,
    /// unless another answer already made it so.
    fn correct_clock(&self, reply: &Reply) -> bool;

    /// Makes the next call fetch the credentials again (DynamoDB refused them).
    fn forget_credentials(&self);
}
