//! Test harness: a real local AWS endpoint (moto's server) on a free 127.0.0.1 port, started per
//! test and stopped on drop, plus helpers to build SQS events and read the table back.
#![allow(dead_code)] // each test binary uses a different part of the harness

pub mod group;
pub mod http;
pub mod runtime_api;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use audit_aws::dynamodb::{DynamoDbStore, Wire};
use audit_model::keys::{
    AUDIT_BUCKET, LOOKUP_INDEXES, LOOKUP_PROJECTION, PARTITION_KEY, SORT_KEY, TIME_INDEX,
};
use audit_receiver::message::{AuditItem, AuditMessage, Delivery, parse_audit_time};
use audit_receiver::{BatchSettings, Handler, Redrivers, RetryPolicy};
use audit_testkit::endpoint::{credentials_provider, key, sdk_config, string_attribute};
use audit_testkit::moto::MotoServer;
use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent, SqsMessage, SqsMessageAttribute};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeValue, BillingMode, GlobalSecondaryIndex, KeyType, Projection, ProjectionType,
};
use aws_sdk_sqs::types::Message;
use lambda_runtime::{Context, LambdaEvent};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub const TABLE: &str = "AuditMessages";

pub type Item = HashMap<String, AttributeValue>;

pub use audit_testkit::moto::project_root;
#[allow(unused_imports)] // each test binary uses a different part of the harness
pub use audit_testkit::net::{free_port, wait_for_port};
#[allow(unused_imports)]
pub use audit_testkit::sqs::QUEUE_ARN;

/// moto's server (DynamoDB and SQS) on 127.0.0.1, its process group killed on drop: `start()`
/// runs `$MOTO_SERVER` (set by the Makefile) or `.venv/bin/moto_server`.
pub type Moto = MotoServer;

/// The test's view of the table on moto.
pub trait TableClient {
    /// A DynamoDB client for moto, configured like the function's ([`client`]).
    fn client(&self) -> Client;
}

impl TableClient for Moto {
    fn client(&self) -> Client {
        client(&self.endpoint)
    }
}

/// A DynamoDB client for a local endpoint, configured like the function's: no SDK retries.
pub fn client(endpoint: &str) -> Client {
    let config = aws_sdk_dynamodb::config::Builder::from(&sdk_config(endpoint))
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
    aws_sdk_sqs::Client::new(&sdk_config(endpoint))
}

/// The audit table with the key schema and the `byAuditTime` index the code uses.
pub async fn create_table(client: &Client, name: &str) {
    create_table_with(client, name, true).await;
}

/// The audit table as the template defines it, with or without the indexes (`byAuditTime` and
/// the lookup indexes; an older deployment lacks them).
pub async fn create_table_with(client: &Client, name: &str, time_index: bool) {
    let all: Vec<&str> = LOOKUP_INDEXES.iter().map(|l| l.name).collect();
    create_table_indexed(client, name, time_index, &all).await;
}

/// The audit table as template.yaml's LookupIndexes makes it: the time index (if `time_index`)
/// and only the lookup indexes named in `lookups` (`byActor`, `byAction`, `byResource`).
pub async fn create_table_indexed(client: &Client, name: &str, time_index: bool, lookups: &[&str]) {
    let mut request = client
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .key_schema(key(PARTITION_KEY, KeyType::Hash))
        .key_schema(key(SORT_KEY, KeyType::Range))
        .attribute_definitions(string_attribute(PARTITION_KEY))
        .attribute_definitions(string_attribute(SORT_KEY));
    if time_index {
        request = request
            .attribute_definitions(string_attribute(AUDIT_BUCKET))
            .global_secondary_indexes(
                GlobalSecondaryIndex::builder()
                    .index_name(TIME_INDEX)
                    .key_schema(key(AUDIT_BUCKET, KeyType::Hash))
                    .key_schema(key(SORT_KEY, KeyType::Range))
                    .projection(
                        Projection::builder()
                            .projection_type(ProjectionType::All)
                            .build(),
                    )
                    .build()
                    .expect("index"),
            );
        for lookup in LOOKUP_INDEXES.iter().filter(|l| lookups.contains(&l.name)) {
            let mut projection = Projection::builder().projection_type(ProjectionType::Include);
            for name in LOOKUP_PROJECTION {
                projection = projection.non_key_attributes(name);
            }
            request = request
                .attribute_definitions(string_attribute(lookup.key))
                .global_secondary_indexes(
                    GlobalSecondaryIndex::builder()
                        .index_name(lookup.name)
                        .key_schema(key(lookup.key, KeyType::Hash))
                        .key_schema(key(SORT_KEY, KeyType::Range))
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

/// The `SenderId` the local endpoint attests for every message these tests send (the caller's
/// user id for the tests' access key, as local/motoserver.py computes it): the tests' redrives are
/// sent as this principal, which `settings` names the redrive role.
pub const TEST_SENDER_ID: &str = "AKIAIOSFODNN7EXAMPLE";

/// Test settings: the production defaults with short backoffs; the tests' own sender (moto's
/// constant) is the redrive role.
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
        access_queue_arn: None,
        redrivers: Redrivers::new([TEST_SENDER_ID.to_owned()]),
    }
}

pub fn handler(endpoint: &str, table: &str, settings: BatchSettings) -> Handler<DynamoDbStore> {
    Handler::new(store(endpoint, table), settings)
}

/// The function's DynamoDB adapter for a local endpoint, with the same credentials and region as
/// `client` (moto keeps tables per account and region).
pub fn store(endpoint: &str, table: &str) -> DynamoDbStore {
    let wire = Wire::new(endpoint, "us-east-1", credentials_provider()).expect("a local endpoint");
    DynamoDbStore::new(wire, table)
}

/// An SQS record as Lambda delivers it from a standard queue.
pub fn record(sqs_message_id: &str, body: &str) -> SqsMessage {
    audit_testkit::sqs::record(sqs_message_id, body)
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
    "cloudtrail-batch.json",
];

pub fn events_dir() -> PathBuf {
    project_root().join("events")
}

/// Every message of a queue, with all its attributes; each is received once (the visibility
/// timeout outlasts the test).
pub async fn receive_all(sqs: &aws_sdk_sqs::Client, url: &str) -> Vec<Message> {
    let mut all = Vec::new();
    loop {
        let messages = audit_testkit::endpoint::receive(sqs, url, 600).await;
        if messages.is_empty() {
            return all;
        }
        all.extend(messages);
    }
}

/// A received message's String attribute `name`.
pub fn attribute(message: &Message, name: &str) -> Option<String> {
    message
        .message_attributes()
        .and_then(|a| a.get(name))
        .and_then(|v| v.string_value().map(str::to_owned))
}

/// A String message attribute of a record, as SQS delivers it to Lambda.
pub fn message_attribute(value: &str) -> SqsMessageAttribute {
    let mut a = SqsMessageAttribute::default();
    a.data_type = Some("String".into());
    a.string_value = Some(value.into());
    a
}

/// Sends `request` to moto as it came, on a connection of its own, and reads the whole answer
/// (Content-Length bodies).
pub async fn relay(
    request: &http::Request,
    host: &str,
) -> Option<(u16, Vec<(String, String)>, Vec<u8>)> {
    let mut moto = TcpStream::connect(host).await.ok()?;
    let mut head = format!("{} {} HTTP/1.1\r\n", request.method, request.path);
    for (name, value) in &request.headers {
        if name.eq_ignore_ascii_case("host") {
            // Signed with the proxy's host: moto does not check signatures.
            head.push_str(&format!("Host: {host}\r\n"));
        } else if !name.eq_ignore_ascii_case("connection") {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    head.push_str("Connection: close\r\n\r\n");
    moto.write_all(head.as_bytes()).await.ok()?;
    moto.write_all(&request.body).await.ok()?;

    let mut buffer = Vec::new();
    let mut chunk = [0u8; 16384];
    let end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = moto.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let text = String::from_utf8_lossy(&buffer[..end]).into_owned();
    let mut lines = text.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .filter(|(n, _)| {
            !n.eq_ignore_ascii_case("content-length") && !n.eq_ignore_ascii_case("connection")
        })
        .collect();
    let length: usize = text
        .split("\r\n")
        .filter_map(|l| l.split_once(':'))
        .find(|(n, _)| n.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0);
    while buffer.len() < end + length {
        let n = moto.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    Some((status, headers, buffer[end..end + length].to_vec()))
}

/// Writes `answer` (from `relay`) back on `socket` as it came; `Err` when the peer has gone.
pub async fn send_back(
    socket: &mut TcpStream,
    answer: (u16, Vec<(String, String)>, Vec<u8>),
) -> std::io::Result<()> {
    let (status, headers, body) = answer;
    let headers: Vec<(&str, &str)> = headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    http::write_response(socket, status, &headers, &body).await
}

/// The item the function writes for `body`, delivered once as SQS message `sqs_message_id` and
/// received at 10:00:01.
pub fn audit_item(body: &str, sqs_message_id: &str) -> AuditItem {
    let message = AuditMessage::parse(Some(body), None).unwrap();
    let delivery = Delivery {
        sqs_message_id: sqs_message_id.into(),
        original_message_id: sqs_message_id.into(),
        sent_at: None,
        receive_count: Some(1),
        event_source: Some(QUEUE_ARN.into()),
        sender_id: None,
        original_sender_id: None,
    };
    AuditItem::new(
        message,
        delivery,
        parse_audit_time("2026-11-22T10:00:01Z").unwrap(),
        None,
    )
}
