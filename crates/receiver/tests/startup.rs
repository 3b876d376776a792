//! The function's start-up check against moto: a `TABLE_NAME` that names a table keyed otherwise
//! than the function writes (another application's table, an old one) is refused at start-up,
//! naming both keys, instead of sending every record to the dead-letter queue; the stack's table
//! passes.

mod support;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use audit_aws::dynamodb::StartupError;
use audit_testkit::endpoint::{key, string_attribute};
use aws_sdk_dynamodb::types::{BillingMode, KeyType};
use support::runtime_api::RuntimeApi;
use support::*;

const WRONG: &str = "OtherApplication";
const WHY: &str = "table OtherApplication has key schema id (HASH, S) but the function writes \
                   messageId (HASH, S) + auditTime (RANGE, S): point TABLE_NAME at the stack's \
                   AuditMessagesTable";

/// Another application's table: keyed by `id` alone.
async fn create_wrong_table(client: &aws_sdk_dynamodb::Client) {
    client
        .create_table()
        .table_name(WRONG)
        .billing_mode(BillingMode::PayPerRequest)
        .key_schema(key("id", KeyType::Hash))
        .attribute_definitions(string_attribute("id"))
        .send()
        .await
        .expect("create table");
}

#[tokio::test]
async fn the_start_up_check_names_a_table_keyed_otherwise_and_passes_the_stacks() {
    let moto = Moto::start();
    let client = moto.client();
    create_table(&client, TABLE).await;
    create_wrong_table(&client).await;

    let wrong = store(&moto.endpoint, WRONG)
        .warm_up(2, Duration::from_secs(5))
        .await;
    assert_eq!(wrong, Err(StartupError::WrongTable(WHY.into())));

    let right = store(&moto.endpoint, TABLE)
        .warm_up(2, Duration::from_secs(5))
        .await;
    assert_eq!(right, Ok(2));
}

/// The function binary, started as Lambda starts it, against moto and a Runtime API stand-in.
fn function(api: &RuntimeApi, moto: &Moto, table: &str) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_audit-receiver"))
        .env_clear()
        .env("AWS_LAMBDA_RUNTIME_API", api.address())
        .env("AWS_LAMBDA_FUNCTION_NAME", "audit-receiver")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_ENDPOINT_URL", &moto.endpoint)
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env("TABLE_NAME", table)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the function binary")
}

#[tokio::test]
async fn the_function_refuses_to_start_on_a_table_keyed_otherwise() {
    // Given moto with another application's table, and TABLE_NAME naming it.
    let moto = Moto::start();
    create_wrong_table(&moto.client()).await;
    let mut api = RuntimeApi::start(Duration::from_secs(30));

    // When the function starts.
    let mut child = function(&api, &moto, WRONG);

    // Then it exits during init (Lambda reports an init failure), having logged why, and never
    // asks for an invocation. The verdict waits on the process, however slow the machine: its
    // exit, or its asking for an invocation (it started). A function that does neither is a
    // hang, which the test runner's time limit for this group ends (.config/nextest.toml).
    let status = loop {
        if let Some(status) = child.try_wait().expect("the function's status") {
            break status;
        }
        // Err: no request yet, or its init error (it exits next).
        if api.first_next(Duration::from_millis(50)).is_ok() {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the function started on a table keyed otherwise: it asked for an invocation");
        }
    };
    let mut output = String::new();
    for stream in [
        child.stdout.take().map(|s| Box::new(s) as Box<dyn Read>),
        child.stderr.take().map(|s| Box::new(s) as Box<dyn Read>),
    ]
    .into_iter()
    .flatten()
    {
        let mut stream = stream;
        stream
            .read_to_string(&mut output)
            .expect("the function's output");
    }
    assert!(!status.success(), "{status}: {output}");
    assert!(output.contains(WHY), "{output}");
}

#[tokio::test]
async fn the_function_starts_on_the_stacks_table() {
    let moto = Moto::start();
    create_table(&moto.client(), TABLE).await;
    let mut api = RuntimeApi::start(Duration::from_secs(30));

    let mut child = function(&api, &moto, TABLE);
    let next = api.first_next(Duration::from_secs(60));
    let _ = child.kill();
    let _ = child.wait();

    assert!(next.is_ok(), "{next:?}");
}
