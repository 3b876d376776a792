//! Owns what a person reads when a command fails before it can do its work, one test per class of
//! failure (docs/auditctl.md "When it fails"): no credentials, nothing at the endpoint, a caller
//! without the policy, a table or bucket not found, AWS throttling. Each message names the cause
//! and its fix first, and the command exits 1. Must not know any one command's output.

use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use audit_testkit::net::on_own_thread;

use crate::harness::*;
use crate::support::http::{read_request, write_response};
use crate::support::*;

const QUERY: [&str; 6] = [
    "--no-audit-event",
    "query",
    "--from",
    "2026-11-22T00:00:00Z",
    "--to",
    "2026-11-22T23:59:59.999Z",
];

/// The message on stderr (after the line that says the read goes unrecorded on purpose), after
/// checking that the run failed with exit status 1 and printed no row.
fn failed(output: &Output) -> String {
    assert_eq!(output.status.code(), Some(1), "{}", stderr(output));
    assert_eq!(stdout(output), "");
    let text = stderr(output);
    text.strip_prefix("access not recorded: --no-audit-event\n")
        .unwrap_or_else(|| panic!("{text}"))
        .to_owned()
}

/// A DynamoDB endpoint in front of moto that answers every `target` request with `status` and
/// DynamoDB's error `code` (as DynamoDB words it), and forwards every other request. Returns the
/// endpoint and how many `target` requests it answered so.
fn refusing(
    upstream: &str,
    target: &'static str,
    code: &'static str,
) -> (String, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.set_nonblocking(true).unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let upstream = upstream.trim_start_matches("http://").to_owned();
    let refused = Arc::new(AtomicUsize::new(0));
    let counter = refused.clone();
    on_own_thread(move || async move {
        let listener = tokio::net::TcpListener::from_std(listener).unwrap();
        while let Ok((mut socket, _)) = listener.accept().await {
            let upstream = upstream.clone();
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut buffer = Vec::new();
                while let Some(request) = read_request(&mut socket, &mut buffer).await {
                    let (status, content_type, body) = if request.target == target {
                        counter.fetch_add(1, Ordering::SeqCst);
                        let body = format!(
                            r#"{{"__type":"com.amazonaws.dynamodb.v20120810#{code}","message":"{code} of the endpoint in front of moto"}}"#
                        );
                        (
                            400,
                            "application/x-amz-json-1.0".to_owned(),
                            body.into_bytes(),
                        )
                    } else {
                        forward(&upstream, &request, &request.body).await
                    };
                    let headers = [("Content-Type", content_type.as_str())];
                    if write_response(&mut socket, status, &headers, &body)
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    (endpoint, refused)
}

#[tokio::test]
async fn no_credentials_at_all_says_which_to_set() {
    let moto = Moto::start();
    create_table(&moto.client(), TABLE).await;
    let mut command = Command::new(env!("CARGO_BIN_EXE_auditctl"));
    for name in [
        "AWS_PROFILE",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_CONFIG_FILE",
        "AWS_SHARED_CREDENTIALS_FILE",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "ACCESS_QUEUE_URL",
    ] {
        command.env_remove(name);
    }
    let output = command
        .env("HOME", "/nonexistent") // no ~/.aws
        .env("AWS_REGION", "us-east-1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_ENDPOINT_URL", &moto.endpoint)
        .env("TABLE_NAME", TABLE)
        .args(QUERY)
        .output()
        .unwrap();
    let message = failed(&output);
    assert!(
        message.starts_with(
            "error: no AWS credentials: set AWS_PROFILE (or --profile, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), or `. .local/stack.env` for the local stack\n  what failed: "
        ),
        "{message}"
    );
}

#[tokio::test]
async fn nothing_answering_at_the_endpoint_asks_whether_the_local_stack_runs() {
    let endpoint = format!("http://127.0.0.1:{}", audit_testkit::net::free_port());
    let output = auditctl_as_given(&endpoint, &QUERY, &[("TABLE_NAME", TABLE)]);
    let message = failed(&output);
    assert!(
        message.starts_with(&format!(
            "error: nothing answers at {endpoint}: is the local stack running? `make local-up` starts it; or check AWS_ENDPOINT_URL (--endpoint-url)\n  what failed: "
        )) && message.contains("Connection refused"),
        "{message}"
    );
}

#[tokio::test]
async fn a_caller_without_the_policy_is_told_which_to_attach() {
    let moto = Moto::start();
    create_table(&moto.client(), TABLE).await;
    let (endpoint, refused) = refusing(
        &moto.endpoint,
        "DynamoDB_20120810.Query",
        "AccessDeniedException",
    );
    let output = auditctl_as_given(&endpoint, &QUERY, &[("TABLE_NAME", TABLE)]);
    let message = failed(&output);
    assert!(refused.load(Ordering::SeqCst) > 0);
    assert!(
        message.starts_with(
            "error: not allowed: attach AuditReaderPolicy (reading the trail and the archive) or AuditOperatorPolicy (also the dead-letter queue and repairs) of the current template.yaml to the caller"
        ) && message.contains("what failed: AccessDeniedException: AccessDeniedException of the endpoint"),
        "{message}"
    );
}

#[tokio::test]
async fn throttled_requests_say_to_run_again_later_or_read_less() {
    let moto = Moto::start();
    create_table(&moto.client(), TABLE).await;
    let (endpoint, refused) = refusing(
        &moto.endpoint,
        "DynamoDB_20120810.Query",
        "ThrottlingException",
    );
    let output = auditctl_as_given(&endpoint, &QUERY, &[("TABLE_NAME", TABLE)]);
    let message = failed(&output);
    assert!(refused.load(Ordering::SeqCst) > 0);
    assert!(
        message.starts_with(&format!(
            "error: AWS throttled the requests at {endpoint} (too many at once for the account or the table): run again in a minute, over a shorter range or with --limit, or raise the table's read capacity\n  what failed: "
        )) && message.contains("ThrottlingException"),
        "{message}"
    );
}

#[tokio::test]
async fn a_table_or_bucket_not_found_names_the_variable_that_names_it() {
    let moto = Moto::start();
    let output = auditctl_as_given(&moto.endpoint, &QUERY, &[("TABLE_NAME", "Nope")]);
    let message = failed(&output);
    assert_eq!(
        message,
        format!(
            "error: table Nope not found at {}: set TABLE_NAME or --table, or deploy the stack\n",
            moto.endpoint
        )
    );

    create_table(&moto.client(), TABLE).await;
    let key = create_key(&kms(&moto)).await;
    let output = auditctl_as_given(
        &moto.endpoint,
        &[
            "--no-audit-event",
            "prove",
            "m-1",
            "--audit-time",
            "2026-11-22T10:00:00Z",
            "--bucket",
            "no-such-archive",
            "--key-id",
            &key,
        ],
        &[("TABLE_NAME", TABLE)],
    );
    let message = failed(&output);
    assert!(
        message.starts_with(&format!(
            "error: archive bucket no-such-archive not found at {}: check ARCHIVE_BUCKET or --bucket (stack output AuditArchiveBucketName)",
            moto.endpoint
        )),
        "{message}"
    );
}
