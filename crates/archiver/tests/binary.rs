//! The `audit-archiver` binary as Lambda runs it: configuration read at start-up (a bad value stops
//! it, naming the variable), then a stream event from the Lambda Runtime API (the receiver's test
//! stand-in) archived into moto's S3 and answered with `batchItemFailures`.

#[path = "support/lambda.rs"]
mod lambda;
#[path = "support/moto.rs"]
mod moto;
mod support;

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use lambda::runtime_api::RuntimeApi;
use moto::{BUCKET, Moto, objects};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};
use support::{gunzip_lines, insert, item, sequence_number};

/// The function's process, in a process group of its own, killed with it on drop.
struct Function(Child);

impl Drop for Function {
    fn drop(&mut self) {
        let _ = killpg(Pid::from_raw(self.0.id() as i32), Signal::SIGKILL);
        let _ = self.0.wait();
    }
}

fn command(vars: &[(&str, &str)]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_audit-archiver"));
    command
        .env_clear()
        .env("AWS_LAMBDA_FUNCTION_NAME", "audit-archiver")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .stdin(Stdio::null())
        .process_group(0);
    for (name, value) in vars {
        command.env(name, value);
    }
    command
}

#[test]
fn a_bad_configuration_stops_start_up_naming_the_variable() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (&[], "ARCHIVE_BUCKET"),
        (
            &[
                ("ARCHIVE_BUCKET", "archive"),
                ("DIGEST_PERIOD_SECONDS", "7"),
            ],
            "DIGEST_PERIOD_SECONDS",
        ),
        (
            &[
                ("ARCHIVE_BUCKET", "archive"),
                ("AWS_ENDPOINT_URL", "localhost"),
            ],
            "AWS_ENDPOINT_URL",
        ),
    ];
    for (vars, name) in cases {
        let output = command(vars)
            .env("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .expect("the binary runs");
        assert!(!output.status.success(), "{vars:?} started");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(said.contains(name), "{vars:?}: {said}");
    }
}

#[tokio::test]
async fn the_binary_archives_a_stream_event_from_the_runtime_api() {
    let moto = Moto::start();
    moto.create_bucket(BUCKET).await;
    let mut api = RuntimeApi::start(Duration::from_secs(60));
    let _function = Function(
        command(&[
            ("ARCHIVE_BUCKET", BUCKET),
            ("DIGEST_PERIOD_SECONDS", "60"),
            ("AWS_ENDPOINT_URL", &moto.endpoint),
            ("AWS_LAMBDA_RUNTIME_API", &api.address()),
        ])
        .stdout(Stdio::null())
        .spawn()
        .expect("the function binary"),
    );
    let mut unreadable = insert(3);
    unreadable["dynamodb"]
        .as_object_mut()
        .map(|change| change.remove("NewImage"));
    let event = json!({"Records": [insert(1), insert(2), unreadable, insert(4)]}).to_string();
    let (_, response) =
        tokio::task::spawn_blocking(move || api.invoke(event, Duration::from_secs(60)))
            .await
            .expect("the runtime API thread")
            .expect("an answer");
    let response: Value = serde_json::from_str(&response).expect("JSON");
    assert_eq!(
        response,
        json!({"batchItemFailures": [
            {"itemIdentifier": sequence_number(3)},
            {"itemIdentifier": sequence_number(4)}
        ]})
    );
    let trail = objects(&moto.s3(), BUCKET, "trail/").await;
    assert_eq!(trail.len(), 1);
    assert_eq!(
        gunzip_lines(&trail[0].1),
        vec![
            audit_model::line::item_line(&item("m-1")),
            audit_model::line::item_line(&item("m-2"))
        ]
    );
}
