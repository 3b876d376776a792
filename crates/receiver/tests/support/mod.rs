//! Test harness: a real local AWS endpoint (moto's server) on a free 127.0.0.1 port, started per
//! test and stopped on drop, plus helpers to build SQS events and read the table back.
#![allow(dead_code)] // each test binary uses a different part of the harness

pub mod group;
pub mod http;
pub mod runtime_api;

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use audit_aws::dynamodb::{DynamoDbStore, Wire};
use audit_model::keys::{
    AUDIT_BUCKET, LOOKUP_INDEXES, LOOKUP_PROJECTION, PARTITION_KEY, SORT_KEY, TIME_INDEX,
};
use audit_receiver::{BatchSettings, Handler, RetryPolicy};
use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region, SharedCredentialsProvider};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, GlobalSecondaryIndex, KeySchemaElement,
    KeyType, Projection, ProjectionType, ScalarAttributeType,
};
use lambda_runtime::{Context, LambdaEvent};

pub const TABLE: &str = "AuditMessages";
pub const QUEUE_ARN: &str = "arn:aws:sqs:us-east-1:123456789012:AuditQueue";

pub type Item = HashMap<String, AttributeValue>;

/// The repository's root: the workspace's, two levels above this package (crates/NAME).
pub fn project_root() -> PathBuf {
    let package = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    package
        .ancestors()
        .find(|dir| dir.join("template.yaml").exists())
        .map(PathBuf::from)
        .unwrap_or(package)
}

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free port on 127.0.0.1")
}

/// Waits until something accepts connections on `port`.
pub fn wait_for_port(port: u16, within: Duration, child: &mut Child, what: &str) {
    let started = Instant::now();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited with {status} before listening on {port}");
        }
        assert!(
            started.elapsed() < within,
            "{what} did not listen on port {port} within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A child process killed when the guard drops, also when the test panics.
pub struct Process(pub Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// moto's server (DynamoDB and SQS) on 127.0.0.1.
pub struct Moto {
    pub endpoint: String,
    _process: Process,
}

impl Moto {
    /// Starts `moto_server` from `$MOTO_SERVER` (set by the Makefile) or `.venv/bin/moto_server`.
    pub fn start() -> Self {
        let binary = std::env::var_os("MOTO_SERVER")
            .map(PathBuf::from)
            .unwrap_or_else(|| project_root().join(".venv/bin/moto_server"));
        assert!(
            binary.exists(),
            "moto_server not found at {}: run the tests with `make test` (it installs .venv)",
            binary.display()
        );
        let port = free_port();
        let child = Command::new(&binary)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let mut process = Process(child);
        wait_for_port(port, Duration::from_secs(60), &mut process.0, "moto_server");
        Self {
            endpoint: format!("http://127.0.0.1:{port}"),
            _process: process,
        }
    }

    pub fn client(&self) -> Client {
        client(&self.endpoint)
    }
}

/// A DynamoDB client for a local endpoint, configured like the function's: no SDK retries.
pub fn client(endpoint: &str) -> Client {
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "tests"))
        .retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::disabled())
        .timeout_config(
            aws_sdk_dynamodb::config::timeout::TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(1))
                .build(),
        )
        .build();
    Client::from_conf(config)
}

/// An SQS client for a local endpoint.
pub fn sqs_client(endpoint: &str) -> aws_sdk_sqs::Client {
    let config = aws_sdk_sqs::Config::builder()
        .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(aws_sdk_sqs::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_sqs::config::Credentials::new(
            "test", "test", None, None, "tests",
        ))
        .build();
    aws_sdk_sqs::Client::from_conf(config)
}

/// The audit table with the key schema and the `byAuditTime` index the code uses.
pub async fn create_table(client: &Client, name: &str) {
    create_table_with(client, name, true).await;
}

/// The audit table as the template defines it, with or without the indexes (`byAuditTime` and
/// the lookup indexes; an older deployment lacks them).
pub async fn create_table_with(client: &Client, name: &str, time_index: bool) {
    let key = |name: &str, kind| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(kind)
            .build()
    };
    let attribute = |name: &str| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
    };
    let mut request = client
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .key_schema(key(PARTITION_KEY, KeyType::Hash).expect("key"))
        .key_schema(key(SORT_KEY, KeyType::Range).expect("key"))
        .attribute_definitions(attribute(PARTITION_KEY).expect("attribute"))
        .attribute_definitions(attribute(SORT_KEY).expect("attribute"));
    if time_index {
        request = request
            .attribute_definitions(attribute(AUDIT_BUCKET).expect("attribute"))
            .global_secondary_indexes(
                GlobalSecondaryIndex::builder()
                    .index_name(TIME_INDEX)
                    .key_schema(key(AUDIT_BUCKET, KeyType::Hash).expect("key"))
                    .key_schema(key(SORT_KEY, KeyType::Range).expect("key"))
                    .projection(
                        Projection::builder()
                            .projection_type(ProjectionType::All)
                            .build(),
                    )
                    .build()
                    .expect("index"),
            );
        for lookup in LOOKUP_INDEXES {
            let mut projection = Projection::builder().projection_type(ProjectionType::Include);
            for name in LOOKUP_PROJECTION {
                projection = projection.non_key_attributes(name);
            }
            request = request
                .attribute_definitions(attribute(lookup.key).expect("attribute"))
                .global_secondary_indexes(
                    GlobalSecondaryIndex::builder()
                        .index_name(lookup.name)
                        .key_schema(key(lookup.key, KeyType::Hash).expect("key"))
                        .key_schema(key(SORT_KEY, KeyType::Range).expect("key"))
                        .projection(projection.build())
                        .build()
                        .expect("index"),
                );
        }
    }
    request.send().await.expect("create table");
}

/// Every item in the table, sorted by key.
pub async fn scan(client: &Client, table: &str) -> Vec<Item> {
    let mut items = Vec::new();
    let mut start: Option<Item> = None;
    loop {
        let page = client
            .scan()
            .table_name(table)
            .set_exclusive_start_key(start.take())
            .send()
            .await
            .expect("scan");
        items.extend(page.items().iter().cloned());
        match page.last_evaluated_key() {
            Some(key) if !key.is_empty() => start = Some(key.clone()),
            _ => break,
        }
    }
    items.sort_by_key(|item| (s(item, PARTITION_KEY), s(item, SORT_KEY)));
    items
}

/// A string attribute, or "" when absent.
pub fn s(item: &Item, name: &str) -> String {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .cloned()
        .unwrap_or_default()
}

/// Test settings: the production defaults with short backoffs.
pub fn settings() -> BatchSettings {
    BatchSettings {
        max_concurrency: 32,
        deadline_margin: Duration::from_millis(500),
        retention_days: None,
        retry: RetryPolicy {
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(50),
            ..RetryPolicy::default()
        },
        max_receive_count: 5,
    }
}

pub fn handler(endpoint: &str, table: &str, settings: BatchSettings) -> Handler<DynamoDbStore> {
    Handler::new(store(endpoint, table), settings)
}

/// The function's DynamoDB adapter for a local endpoint, with the same credentials and region as
/// `client` (moto keeps tables per account and region).
pub fn store(endpoint: &str, table: &str) -> DynamoDbStore {
    let credentials =
        SharedCredentialsProvider::new(Credentials::new("test", "test", None, None, "tests"));
    let wire = Wire::new(endpoint, "us-east-1", credentials).expect("a local endpoint");
    DynamoDbStore::new(wire, table)
}

/// An SQS record as Lambda delivers it from a standard queue.
pub fn record(sqs_message_id: &str, body: &str) -> SqsMessage {
    let mut record = SqsMessage::default();
    record.message_id = Some(sqs_message_id.to_owned());
    record.receipt_handle = Some(format!("AQEB-{sqs_message_id}"));
    record.body = Some(body.to_owned());
    record.event_source = Some("aws:sqs".to_owned());
    record.event_source_arn = Some(QUEUE_ARN.to_owned());
    record.aws_region = Some("us-east-1".to_owned());
    record
        .attributes
        .insert("SentTimestamp".into(), "1795348800000".into());
    record
        .attributes
        .insert("ApproximateReceiveCount".into(), "1".into());
    record
}

pub fn event(records: Vec<SqsMessage>) -> LambdaEvent<SqsEvent> {
    let mut event = SqsEvent::default();
    event.records = records;
    LambdaEvent::new(event, Context::default())
}

/// An event file from `events/`.
pub fn event_file(name: &str) -> LambdaEvent<SqsEvent> {
    let path = project_root().join("events").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let event: SqsEvent =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    LambdaEvent::new(event, Context::default())
}

/// The response the README documents for an event file, from `events/expected/`.
pub fn expected_response(name: &str) -> serde_json::Value {
    let path = project_root().join("events/expected").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The failed SQS message ids of a response, in order.
pub fn failed(response: &SqsBatchResponse) -> Vec<String> {
    response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect()
}

/// Every file in `events/`, in an order where each repeat follows its original.
pub const EVENT_FILES: &[&str] = &[
    "clean-batch.json",
    "redelivery.json",
    "mixed-batch.json",
    "producer-message-id.json",
    "conflicting-payload.json",
    "extra-fields.json",
    "fifo-two-groups.json",
    "empty-batch.json",
    "oversized-item.json",
    "cloudevents-batch.json",
    "eventbridge-batch.json",
];

pub fn events_dir() -> PathBuf {
    project_root().join("events")
}
