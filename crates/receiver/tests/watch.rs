//! The function run the way a user runs it locally: `cargo lambda watch` against moto's
//! DynamoDB, and `cargo lambda invoke --data-file events/<file>` for every events file.

mod support;

use std::path::PathBuf;
use std::process::{Command, Stdio};

use std::time::Duration;
use support::group::Group;

use support::*;

/// `cargo lambda watch` and the function it starts, stopped on drop (support::group).
struct Watch {
    port: u16,
    log: PathBuf,
    _group: Group,
}

impl Watch {
    fn start(endpoint: &str) -> Self {
        let port = free_port();
        let log = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("watch-{port}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let mut group = Group::spawn(
            cargo_lambda()
                .args([
                    "watch",
                    "--ignore-changes",
                    "--invoke-address",
                    "127.0.0.1",
                    "--invoke-port",
                ])
                .arg(port.to_string())
                .env("TABLE_NAME", TABLE)
                .env("AWS_ENDPOINT_URL", endpoint)
                .env("AWS_ACCESS_KEY_ID", "test")
                .env("AWS_SECRET_ACCESS_KEY", "test")
                .env("AWS_REGION", "us-east-1")
                .env("AWS_LAMBDA_LOG_FORMAT", "JSON")
                .env("AWS_LAMBDA_LOG_LEVEL", "INFO")
                .stdin(Stdio::null())
                .stdout(out.try_clone().unwrap())
                .stderr(out),
        )
        .expect("cargo lambda watch (cargo-lambda from .venv: run `make test`)");
        wait_for_port(
            port,
            Duration::from_secs(120),
            &mut group.child,
            "cargo lambda watch",
        );
        Self {
            port,
            log,
            _group: group,
        }
    }

    fn invoke(&self, event_file: &str) -> serde_json::Value {
        let output = cargo_lambda()
            .args([
                "invoke",
                "audit-receiver",
                "--output-format",
                "json",
                "--invoke-address",
                "127.0.0.1",
            ])
            .args(["--invoke-port", &self.port.to_string(), "--data-file"])
            .arg(events_dir().join(event_file))
            .output()
            .expect("cargo lambda invoke");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "invoke {event_file}: {}\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("invoke {event_file}: {e}: {stdout}"))
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

fn cargo_lambda() -> Command {
    let mut command = Command::new("cargo");
    let venv = project_root().join(".venv/bin");
    let path = std::env::var("PATH").unwrap_or_default();
    command
        .arg("lambda")
        .current_dir(project_root())
        .env("PATH", format!("{}:{path}", venv.display()));
    command
}

#[tokio::test]
async fn every_events_file_through_cargo_lambda_watch_gets_the_documented_response() {
    let moto = Moto::start();
    create_table(&moto.client(), TABLE).await;
    let watch = Watch::start(&moto.endpoint);

    for name in EVENT_FILES {
        assert_eq!(
            watch.invoke(name),
            expected_response(name),
            "{name}\n{}",
            watch.log()
        );
    }

    // As every_events_file_gets_the_documented_response counts them.
    assert_eq!(scan(&moto.client(), TABLE).await.len(), 20);
    let log = watch.log();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let message = |l: &serde_json::Value| {
        l["fields"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let summaries = lines
        .iter()
        .filter(|l| message(l) == "batch processed")
        .count();
    assert_eq!(
        summaries,
        EVENT_FILES.len(),
        "one summary line per invocation:\n{log}"
    );
    let emf = lines.iter().filter(|l| l.get("_aws").is_some()).count();
    assert_eq!(emf, EVENT_FILES.len(), "one EMF document per invocation");
    let failures: Vec<_> = lines
        .iter()
        .filter(|l| message(l) == "record failed")
        .collect();
    assert_eq!(
        failures.len(),
        12 + 1 + 2 + 1 + 1,
        "mixed 12, conflict 1, fifo 2, oversized 1, CloudEvents 1"
    );
    for failure in &failures {
        assert!(
            failure["fields"]["sqs_message_id"].is_string()
                && failure["fields"]["reason"].is_string()
        );
    }
    // Audit text can carry personal data: it never reaches the logs.
    for text in [
        "user alice signed in",
        "order 42 refunded",
        "api key rotated",
        "local time",
    ] {
        assert!(!log.contains(text), "{text:?} was logged");
    }
}
