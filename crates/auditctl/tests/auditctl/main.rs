//! Black-box tests of `auditctl` against a real local endpoint (moto's server over HTTP): given
//! items written by the function's own code and messages in the queues, when the binary runs,
//! then its output, exit status and the queues are as docs/auditctl.md says.
//!
//! One test binary (`auditctl`), one module per concern; `harness` is what they share, and
//! `support` the receiver's harness (moto, the function's handler, SQS events).

#[path = "../../../receiver/tests/support/mod.rs"]
mod support;

mod harness;

mod access;
/// `auditctl check-proof` offline, and docs/operations.md's Python check.
mod check_proof;
mod dlq;
mod dlq_paging;
/// `auditctl export --evidence` and check-proof of a bundle (evidence.rs).
mod evidence;
/// What a failure before any work says: its cause and fix (fixes.rs).
mod fixes;
mod lookup_output;
mod lookup_requests;
mod lookups;
/// `auditctl prove` and `consistency` (prove.rs) on moto.
mod prove;
mod query;
mod sender;
mod ui;
mod ui_dead_letters;
/// `auditctl verify` (verify/mod.rs, with the same harness).
mod verify;
/// `auditctl witness` (witness.rs).
mod witness;
