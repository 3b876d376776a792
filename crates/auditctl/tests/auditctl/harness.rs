//! Owns what every test of `auditctl` shares: running the binary with a clean AWS environment,
//! reading its output, a three-day trail written by the function, one request forwarded to moto,
//! the archive's S3 and digest key on moto (gzip objects, KMS signatures, the log's checkpoints).
//! Must not know what any one command is expected to print.

use std::io::Write as _;
use std::process::{Command, Output};
use std::str::FromStr;

use audit_archiver::budget::Budget;
use audit_archiver::seal::{SealReport, Sealer};
use audit_archiver::signer::kms::KmsSigner;
use audit_aws::s3::S3Bucket;
use audit_model::archive::PeriodLength;
use audit_model::note::{Checkpoint, NoteSignature, SignedNote, ecdsa_key_id, origin};
use audit_receiver::message::canonical_time;
use audit_testkit::endpoint::sdk_config;
use aws_sdk_kms::primitives::Blob;
use aws_sdk_kms::types::{KeySpec, KeyUsageType, MessageType, SigningAlgorithmSpec};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::ChecksumAlgorithm;
use chrono::{DateTime, Utc};
use flate2::Compression;
use flate2::write::GzEncoder;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::http::Request;
use crate::support::*;

/// A number beyond f64's precision: printed with every digit.
pub(crate) const BIG: &str = "1234567890123456789012345.5";

/// Runs auditctl against `endpoint` with a clean AWS environment. With no access queue in `env`
/// the run reads unrecorded on purpose (`--no-audit-event`), as a test of reading means to:
/// without one, auditctl refuses to read (`auditctl_as_given` runs it so).
pub(crate) fn auditctl(endpoint: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let unrecorded = !env.iter().any(|(name, _)| *name == "ACCESS_QUEUE_URL")
        && !args.contains(&"--no-audit-event");
    if unrecorded {
        let args: Vec<&str> = std::iter::once("--no-audit-event")
            .chain(args.iter().copied())
            .collect();
        return auditctl_as_given(endpoint, &args, env);
    }
    auditctl_as_given(endpoint, args, env)
}

/// As `auditctl`, with `args` exactly as given.
pub(crate) fn auditctl_as_given(endpoint: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_auditctl"));
    for name in [
        "AWS_PROFILE",
        "TABLE_NAME",
        "AUDIT_QUEUE_URL",
        "ACCESS_QUEUE_URL",
        "DEAD_LETTER_QUEUE_URL",
        "AWS_ENDPOINT_URL",
        "COLUMNS",
    ] {
        command.env_remove(name);
    }
    command
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_ENDPOINT_URL", endpoint)
        .args(args);
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("auditctl runs")
}

pub(crate) fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

pub(crate) fn ok(output: Output) -> String {
    assert!(
        output.status.success(),
        "auditctl failed: {:?}\n{}",
        output.status,
        stderr(&output)
    );
    stdout(&output)
}

/// `--format jsonl` output as JSON values.
pub(crate) fn jsonl(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

/// (auditTime, messageId) of each row.
pub(crate) fn keys(rows: &[Value]) -> Vec<(String, String)> {
    rows.iter()
        .map(|r| {
            (
                r["auditTime"].as_str().unwrap().to_owned(),
                r["messageId"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// A trail over three UTC days, written through the function's own handler in a shuffled
/// order: producer ids, equal times (also written with different offsets), and SQS ids.
/// Returns every (canonical auditTime, messageId), sorted.
pub(crate) async fn write_trail(moto: &Moto) -> Vec<(String, String)> {
    create_table(&moto.client(), TABLE).await;
    let handler = handler(&moto.endpoint, TABLE, settings());
    let mut messages: Vec<(String, String)> = Vec::new(); // (messageId, auditTime as sent)
    for day in 22..=24 {
        for i in 0..14u32 {
            let hour = (i * 5) % 24;
            // The same instant written with three offsets, so equal canonical times happen.
            let time = match i % 3 {
                0 => format!("2026-11-{day}T{hour:02}:30:00.250Z"),
                1 => format!("2026-11-{day}T{:02}:30:00.250+01:00", (hour + 1) % 24),
                _ => format!("2026-11-{day}T{hour:02}:00:00.250-00:30"),
            };
            messages.push((format!("m-{day}-{i:02}"), time));
        }
        // A run of equal times in one day, ids out of order.
        for id in ["tie-c", "tie-a", "tie-b", "tie-e", "tie-d"] {
            messages.push((
                format!("{id}-{day}"),
                format!("2026-11-{day}T12:00:00.000Z"),
            ));
        }
    }
    // Hour 24 wraps: those are dropped by parse (hour 00 of the next day would differ); keep the
    // set valid by skipping what does not parse.
    messages.retain(|(_, t)| chrono::DateTime::parse_from_rfc3339(t).is_ok());
    fastrand::seed(7);
    fastrand::shuffle(&mut messages);
    let mut expected = Vec::new();
    for chunk in messages.chunks(10) {
        let records = chunk
            .iter()
            .map(|(id, time)| {
                let body = serde_json::json!({"messageId": id, "auditTime": time, "auditText": format!("text of {id}"), "amount": serde_json::Number::from_str(BIG).unwrap()});
                record(&format!("sqs-{id}"), &body.to_string())
            })
            .collect();
        let response = handler.handle(event(records)).await.unwrap();
        assert!(failed(&response).is_empty());
        for (id, time) in chunk {
            let utc = chrono::DateTime::parse_from_rfc3339(time).unwrap().to_utc();
            expected.push((canonical_time(utc), id.clone()));
        }
    }
    expected.sort();
    expected
}

/// One request to moto on a connection of its own: the answer's status, content type and body.
pub(crate) async fn forward(
    upstream: &str,
    request: &Request,
    body: &[u8],
) -> (u16, String, Vec<u8>) {
    let mut head = format!("{} {} HTTP/1.1\r\n", request.method, request.path);
    for (name, value) in &request.headers {
        let name_lower = name.to_ascii_lowercase();
        if name_lower != "content-length" && name_lower != "connection" {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    let mut stream = tokio::net::TcpStream::connect(upstream).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let end = response.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&response[..end]).into_owned();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let content_type = head
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("content-type"))
        .map(|(_, value)| value.trim().to_owned())
        .unwrap_or_default();
    (status, content_type, response[end..].to_vec())
}

/// An access event of auditctl: its action is `auditctl.<command>`.
pub(crate) fn is_access_event(body: &str) -> bool {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|b| b["action"].as_str().map(|a| a.starts_with("auditctl.")))
        .unwrap_or(false)
}

/// moto's S3, path-style (the bucket in the path, as moto serves it).
pub(crate) fn s3(moto: &Moto) -> aws_sdk_s3::Client {
    let config = aws_sdk_s3::config::Builder::from(&sdk_config(&moto.endpoint))
        .force_path_style(true)
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

/// moto's KMS.
pub(crate) fn kms(moto: &Moto) -> aws_sdk_kms::Client {
    aws_sdk_kms::Client::new(&sdk_config(&moto.endpoint))
}

/// Puts `body` at `key` in `bucket` with its SHA-256 checksum (a new version where one exists).
pub(crate) async fn put_checked(s3: &aws_sdk_s3::Client, bucket: &str, key: &str, body: Vec<u8>) {
    s3.put_object()
        .bucket(bucket)
        .key(key)
        .checksum_algorithm(ChecksumAlgorithm::Sha256)
        .body(ByteStream::from(body))
        .send()
        .await
        .unwrap();
}

/// The body of the current version at `key` in `bucket`.
pub(crate) async fn get_body(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Vec<u8> {
    s3.get_object()
        .bucket(bucket)
        .key(key)
        .send()
        .await
        .unwrap()
        .body
        .collect()
        .await
        .unwrap()
        .to_vec()
}

/// One run of the archiver's own sealer over `bucket` at `now`, periods of `period`, its digests
/// and checkpoints signed by `key` in KMS; no deadline.
pub(crate) async fn seal_with_kms(
    bucket: &S3Bucket,
    kms: &aws_sdk_kms::Client,
    key: &str,
    period: PeriodLength,
    now: DateTime<Utc>,
) -> SealReport {
    let signer = KmsSigner::new(kms.clone(), key);
    Sealer {
        bucket,
        signer: &signer,
        bucket_name: bucket.name(),
        period,
    }
    .run(now, Budget::unlimited())
    .await
}

/// A digest key as the template makes it (ECC_NIST_P256, SIGN_VERIFY): its ARN.
pub(crate) async fn create_key(kms: &aws_sdk_kms::Client) -> String {
    kms.create_key()
        .key_spec(KeySpec::EccNistP256)
        .key_usage(KeyUsageType::SignVerify)
        .send()
        .await
        .unwrap()
        .key_metadata
        .unwrap()
        .arn
        .unwrap()
}

/// `key`'s public key, DER SPKI, from GetPublicKey.
pub(crate) async fn public_key(kms: &aws_sdk_kms::Client, key: &str) -> Vec<u8> {
    kms.get_public_key()
        .key_id(key)
        .send()
        .await
        .unwrap()
        .public_key
        .unwrap()
        .into_inner()
}

/// `message` signed by `key` with KMS Sign (RAW, ECDSA_SHA_256), DER.
pub(crate) async fn kms_sign(kms: &aws_sdk_kms::Client, key: &str, message: &[u8]) -> Vec<u8> {
    kms.sign()
        .key_id(key)
        .message(Blob::new(message))
        .message_type(MessageType::Raw)
        .signing_algorithm(SigningAlgorithmSpec::EcdsaSha256)
        .send()
        .await
        .unwrap()
        .signature
        .unwrap()
        .into_inner()
}

/// The checkpoint of the tree of `size` with `root`, signed by `key` (`der`: its public key) as
/// the log of `bucket`: the note's text.
pub(crate) async fn signed_checkpoint(
    kms: &aws_sdk_kms::Client,
    key: &str,
    der: &[u8],
    bucket: &str,
    size: u64,
    root: [u8; 32],
) -> String {
    let body = Checkpoint {
        origin: origin(bucket),
        size,
        root,
    }
    .body();
    let signature = kms_sign(kms, key, body.as_bytes()).await;
    SignedNote {
        body,
        signatures: vec![NoteSignature {
            name: origin(bucket),
            key_id: ecdsa_key_id(der),
            signature,
        }],
    }
    .text()
}

/// `lines` as an archive object's body: each line ended, gzipped.
pub(crate) fn gzip(lines: &[String]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    for line in lines {
        encoder.write_all(line.as_bytes()).unwrap();
        encoder.write_all(b"\n").unwrap();
    }
    encoder.finish().unwrap()
}
