//! Owns the synthetic archive: where each object goes (the plan), its items, the objects as
//! the archiver writes them, and the sealer's run over them. Must not know what is measured.

use super::*;

/// Where each object goes: its index, events and the time it is written.
#[derive(Debug, Clone)]
pub(crate) struct Planned {
    index: u64,
    first_event: u64,
    pub(crate) events: u64,
    pub(crate) written_at: DateTime<Utc>,
}

/// The archive's layout for `events`: objects in order, `objects_per_period` to a period (every
/// tenth period empty), each written at its slot inside its period.
pub(crate) struct Plan {
    pub(crate) objects: Vec<Planned>,
    /// Periods from the first to the last non-empty one.
    pub(crate) periods: u64,
}

impl Plan {
    pub(crate) fn new(events: u64, options: &Options) -> Self {
        let length = i64::from(options.period.seconds());
        let slot = length
            / i64::try_from(options.objects_per_period)
                .unwrap_or(1)
                .max(1);
        let mut objects = Vec::new();
        let (mut period, mut in_period, mut first_event) = (0u64, 0u64, 0u64);
        while first_event < events {
            if period % EMPTY_EVERY == EMPTY_AT || in_period == options.objects_per_period {
                period += 1;
                in_period = 0;
                continue;
            }
            let start = FIRST_PERIOD + i64::try_from(period).unwrap_or(0) * length;
            let offset = (i64::try_from(in_period).unwrap_or(0) * slot + 1).min(length - 1);
            let count = options.per_object.min(events - first_event);
            objects.push(Planned {
                index: objects.len() as u64,
                first_event,
                events: count,
                written_at: DateTime::from_timestamp(start + offset, 0).expect("a time"),
            });
            first_event += count;
            in_period += 1;
        }
        Self {
            objects,
            periods: period + 1,
        }
    }

    pub(crate) fn end(&self, period: PeriodLength) -> i64 {
        FIRST_PERIOD + i64::try_from(self.periods).unwrap_or(0) * i64::from(period.seconds())
    }
}

/// One event's item as the receiver writes it, in DynamoDB's JSON, for event `i` of an object
/// written at `at`: distinct ids and times, text and fields of varied length.
fn item(i: u64, at: DateTime<Utc>, rng: &mut fastrand::Rng) -> Map<String, Value> {
    let uuid = |rng: &mut fastrand::Rng| {
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            rng.u32(..),
            rng.u16(..),
            rng.u16(..0x1000),
            rng.u16(..),
            rng.u64(..1 << 48)
        )
    };
    // The producer's time a few seconds before the write; received just before the write.
    let audit_time = at - chrono::Duration::milliseconds(rng.i64(1_000..30_000));
    let received = at - chrono::Duration::milliseconds(rng.i64(50..900));
    let time = |t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Millis, true);
    let actor = format!("user-{}", rng.u32(..500));
    let action = [
        "invoice.read",
        "invoice.update",
        "user.login",
        "report.export",
        "payment.refund",
    ][rng.usize(..5)];
    let resource = format!("invoice/{}", rng.u32(..100_000));
    let outcome = ["success", "success", "success", "failure", "denied"][rng.usize(..5)];
    let detail = [
        "",
        " from the billing console",
        " through the public API with a service token",
        " after a step-up authentication (second factor confirmed by the user's registered device)",
    ][rng.usize(..4)];
    let value = json!({
        "messageId": {"S": uuid(rng)},
        "auditTime": {"S": time(audit_time)},
        "auditBucket": {"S": format!("{}#{:02}", &time(audit_time)[..10], rng.u32(..32))},
        "auditText": {"S": format!("{actor} performed {action} on {resource}{detail} (event {i})")},
        "actor": {"S": actor},
        "actorKey": {"S": format!("{actor}#{}", rng.u32(..4))},
        "action": {"S": action},
        "actionKey": {"S": format!("{action}#{}", rng.u32(..4))},
        "resource": {"S": resource},
        "resourceKey": {"S": format!("{resource}#{}", rng.u32(..4))},
        "outcome": {"S": outcome},
        "sourceIp": {"S": format!("10.{}.{}.{}", rng.u8(..), rng.u8(..), rng.u8(..))},
        "receiveCount": {"N": "1"},
        "sqsMessageId": {"S": uuid(rng)},
        "sentAt": {"S": time(received - chrono::Duration::milliseconds(20))},
        "receivedAt": {"S": time(received)},
        "extra": {"M": {"amount": {"N": format!("{}.{:02}", rng.u32(..10_000), rng.u32(..100))},
                        "currency": {"S": "EUR"}}}
    });
    value.as_object().cloned().unwrap_or_default()
}

/// The receiver's run as it attests what it writes (docs/archive.md "Items attested at birth"):
/// its run key and the certificate KMS (moto's attestation key) signed of it; a batch of at most
/// `ATTESTED_BATCH` items under one signature, as the receiver's SQS batches.
pub(crate) struct Attesting {
    run: aws_lc_rs::signature::Ed25519KeyPair,
    certificate: String,
}

/// The receiver's batch: SQS gives it at most 10 records.
const ATTESTED_BATCH: usize = 10;

impl Attesting {
    /// A run key certified by the KMS key `key_arn` on moto.
    pub(crate) async fn new(moto: &Moto, key_arn: &str) -> Self {
        use audit_model::attest::Certificate;
        use aws_lc_rs::signature::KeyPair as _;
        let run = aws_lc_rs::signature::Ed25519KeyPair::generate().expect("a run key");
        let public_key: [u8; 32] = run.public_key().as_ref().try_into().expect("32 bytes");
        let issued_at_ms = u64::try_from(Utc::now().timestamp_millis()).unwrap_or(0);
        let signature = audit_aws::kms::KmsKey::new(moto.kms(), key_arn)
            .sign(&Certificate::statement(&public_key, issued_at_ms))
            .await
            .expect("KMS signs the certificate");
        let certificate = Certificate {
            public_key,
            issued_at_ms,
            signature,
        }
        .encode();
        Self { run, certificate }
    }

    /// The items, each with its `attestation`, batch by batch.
    fn attest(&self, items: &mut [Map<String, Value>]) {
        use audit_model::attest::{
            ATTESTATION, attestation_text, batch_message, batch_tree, item_leaf, signature_text,
        };
        for batch in items.chunks_mut(ATTESTED_BATCH) {
            let lines: Vec<Map<String, Value>> = batch
                .iter()
                .map(|item| serde_json::from_str(&trail_line(item)).expect("a line"))
                .collect();
            let leaves: Vec<_> = lines.iter().map(item_leaf).collect();
            let (root, paths) = batch_tree(&leaves).expect("a batch's tree");
            let size = batch.len() as u64;
            let signature = signature_text(self.run.sign(&batch_message(&root, size)).as_ref());
            for (index, (item, path)) in batch.iter_mut().zip(paths).enumerate() {
                let text =
                    attestation_text(&self.certificate, &signature, index as u64, size, &path);
                item.insert(ATTESTATION.into(), json!({ "S": text }));
            }
        }
    }
}

/// One object's bytes, its key and request, as the archiver makes them, the run marker that
/// attests it (written first, as the archiver does); and its raw line bytes. With `attesting`,
/// each item carries the receiver's attestation.
fn encode(
    planned: &Planned,
    period: PeriodLength,
    attesting: Option<&Attesting>,
) -> (audit_aws::s3::NewObject, audit_aws::s3::NewObject, u64) {
    let mut rng = fastrand::Rng::with_seed(planned.index);
    let mut items: Vec<Map<String, Value>> = (planned.first_event
        ..planned.first_event + planned.events)
        .map(|i| item(i, planned.written_at, &mut rng))
        .collect();
    if let Some(attesting) = attesting {
        attesting.attest(&mut items);
    }
    let lines: Vec<String> = items.iter().map(trail_line).collect();
    let raw: u64 = lines.iter().map(|l| l.len() as u64 + 1).sum();
    let body = gzip_lines(lines.iter().map(String::as_str)).expect("gzip in memory");
    let mut sha256 = [0u8; 32];
    sha256.copy_from_slice(digest(&SHA256, &body).as_ref());
    let sequence = |event: u64| (FIRST_SEQUENCE + u128::from(event)).to_string();
    let encoded = Encoded {
        kind: ObjectKind::Trail,
        first_sequence: sequence(planned.first_event),
        last_sequence: sequence(planned.first_event + planned.events - 1),
        event_ids: (planned.first_event..planned.first_event + planned.events)
            .map(|e| format!("{:032x}", u128::from(e).wrapping_mul(0x9e37_79b9_7f4a_7c15)))
            .collect(),
        body: Bytes::from(body),
        sha256,
    };
    let key = encoded
        .key(planned.written_at, period, 0)
        .expect("a padded sequence number");
    let run: Vec<RunEntry> = (planned.first_event..planned.first_event + planned.events)
        .zip(&encoded.event_ids)
        .map(|(event, id)| RunEntry(sequence(event), id.clone()))
        .collect();
    let marker_key = marker_key(&run[0], 0).expect("a padded sequence number");
    let marker = Marker::new(
        run,
        &[Confirmed {
            key: key.clone(),
            event_ids: encoded.event_ids.clone(),
            sha256: hex(&encoded.sha256),
        }],
        planned.written_at.timestamp_millis(),
    );
    let marker_body = Bytes::from(marker.to_json());
    let mut marker_sha256 = [0u8; 32];
    marker_sha256.copy_from_slice(digest(&SHA256, &marker_body).as_ref());
    let marker_request = audit_aws::s3::NewObject {
        key: marker_key.clone(),
        body: marker_body,
        content_type: "application/json",
        sha256: marker_sha256,
        metadata: Vec::new(),
    };
    (marker_request, encoded.request(key, &marker_key), raw)
}

/// What writing the archive gave.
pub(crate) struct Written {
    pub(crate) bytes: u64,
    pub(crate) raw_bytes: u64,
    pub(crate) seconds: f64,
}

pub(crate) async fn write_archive(
    moto: &Moto,
    plan: &Plan,
    period: PeriodLength,
    attesting: Option<std::sync::Arc<Attesting>>,
) -> Written {
    write_into(&moto.archive(BUCKET), plan, period, attesting).await
}

/// Writes the plan's objects (and their markers) into `bucket` as the archiver does.
pub(crate) async fn write_into<B: Bucket>(
    bucket: &B,
    plan: &Plan,
    period: PeriodLength,
    attesting: Option<std::sync::Arc<Attesting>>,
) -> Written {
    let started = Instant::now();
    let written = AtomicU64::new(0);
    let sizes: Vec<(u64, u64)> = futures::stream::iter(plan.objects.iter().cloned())
        .map(|planned| {
            let (bucket, written) = (&bucket, &written);
            let attesting = attesting.clone();
            async move {
                let (marker, object, raw) = tokio::task::spawn_blocking(move || {
                    encode(&planned, period, attesting.as_deref())
                })
                .await
                .expect("encoding");
                let bytes = object.body.len() as u64;
                let key = object.key.clone();
                let result = match bucket.put_if_absent(marker).await {
                    Ok(Created::New { .. }) => bucket.put_if_absent(object).await,
                    other => other,
                };
                let done = written.fetch_add(1, Ordering::Relaxed) + 1;
                if done % 100 == 0 {
                    eprintln!(
                        "  {done} objects written ({:.1} s)",
                        started.elapsed().as_secs_f64()
                    );
                }
                match result {
                    Ok(Created::New { .. }) => Ok((bytes, raw)),
                    other => Err(format!("{key}: {other:?}")),
                }
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect()
        .await
        .unwrap_or_else(|e| panic!("writing the archive: {e}"));
    Written {
        bytes: sizes.iter().map(|(b, _)| b).sum(),
        raw_bytes: sizes.iter().map(|(_, r)| r).sum(),
        seconds: started.elapsed().as_secs_f64(),
    }
}

/// What sealing wrote: digests, and the transparency log's leaves, PUTs and bytes.
pub(crate) struct Sealed {
    pub(crate) digests: usize,
    pub(crate) leaves: u64,
    pub(crate) log_puts: u64,
    pub(crate) log_bytes: u64,
    pub(crate) seconds: f64,
}

/// Seals every period with the archiver's sealer and KMS key.
pub(crate) async fn seal(moto: &Moto, key_arn: &str, plan: &Plan, period: PeriodLength) -> Sealed {
    seal_in(&moto.archive(BUCKET), moto, key_arn, plan, period).await
}

/// Seals every period of `bucket` with the archiver's sealer, signing with moto's KMS key.
pub(crate) async fn seal_in<B: Bucket>(
    bucket: &B,
    moto: &Moto,
    key_arn: &str,
    plan: &Plan,
    period: PeriodLength,
) -> Sealed {
    let started = Instant::now();
    let signer = KmsSigner::new(moto.kms(), key_arn);
    let now = DateTime::from_timestamp(plan.end(period) + SEAL_DELAY.as_secs() as i64 + 1, 0)
        .expect("a time");
    let report = Sealer {
        bucket,
        signer: &signer,
        bucket_name: BUCKET,
        period,
    }
    .run(now, Budget::unlimited())
    .await;
    assert_eq!(report.failure, None, "sealing failed");
    assert_eq!(report.left, 0, "periods left unsealed");
    let events: u64 = report.sealed.iter().map(|s| s.events).sum();
    let objects: usize = report.sealed.iter().map(|s| s.objects).sum();
    assert_eq!(objects, plan.objects.len(), "every object in a digest");
    assert_eq!(
        events,
        plan.objects.iter().map(|o| o.events).sum::<u64>(),
        "every event in a digest"
    );
    Sealed {
        digests: report.sealed.len(),
        leaves: report.sealed.iter().map(|s| s.leaves).sum(),
        log_puts: report.sealed.iter().map(|s| s.log_puts).sum(),
        log_bytes: report.sealed.iter().map(|s| s.log_bytes).sum(),
        seconds: started.elapsed().as_secs_f64(),
    }
}

/// The item of event `event` of the plan, as `encode` made it (its object's generator replayed).
pub(crate) fn planned_item(plan: &Plan, event: u64) -> Map<String, Value> {
    let object = plan
        .objects
        .iter()
        .rfind(|o| o.first_event <= event)
        .expect("an object holds the event");
    let mut rng = fastrand::Rng::with_seed(object.index);
    let mut found = Map::new();
    for i in object.first_event..=event {
        found = item(i, object.written_at, &mut rng);
    }
    found
}
