//! Lambda Managed Instances: with `AWS_LAMBDA_MAX_CONCURRENCY` above 1 the function serves that
//! many invocations at once in one process; unset or 1, one at a time as in a classic execution
//! environment. The built function binary runs against the project's Runtime API stand-in and a
//! DynamoDB stand-in that holds every PutItem until as many are waiting as the test asks for:
//! only invocations truly in flight together can release each other.

mod support;

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use support::http::{read_request, write_response};
use support::runtime_api::{AsyncHandler, RuntimeApi, bind, serve_on_thread};
use tokio::sync::watch;

/// A DynamoDB endpoint: answers `{}` to everything (PutItem: written; DescribeTable: the warm-up
/// check, whose answer does not matter here), but holds each PutItem until `together` PutItems
/// have arrived.
struct Barrier {
    together: usize,
    arrived: watch::Sender<usize>,
}

impl AsyncHandler for Barrier {
    async fn connection(self: Arc<Self>, mut socket: tokio::net::TcpStream) {
        let mut buffer = Vec::new();
        while let Some(request) = read_request(&mut socket, &mut buffer).await {
            if request.target.ends_with(".PutItem") {
                self.arrived.send_modify(|n| *n += 1);
                let mut arrived = self.arrived.subscribe();
                let _ = arrived.wait_for(|n| *n >= self.together).await;
            }
            let headers = [("Content-Type", "application/x-amz-json-1.0")];
            if write_response(&mut socket, 200, &headers, b"{}")
                .await
                .is_err()
            {
                return;
            }
        }
    }
}

struct Function(Child);

impl Drop for Function {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(api: &RuntimeApi, dynamo_port: u16, max_concurrency: Option<&str>) -> Function {
    let mut command = Command::new(env!("CARGO_BIN_EXE_audit-receiver"));
    command
        .env_clear()
        .env("AWS_LAMBDA_RUNTIME_API", api.address())
        .env("AWS_LAMBDA_FUNCTION_NAME", "audit-receiver")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "2048")
        .env(
            "AWS_ENDPOINT_URL",
            format!("http://127.0.0.1:{dynamo_port}"),
        )
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env("TABLE_NAME", "AuditMessages")
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    if let Some(n) = max_concurrency {
        command.env("AWS_LAMBDA_MAX_CONCURRENCY", n);
    }
    Function(command.spawn().expect("the function binary"))
}

fn event(id: &str) -> String {
    let record = support::record(
        id,
        &format!(r#"{{"auditText":"signed in","auditTime":"2026-11-22T10:00:00Z","n":"{id}"}}"#),
    );
    serde_json::json!({ "Records": [record] }).to_string()
}

fn failures(response: &str) -> usize {
    let value: serde_json::Value = serde_json::from_str(response).expect("a JSON response");
    value["batchItemFailures"]
        .as_array()
        .expect("a batch response")
        .len()
}

/// Two invocations, each with one record, against a DynamoDB that answers a PutItem only once
/// `together` of them are waiting.
fn two_invocations(max_concurrency: Option<&str>, together: usize) -> (RuntimeApi, Vec<String>) {
    let (listener, dynamo_port) = bind();
    let (arrived, _) = watch::channel(0);
    serve_on_thread(listener, Arc::new(Barrier { together, arrived }));
    let mut api = RuntimeApi::start(Duration::from_secs(60));
    let _function = start(&api, dynamo_port, max_concurrency);
    let ids = [api.enqueue(event("a")), api.enqueue(event("b"))];
    let responses = ids
        .iter()
        .map(|id| {
            api.response(id, Duration::from_secs(60))
                .unwrap_or_else(|e| panic!("{id}: {e} (max in flight {})", api.max_in_flight()))
                .1
        })
        .collect();
    (api, responses)
}

#[test]
fn managed_instances_serve_two_invocations_at_once() {
    // Each PutItem is answered only when both have arrived: both invocations must be in flight
    // together for either to finish.
    let (api, responses) = two_invocations(Some("2"), 2);
    for response in &responses {
        assert_eq!(failures(response), 0, "{response}");
    }
    assert_eq!(api.max_in_flight(), 2);
}

#[test]
fn a_classic_environment_serves_one_invocation_at_a_time() {
    for setting in [None, Some("1"), Some("0"), Some("not-a-number")] {
        let (api, responses) = two_invocations(setting, 1);
        for response in &responses {
            assert_eq!(failures(response), 0, "{setting:?}: {response}");
        }
        assert_eq!(api.max_in_flight(), 1, "{setting:?}");
    }
}
