//! A real local AWS endpoint for the archiver's tests: moto's server on a free 127.0.0.1 port in a
//! process group of its own, stopped with SIGKILL to that group on drop (from code, never through
//! an external `kill`); the audit table with its stream, the archive bucket with Object Lock, the
//! receiver writing items, and the stream read back as Lambda would deliver it.
#![allow(dead_code)] // each test binary uses a different part of the harness

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use audit_archiver::bucket::s3::S3Bucket;
use audit_aws::dynamodb::{DynamoDbStore, Wire};
use audit_model::keys::{PARTITION_KEY, SORT_KEY};
use audit_receiver::{BatchSettings, Handler as Receiver, RetryPolicy};
use aws_lambda_events::sqs::{SqsEvent, SqsMessage};
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region, SharedCredentialsProvider};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
    StreamSpecification, StreamViewType,
};
use lambda_runtime::{Context, LambdaEvent};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};

pub const TABLE: &str = "AuditMessages";
pub const BUCKET: &str = "audit-archive-test";

/// moto's server, stopped with its whole process group on drop.
pub struct Moto {
    pub endpoint: String,
    port: u16,
    child: Child,
}

impl Drop for Moto {
    fn drop(&mut self) {
        // Our child is not reaped yet, so its pid (its group's id) cannot have been reused.
        let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

fn project_root() -> PathBuf {
    let package = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    package
        .ancestors()
        .find(|dir| dir.join("template.yaml").exists())
        .map(PathBuf::from)
        .unwrap_or(package)
}

impl Moto {
    /// Starts `moto_server` from `$MOTO_SERVER` or the repository's `.venv/bin/moto_server`.
    pub fn start() -> Self {
        let binary = std::env::var_os("MOTO_SERVER")
            .map(PathBuf::from)
            .unwrap_or_else(|| project_root().join(".venv/bin/moto_server"));
        assert!(
            binary.exists(),
            "moto_server not found at {}: run the tests with `make test` (it installs .venv)",
            binary.display()
        );
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let mut child = Command::new(&binary)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let started = Instant::now();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("moto_server exited with {status}");
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "moto_server did not listen"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Self {
            endpoint: format!("http://127.0.0.1:{port}"),
            port,
            child,
        }
    }

    pub fn dynamodb(&self) -> aws_sdk_dynamodb::Client {
        let config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .endpoint_url(&self.endpoint)
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("test", "test", None, None, "tests"))
            .build();
        aws_sdk_dynamodb::Client::from_conf(config)
    }

    /// The S3 client the archiver builds, for this endpoint.
    pub fn s3(&self) -> aws_sdk_s3::Client {
        let sdk = aws_config::SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .endpoint_url(&self.endpoint)
            .region(aws_config::Region::new("us-east-1"))
            .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
                "test", "test", None, None, "tests",
            )))
            .build();
        audit_aws::config::s3(
            &sdk,
            audit_aws::config::ClientOptions::bounded(audit_model::archive::OBJECT_WRITE_TIMEOUT),
        )
    }

    /// The KMS client the archiver builds, for this endpoint.
    pub fn kms(&self) -> aws_sdk_kms::Client {
        let sdk = aws_config::SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .endpoint_url(&self.endpoint)
            .region(aws_config::Region::new("us-east-1"))
            .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
                "test", "test", None, None, "tests",
            )))
            .build();
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
        let key = |name: &str, kind| {
            KeySchemaElement::builder()
                .attribute_name(name)
                .key_type(kind)
                .build()
                .expect("key")
        };
        let attribute = |name: &str| {
            AttributeDefinition::builder()
                .attribute_name(name)
                .attribute_type(ScalarAttributeType::S)
                .build()
                .expect("attribute")
        };
        self.dynamodb()
            .create_table()
            .table_name(TABLE)
            .billing_mode(BillingMode::PayPerRequest)
            .key_schema(key(PARTITION_KEY, KeyType::Hash))
            .key_schema(key(SORT_KEY, KeyType::Range))
            .attribute_definitions(attribute(PARTITION_KEY))
            .attribute_definitions(attribute(SORT_KEY))
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
        use aws_sdk_s3::types::{
            DefaultRetention, ObjectLockConfiguration, ObjectLockEnabled, ObjectLockRetentionMode,
            ObjectLockRule,
        };
        let s3 = self.s3();
        s3.create_bucket()
            .bucket(name)
            .object_lock_enabled_for_bucket(true)
            .send()
            .await
            .expect("create bucket");
        s3.put_object_lock_configuration()
            .bucket(name)
            .object_lock_configuration(
                ObjectLockConfiguration::builder()
                    .object_lock_enabled(ObjectLockEnabled::Enabled)
                    .rule(
                        ObjectLockRule::builder()
                            .default_retention(
                                DefaultRetention::builder()
                                    .mode(ObjectLockRetentionMode::Compliance)
                                    .days(1)
                                    .build(),
                            )
                            .build(),
                    )
                    .build(),
            )
            .send()
            .await
            .expect("object lock configuration");
    }

    /// Writes one audit message per body through the receiver, as its SQS trigger would.
    pub async fn write_messages(&self, bodies: &[Value]) {
        let credentials =
            SharedCredentialsProvider::new(Credentials::new("test", "test", None, None, "tests"));
        let wire = Wire::new(&self.endpoint, "us-east-1", credentials).expect("a local endpoint");
        let receiver = Receiver::new(
            DynamoDbStore::new(wire, TABLE),
            BatchSettings {
                max_concurrency: 8,
                deadline_margin: Duration::from_millis(500),
                retention_days: None,
                retry: RetryPolicy::default(),
                max_receive_count: 5,
            },
        );
        for (chunk_index, chunk) in bodies.chunks(10).enumerate() {
            let mut event = SqsEvent::default();
            event.records = chunk
                .iter()
                .enumerate()
                .map(|(i, body)| sqs_record(&format!("sqs-{chunk_index}-{i}"), body))
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

/// An SQS record as Lambda delivers it from the audit queue.
fn sqs_record(sqs_message_id: &str, body: &Value) -> SqsMessage {
    let mut record = SqsMessage::default();
    record.message_id = Some(sqs_message_id.to_owned());
    record.receipt_handle = Some(format!("AQEB-{sqs_message_id}"));
    record.body = Some(body.to_string());
    record.event_source = Some("aws:sqs".to_owned());
    record.event_source_arn = Some("arn:aws:sqs:us-east-1:123456789012:AuditQueue".to_owned());
    record.aws_region = Some("us-east-1".to_owned());
    record
        .attributes
        .insert("SentTimestamp".into(), "1795348800000".into());
    record
        .attributes
        .insert("ApproximateReceiveCount".into(), "1".into());
    record
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
