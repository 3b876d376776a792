//! The function binary against DynamoDB over TLS, as in AWS: it trusts the roots the SDK would
//! (`SSL_CERT_FILE` here, the system's store otherwise), refuses a certificate it cannot verify,
//! and gives up on a handshake that never completes within its connect timeout.

mod support;
#[path = "support/tls.rs"]
mod tls_identity;

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use support::http::{read_request, write_response};
use support::runtime_api::{AsyncHandler, RuntimeApi, bind, serve_on_thread};

/// A DynamoDB endpoint over TLS that answers `{}` to everything (PutItem: written) and counts the
/// PutItems it read; or, without an acceptor, one that accepts connections and never answers.
struct Dynamo {
    tls: Option<tokio_rustls::TlsAcceptor>,
    put_items: AtomicUsize,
    connections: AtomicUsize,
}

impl AsyncHandler for Dynamo {
    async fn connection(self: Arc<Self>, socket: tokio::net::TcpStream) {
        self.connections.fetch_add(1, Ordering::SeqCst);
        let Some(acceptor) = &self.tls else {
            // Holds the connection open, silent, until the client gives up on it.
            let mut socket = socket;
            let mut sink = [0u8; 1024];
            while let Ok(n) = tokio::io::AsyncReadExt::read(&mut socket, &mut sink).await {
                if n == 0 {
                    return;
                }
            }
            return;
        };
        let Ok(mut socket) = acceptor.accept(socket).await else {
            return;
        };
        let mut buffer = Vec::new();
        while let Some(request) = read_request(&mut socket, &mut buffer).await {
            if request.target.ends_with(".PutItem") {
                self.put_items.fetch_add(1, Ordering::SeqCst);
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

fn dynamo(tls: Option<tokio_rustls::TlsAcceptor>) -> (Arc<Dynamo>, String) {
    let (listener, port) = bind();
    let dynamo = Arc::new(Dynamo {
        tls,
        put_items: AtomicUsize::new(0),
        connections: AtomicUsize::new(0),
    });
    serve_on_thread(listener, dynamo.clone());
    (dynamo, format!("https://127.0.0.1:{port}"))
}

/// A CA file trusted by the function (`SSL_CERT_FILE`).
fn ca_file(name: &str, pem: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(format!("tls-test-{}-{name}.pem", std::process::id()));
    std::fs::write(&path, pem).unwrap();
    path
}

struct Function(Child);

impl Drop for Function {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Function {
    fn start(api: &RuntimeApi, endpoint: &str, ca: &PathBuf) -> Self {
        let child = Command::new(env!("CARGO_BIN_EXE_audit-receiver"))
            .env_clear()
            .env("AWS_LAMBDA_RUNTIME_API", api.address())
            .env("AWS_LAMBDA_FUNCTION_NAME", "audit-receiver")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
            .env("AWS_ENDPOINT_URL", endpoint)
            .env("SSL_CERT_FILE", ca)
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "us-east-1")
            .env("TABLE_NAME", "AuditMessages")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the function binary");
        Function(child)
    }

    /// Everything the function logged, once it is stopped.
    fn logs(mut self) -> String {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let mut out = String::new();
        if let Some(mut stdout) = self.0.stdout.take() {
            let _ = stdout.read_to_string(&mut out);
        }
        out
    }
}

/// One invocation with one record; the number of records reported failed.
fn invoke_one(api: &mut RuntimeApi) -> usize {
    let record = support::record(
        "m1",
        r#"{"auditText":"signed in","auditTime":"2026-11-22T10:00:00Z"}"#,
    );
    let event = serde_json::json!({ "Records": [record] }).to_string();
    let (_, response) = api
        .invoke(event, Duration::from_secs(60))
        .expect("an answer before the deadline");
    let value: serde_json::Value = serde_json::from_str(&response).expect("a JSON response");
    value["batchItemFailures"]
        .as_array()
        .expect("a batch response")
        .len()
}

#[test]
fn writes_go_over_tls_to_an_endpoint_trusted_through_ssl_cert_file() {
    let (pem, acceptor) = tls_identity::acceptor();
    let (dynamo, endpoint) = dynamo(Some(acceptor));
    let mut api = RuntimeApi::start(Duration::from_secs(60));
    let function = Function::start(&api, &endpoint, &ca_file("trusted", &pem));

    assert_eq!(invoke_one(&mut api), 0, "{}", function.logs());
    assert_eq!(dynamo.put_items.load(Ordering::SeqCst), 1);
}

#[test]
fn a_certificate_the_function_cannot_verify_fails_the_record() {
    let (_, acceptor) = tls_identity::acceptor();
    let (other_ca, _) = tls_identity::acceptor();
    let (dynamo, endpoint) = dynamo(Some(acceptor));
    let mut api = RuntimeApi::start(Duration::from_secs(60));
    let function = Function::start(&api, &endpoint, &ca_file("other", &other_ca));

    assert_eq!(invoke_one(&mut api), 1);
    assert_eq!(
        dynamo.put_items.load(Ordering::SeqCst),
        0,
        "nothing was sent"
    );
    let logs = function.logs();
    assert!(
        logs.contains("store_unavailable") && logs.contains("connection failed"),
        "{logs}"
    );
}

#[test]
fn a_handshake_that_never_completes_is_given_up_within_the_connect_timeout() {
    let (pem, _) = tls_identity::acceptor();
    let (dynamo, endpoint) = dynamo(None);
    let mut api = RuntimeApi::start(Duration::from_secs(60));
    let function = Function::start(&api, &endpoint, &ca_file("silent", &pem));

    assert_eq!(invoke_one(&mut api), 1);
    // Each attempt opened a connection of its own: the attempts ended at the connect timeout,
    // not at the write's 3 s attempt timeout (which would say "the request timed out").
    assert!(dynamo.connections.load(Ordering::SeqCst) >= 2);
    let logs = function.logs();
    assert!(logs.contains("connect timed out"), "{logs}");
}
