//! A real local AWS endpoint for the archiver's tests: moto's server on a free 127.0.0.1 port in a
//! process group of its own, stopped with SIGKILL to that group on drop (from code, never through
//! an external `kill`); the audit table with its stream, the archive bucket with Object Lock, the
//! receiver writing items, and the stream read back as Lambda would deliver it.
#![allow(dead_code)] // each test binary uses a different part of the harness

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use audit_aws::dynamodb::{DynamoDbStore, Wire};
use audit_aws::s3::S3Bucket;
use audit_model::keys::{PARTITION_KEY, SORT_KEY};
use audit_receiver::attest::Attester;
use audit_receiver::{BatchSettings, Handler as Receiver, RetryPolicy};
use audit_testkit::endpoint::{
    create_locked_bucket, credentials_provider, key, sdk_config, string_attribute,
};
use audit_testkit::moto::MotoServer;
use audit_testkit::sqs::record;
use aws_lambda_events::sqs::SqsEvent;
use aws_sdk_dynamodb::types::{BillingMode, KeyType, StreamSpecification, StreamViewType};
use lambda_runtime::{Context, LambdaEvent};
use serde_json::{Value, json};

pub const TABLE: &str = "AuditMessages";
pub const BUCKET: &str = "audit-archive-test";
/// The SQS `SenderId` of every message `write_messages` writes: a producer's role session.
pub const SENDER: &str = "AROAPRODUCER:orders-service";

/// moto's server, stopped with its whole process group on drop.
pub struct Moto {
    pub endpoint: String,
    port: u16,
    _server: MotoServer,
}

impl Moto {
    /// Starts `moto_server` from `$MOTO_SERVER` or the repository's `.venv/bin/moto_server`.
    pub fn start() -> Self {
        let server = MotoServer::start();
        Self {
            endpoint: server.endpoint.clone(),
            port: server.port,
            _server: server,
        }
    }

    pub fn dynamodb(&self) -> aws_sdk_dynamodb::Client {
        aws_sdk_dynamodb::Client::new(&sdk_config(&self.endpoint))
    }

    /// The S3 client the archiver builds, for this endpoint.
    pub fn s3(&self) -> aws_sdk_s3::Client {
        let sdk = sdk_config(&self.endpoint);
        audit_aws::config::s3(
            &sdk,
            audit_aws::config::ClientOptions::bounded(audit_model::archive::OBJECT_WRITE_TIMEOUT),
        )
    }

    /// The KMS client the archiver builds, for this endpoint.
    pub fn kms(&self) -> aws_sdk_kms::Client {
        let sdk = sdk_config(&self.endpoint);
        audit_aws::config::kms(
            &sdk,
            audit_aws::config::ClientOptions::bounded(audit_model::archive::OBJECT_WRITE_TIMEOUT),
        )
    }

    /// A digest key as the template defines it (ECC_NIST_P256, SIGN_VERIFY); its ARN.
    pub async fn create_digest_key(&self) -> String {
        self.kms()
            .create_key()
            .key_spec(aws_sdk_kms::types::KeySpec::EccNistP256)
            .key_usage(aws_sdk_kms::types::KeyUsageType::SignVerify)
            .description("audit digest key (tests)")
            .send()
            .await
            .expect("create key")
            .key_metadata
            .and_then(|m| m.arn)
            .expect("the key's ARN")
    }

    /// The archiver's bucket adapter on `bucket`.
    pub fn archive(&self, bucket: &str) -> S3Bucket {
        S3Bucket::new(self.s3(), bucket)
    }

    /// The audit table as the template defines its key and stream (new and old images).
    pub async fn create_table(&self) {
        self.dynamodb()
            .create_table()
            .table_name(TABLE)
            .billing_mode(BillingMode::PayPerRequest)
            .key_schema(key(PARTITION_KEY, KeyType::Hash))
            .key_schema(key(SORT_KEY, KeyType::Range))
            .attribute_definitions(string_attribute(PARTITION_KEY))
            .attribute_definitions(string_attribute(SORT_KEY))
            .stream_specification(
                StreamSpecification::builder()
                    .stream_enabled(true)
                    .stream_view_type(StreamViewType::NewAndOldImages)
                    .build()
                    .expect("stream"),
            )
            .send()
            .await
            .expect("create table");
    }

    /// The archive bucket as the template defines it: versioning and Object Lock with a default
    /// COMPLIANCE retention.
    pub async fn create_bucket(&self, name: &str) {
        create_locked_bucket(&self.s3(), name).await;
    }

    /// Writes one audit message per body through the receiver, as its SQS trigger would, each
    /// sent by `SENDER`.
    pub async fn write_messages(&self, bodies: &[Value]) {
        self.write_messages_attested(bodies, None).await
    }

    /// `write_messages` by a receiver that attests each item with `attester` when given.
    pub async fn write_messages_attested(&self, bodies: &[Value], attester: Option<Attester>) {
        let wire = Wire::new(&self.endpoint, "us-east-1", credentials_provider())
            .expect("a local endpoint");
        let mut receiver = Receiver::new(
            DynamoDbStore::new(wire, TABLE),
            BatchSettings {
                max_concurrency: 8,
                deadline_margin: Duration::from_millis(500),
                retention_days: None,
                retry: RetryPolicy::default(),
                max_receive_count: 5,
                access_queue_arn: None,
                redrivers: Default::default(),
            },
        );
        if let Some(attester) = attester {
            receiver = receiver.with_attester(attester);
        }
        for (chunk_index, chunk) in bodies.chunks(10).enumerate() {
            let mut event = SqsEvent::default();
            event.records = chunk
                .iter()
                .enumerate()
                .map(|(i, body)| {
                    let mut record = record(&format!("sqs-{chunk_index}-{i}"), &body.to_string());
                    record.attributes.insert("SenderId".into(), SENDER.into());
                    record
                })
                .collect();
            let response = receiver
                .handle(LambdaEvent::new(event, Context::default()))
                .await
                .expect("the receiver answers");
            assert!(
                response.batch_item_failures.is_empty(),
                "the receiver failed records: {response:?}"
            );
        }
    }

    /// Every record of the table's stream from its start, as Lambda delivers them (GetRecords'
    /// records with `eventSourceARN` added).
    pub fn stream_records(&self) -> Vec<Value> {
        let table = self.call(
            "DynamoDB_20120810.DescribeTable",
            json!({"TableName": TABLE}),
        );
        let arn = table["Table"]["LatestStreamArn"]
            .as_str()
            .expect("the table has a stream")
            .to_owned();
        let stream = self.call(
            "DynamoDBStreams_20120810.DescribeStream",
            json!({"StreamArn": arn}),
        );
        let mut records = Vec::new();
        for shard in stream["StreamDescription"]["Shards"]
            .as_array()
            .expect("shards")
        {
            let mut iterator = self.call(
                "DynamoDBStreams_20120810.GetShardIterator",
                json!({"StreamArn": arn, "ShardId": shard["ShardId"], "ShardIteratorType": "TRIM_HORIZON"}),
            )["ShardIterator"]
                .clone();
            loop {
                let page = self.call(
                    "DynamoDBStreams_20120810.GetRecords",
                    json!({"ShardIterator": iterator}),
                );
                let batch = page["Records"].as_array().cloned().unwrap_or_default();
                if batch.is_empty() {
                    break;
                }
                for mut record in batch {
                    record["eventSourceARN"] = json!(arn);
                    records.push(record);
                }
                iterator = page["NextShardIterator"].clone();
            }
        }
        records
    }

    /// One JSON-protocol request (DynamoDB, DynamoDB Streams), answered as JSON. moto does not
    /// check signatures; it routes by the Authorization header's service and the target.
    fn call(&self, target: &str, body: Value) -> Value {
        let body = body.to_string();
        let request = format!(
            "POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/x-amz-json-1.0\r\n\
             X-Amz-Target: {target}\r\nAuthorization: AWS4-HMAC-SHA256 \
             Credential=test/20261122/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0\r\n\
             Content-Length: {len}\r\nConnection: close\r\n\r\n{body}",
            port = self.port,
            len = body.len()
        );
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect to moto");
        stream.write_all(request.as_bytes()).expect("send");
        let mut response = Vec::new();
        stream.read_to_end(&mut response).expect("read");
        let text = String::from_utf8(response).expect("UTF-8");
        let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
        assert!(head.starts_with("HTTP/1.1 200"), "{target}: {head}\n{body}");
        let body = if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            unchunk(body)
        } else {
            body.to_owned()
        };
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{target}: {e}: {body}"))
    }
}

/// A chunked HTTP/1.1 body, joined.
fn unchunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// Every object under `prefix` of `bucket`, in key order, with its body.
pub async fn objects(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    prefix: &str,
) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut token = None;
    loop {
        let page = s3
            .list_objects_v2()
            .bucket(bucket)
            .prefix(prefix)
            .set_continuation_token(token.take())
            .send()
            .await
            .expect("list");
        for object in page.contents() {
            let key = object.key().unwrap_or_default().to_owned();
            let body = s3
                .get_object()
                .bucket(bucket)
                .key(&key)
                .send()
                .await
                .expect("get")
                .body
                .collect()
                .await
                .expect("body")
                .to_vec();
            out.push((key, body));
        }
        match page.next_continuation_token() {
            Some(next) => token = Some(next.to_owned()),
            None => break,
        }
    }
    out
}
