//! The pure CPU path, no I/O: parse and validate, build the item and its `PutItem` body,
//! and the batch bookkeeping (dedupe, units, concurrency, outcomes, response), at 10, 1,000 and
//! 10,000 records; and the whole batch again with each item attested (one Ed25519 signature over
//! the batch's tree, `audit_receiver::attest`). Run with `cargo bench -p audit-bench --bench cpu`
//! (or `make bench`).

use std::hint::black_box;

/// The function's allocator (crates/receiver/src/main.rs), so the figures are the function's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::Duration;

use audit_aws::dynamodb::{PutOutcome, StoreError, put_item_body};
use audit_receiver::handler::response;
use audit_receiver::message::{AuditItem, AuditMessage, Delivery, parse_sent_timestamp};
use audit_receiver::store::AuditStore;
use audit_receiver::{BatchSettings, RetryPolicy, batch};
use bench_support::{event, measure, micros};

/// Builds the `PutItem` request body (the adapter's CPU work before signing) and answers at once:
/// everything the function does for a record except the call.
struct MappingOnly;

impl AuditStore for MappingOnly {
    async fn put_if_absent(&self, item: &AuditItem) -> Result<PutOutcome, StoreError> {
        black_box(put_item_body("AuditMessages", item)?);
        Ok(PutOutcome::Written)
    }
}

fn main() {
    // `cargo bench` passes --bench; a test runner listing or running targets does not.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let settings = BatchSettings {
        max_concurrency: 32,
        deadline_margin: Duration::from_millis(1000),
        retention_days: Some(365),
        retry: RetryPolicy::default(),
        max_receive_count: 5,
        access_queue_arn: None,
        redrivers: Default::default(),
    };
    // The run's key, certified once by a stand-in for KMS, as at start-up.
    let kms = audit_aws::kms::MemoryKey::new("arn:aws:kms:us-east-1:000000000000:key/attest");
    let run = audit_receiver::attest::Uncertified::generate(1_795_000_000_000).unwrap();
    let signature = kms.sign(&run.statement()).unwrap();
    let attester = run.certified(signature);
    println!(
        "| batch | parse + validate | + item + request body | whole batch (bookkeeping, no I/O) | per record | whole batch, attested | per record, attested | attestation's share |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for size in [10usize, 1_000, 10_000] {
        let records = event(size, 1).records;
        let budget = Duration::from_secs(2);
        let (parse, _) = measure(5, budget, || {
            for r in &records {
                let sent =
                    parse_sent_timestamp(r.attributes.get("SentTimestamp").map(String::as_str));
                let _ = black_box(AuditMessage::parse(r.body.as_deref(), sent));
            }
        });
        let (item, _) = measure(5, budget, || {
            for r in &records {
                let sent =
                    parse_sent_timestamp(r.attributes.get("SentTimestamp").map(String::as_str));
                let message = AuditMessage::parse(r.body.as_deref(), sent).unwrap();
                let delivery = Delivery {
                    sqs_message_id: r.message_id.clone().unwrap(),
                    original_message_id: r.message_id.clone().unwrap(),
                    sent_at: sent,
                    receive_count: Some(1),
                    event_source: r.event_source_arn.clone(),
                    sender_id: r.attributes.get("SenderId").cloned(),
                    original_sender_id: None,
                };
                let item = AuditItem::new(message, delivery, chrono::Utc::now(), Some(365));
                let _ = black_box(put_item_body("AuditMessages", &item));
            }
        });
        // The whole batch, without and with the run's attestation key.
        let whole_batch = |attester: Option<&audit_receiver::attest::Attester>| {
            measure(5, budget, || {
                let report = runtime
                    .block_on(batch::process_batch(
                        batch::Ports {
                            store: &MappingOnly,
                            dead_letters: None::<&audit_receiver::handler::NoDeadLetterQueue>,
                            attester,
                        },
                        &settings,
                        &records,
                        None,
                    ))
                    .unwrap();
                assert_eq!(report.written(), size);
                black_box(response(&report));
            })
            .0
        };
        let whole = whole_batch(None);
        let attested = whole_batch(Some(&attester));
        println!(
            "| {size} | {:.0} µs | {:.0} µs | {:.0} µs | {:.2} µs | {:.0} µs | {:.2} µs | {:.0} % |",
            micros(parse),
            micros(item),
            micros(whole),
            micros(whole) / size as f64,
            micros(attested),
            micros(attested) / size as f64,
            100.0 * (micros(attested) - micros(whole)) / micros(whole),
        );
    }
}
