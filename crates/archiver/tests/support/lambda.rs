//! The receiver's stand-in for the Lambda Runtime API (and the minimal HTTP it speaks), shared
//! as they are rather than copied: the archiver's binary meets the same API.
#![allow(dead_code)]

#[path = "../../../receiver/tests/support/http.rs"]
pub mod http;
#[path = "../../../receiver/tests/support/runtime_api.rs"]
pub mod runtime_api;
