//! Owns the dead-letter policy's unit tests over the SQS twin (`audit_aws::sqs::MemorySqs`):
//! listing, redriving, what a redrive vouches for. Must not know the SDK or moto.

use std::collections::BTreeMap;

use audit_aws::error::AwsError;
use audit_aws::sqs::{Attribute, DeadLetter, Incoming, MemorySqs, Receive, Sqs};
use audit_model::context::{FAILURE_CONTEXT, FAILURE_REASON, FailureContext};

use super::{DeadLetterQueue, OriginalSender, RedriveOptions};

const RECEIVER_ROLE: &str = "AROARECEIVER";
const AUDIT_QUEUE_ARN: &str = "arn:aws:sqs:memory:000000000000:audit";

struct Given {
    dlq: DeadLetterQueue<MemorySqs>,
    target: String,
}

/// A dead-letter queue and the audit queue it redrives to, both empty; auditctl's caller is
/// `AIDAPERSON`.
fn queues(target: &str) -> Given {
    let sqs = MemorySqs::new("AIDAPERSON");
    let url = sqs.create_queue("dlq");
    let target = sqs.create_queue(target);
    Given {
        dlq: DeadLetterQueue::with_sqs(sqs, url),
        target,
    }
}

fn context(id: &str, reason: &str, original_sender: Option<&str>) -> String {
    FailureContext {
        reason: reason.into(),
        detail: "test".into(),
        sqs_message_id: id.into(),
        sent_timestamp: Some("1767225600000".into()),
        receive_count: Some(1),
        failed_at: "2026-01-01T00:00:00.000Z".into(),
        event_source_arn: Some(AUDIT_QUEUE_ARN.into()),
        original_sender_id: original_sender.map(str::to_owned),
        sender_id: None,
    }
    .to_json()
}

impl Given {
    fn sqs(&self) -> &MemorySqs {
        self.dlq.sqs()
    }

    /// What the receiver function dead-letters: the body, `failureReason` and `failureContext`,
    /// sent by `sender`.
    fn dead_lettered(&self, body: &str, reason: &str, context: &str, sender: &str) -> String {
        let attributes = BTreeMap::from([
            (FAILURE_REASON.to_owned(), Attribute::string(reason)),
            (FAILURE_CONTEXT.to_owned(), Attribute::string(context)),
        ]);
        self.deliver(body, attributes, Some(sender), None)
    }

    /// What SQS moves after `maxReceiveCount` receives: the body and its attributes as sent.
    fn moved_by_sqs(&self, body: &str, sender: &str) -> String {
        let attributes = BTreeMap::from([("tenant".to_owned(), Attribute::string("t1"))]);
        self.deliver(body, attributes, Some(sender), Some(AUDIT_QUEUE_ARN))
    }

    fn deliver(
        &self,
        body: &str,
        attributes: BTreeMap<String, Attribute>,
        sender: Option<&str>,
        source_arn: Option<&str>,
    ) -> String {
        self.sqs()
            .deliver(
                &self.dlq.url,
                Incoming {
                    letter: DeadLetter {
                        body: body.into(),
                        attributes,
                        ..DeadLetter::default()
                    },
                    sender_id: sender.map(str::to_owned),
                    source_arn: source_arn.map(str::to_owned),
                    receives: 5,
                },
            )
            .unwrap()
    }

    fn redriven_contexts(&self) -> Vec<FailureContext> {
        self.sqs()
            .messages(&self.target)
            .iter()
            .map(|m| {
                FailureContext::parse(
                    m.attributes[FAILURE_CONTEXT]
                        .string_value
                        .as_deref()
                        .unwrap(),
                )
                .unwrap()
            })
            .collect()
    }

    async fn visible_in_dlq(&self) -> u64 {
        self.sqs().depth(&self.dlq.url).await.unwrap().visible
    }
}

#[tokio::test]
async fn a_listing_gets_every_message_of_a_queue_that_answers_short_and_empty_and_leaves_them_visible()
 {
    let given = queues("audit");
    for i in 0..25 {
        given.moved_by_sqs(&format!("body {i}"), "AIDASENDER");
    }
    given.sqs().answer_next([0, 0, 3, 10, 0, 1]);

    let listing = given.dlq.list().await.unwrap();

    assert_eq!(listing.messages.len(), 25);
    assert_eq!(listing.shortfall, None);
    assert_eq!(listing.messages[0].body, "body 0");
    assert_eq!(given.visible_in_dlq().await, 25, "all visible again");
}

#[tokio::test]
async fn a_listing_says_how_many_of_how_many_when_another_consumer_holds_some() {
    let given = queues("audit");
    for i in 0..12 {
        given.moved_by_sqs(&format!("body {i}"), "AIDASENDER");
    }
    let other = Receive {
        max: 3,
        visibility_seconds: 600,
        wait_seconds: 0,
    };
    given.sqs().receive(&given.dlq.url, other).await.unwrap();

    let listing = given.dlq.list().await.unwrap();

    assert_eq!(listing.messages.len(), 9);
    let shortfall = listing.shortfall.unwrap();
    assert_eq!((shortfall.listed, shortfall.total), (9, 12));
    assert!(
        shortfall
            .why
            .contains("3 are in flight with another consumer"),
        "{}",
        shortfall.why
    );
    assert_eq!(given.visible_in_dlq().await, 9);
}

#[tokio::test]
async fn a_listing_stops_at_its_bound_and_says_so() {
    let mut given = queues("audit");
    for i in 0..12 {
        given.moved_by_sqs(&format!("body {i}"), "AIDASENDER");
    }
    given.dlq.bound = 5;

    let listing = given.dlq.list().await.unwrap();

    let shortfall = listing.shortfall.unwrap();
    assert_eq!((shortfall.listed, shortfall.total), (10, 12));
    assert!(
        shortfall.why.contains("at most 5 messages"),
        "{}",
        shortfall.why
    );
}

#[tokio::test]
async fn a_message_sqs_moved_is_redriven_with_a_context_naming_its_own_id_and_sender() {
    let given = queues("audit");
    let id = given.moved_by_sqs("{\"a\":1}", "AIDAFIRST");

    let report = given
        .dlq
        .redrive(&given.target, &RedriveOptions::default())
        .await
        .unwrap();

    assert_eq!(report.moved.get("max_receives"), Some(&1));
    let redriven = given.sqs().messages(&given.target);
    assert_eq!(redriven.len(), 1);
    assert_eq!(redriven[0].body, "{\"a\":1}", "byte for byte");
    assert_eq!(redriven[0].attributes["tenant"], Attribute::string("t1"));
    let context = &given.redriven_contexts()[0];
    assert_eq!(context.sqs_message_id, id);
    assert_eq!(context.original_sender_id.as_deref(), Some("AIDAFIRST"));
    assert_eq!(context.event_source_arn.as_deref(), Some(AUDIT_QUEUE_ARN));
    assert_eq!(
        context.receive_count,
        Some(6),
        "SQS's count, kept when it moved it"
    );
    assert_eq!(given.sqs().messages(&given.dlq.url).len(), 0, "deleted");
}

#[tokio::test]
async fn a_claimed_sender_is_kept_only_when_the_receiver_function_sent_the_message() {
    let given = queues("audit");
    let vouched = context("orig-1", "conflict", Some("AIDAFIRST"));
    given.dead_lettered("one", "conflict", &vouched, "AROARECEIVER:audit-receiver");
    let forged = context("orig-2", "conflict", Some("AIDAVICTIM"));
    let forged_id = given.dead_lettered("two", "conflict", &forged, "AIDAFORGER");
    let options = RedriveOptions {
        receiver_role_id: Some(RECEIVER_ROLE.into()),
        ..RedriveOptions::default()
    };

    let listing = given.dlq.list().await.unwrap();
    let senders: Vec<OriginalSender> = listing
        .messages
        .iter()
        .map(|m| m.original_sender(Some(RECEIVER_ROLE)))
        .collect();
    assert_eq!(senders[0], OriginalSender::Vouched("AIDAFIRST".into()));
    assert!(
        matches!(&senders[1], OriginalSender::Unvouched { claim, .. } if claim == "AIDAVICTIM")
    );

    let report = given.dlq.redrive(&given.target, &options).await.unwrap();

    assert_eq!(report.moved.get("conflict"), Some(&2));
    assert_eq!(report.dropped_claims.len(), 1);
    assert_eq!(report.dropped_claims[0].message_id, forged_id);
    let contexts = given.redriven_contexts();
    assert_eq!(contexts[0].original_sender_id.as_deref(), Some("AIDAFIRST"));
    assert_eq!(contexts[1].original_sender_id, None);
    assert_eq!(
        contexts[1].sqs_message_id, "orig-2",
        "the rest of the context kept"
    );
}

#[tokio::test]
async fn a_redrive_leaves_other_reasons_access_events_and_what_it_could_not_send() {
    let given = queues("audit");
    let conflict = context("orig-1", "conflict", None);
    given.dead_lettered("one", "conflict", &conflict, "AROARECEIVER:fn");
    let invalid = context("orig-2", "invalid_body", None);
    given.dead_lettered("two", "invalid_body", &invalid, "AROARECEIVER:fn");
    given.dead_lettered("three", "conflict", &conflict, "AROARECEIVER:fn");
    given
        .sqs()
        .fail_next_sends([AwsError::from_answer(500, "InternalError", "try again")]);
    let options = RedriveOptions {
        reason: Some("conflict".into()),
        access_queue_arn: Some(AUDIT_QUEUE_ARN.into()),
        ..RedriveOptions::default()
    };

    let report = given.dlq.redrive(&given.target, &options).await.unwrap();

    // Every conflict came from the access queue here: access events stay.
    assert_eq!(report.access_events.len(), 2);
    assert_eq!(report.left.get("invalid_body"), Some(&1));
    assert_eq!(report.left.get("conflict"), Some(&2));
    assert!(report.moved.is_empty());
    assert_eq!(given.visible_in_dlq().await, 3);

    let options = RedriveOptions {
        reason: Some("conflict".into()),
        ..RedriveOptions::default()
    };
    let report = given.dlq.redrive(&given.target, &options).await.unwrap();
    assert_eq!(report.failed.len(), 1);
    assert_eq!(report.failed[0].1, "InternalError: try again");
    assert_eq!(report.moved.get("conflict"), Some(&1));
    assert_eq!(
        given.visible_in_dlq().await,
        2,
        "the failed one and the other reason"
    );
}

#[tokio::test]
async fn a_message_sent_but_not_deleted_is_reported_and_stays() {
    let given = queues("audit");
    given.moved_by_sqs("one", "AIDAFIRST");
    given
        .sqs()
        .fail_next_deletes([AwsError::from_answer(500, "InternalError", "later")]);

    let report = given
        .dlq
        .redrive(&given.target, &RedriveOptions::default())
        .await
        .unwrap();

    assert_eq!(
        report.failed[0].1,
        "sent, but not deleted from the dead-letter queue: InternalError: later"
    );
    assert_eq!(given.sqs().messages(&given.target).len(), 1);
    assert_eq!(given.visible_in_dlq().await, 1);
}

#[tokio::test]
async fn a_redrive_to_a_fifo_queue_sends_each_message_with_a_group() {
    let given = queues("audit.fifo");
    given.moved_by_sqs("one", "AIDAFIRST");
    given.moved_by_sqs("two", "AIDAFIRST");

    let report = given
        .dlq
        .redrive(&given.target, &RedriveOptions::default())
        .await
        .unwrap();

    assert_eq!(report.moved.get("max_receives"), Some(&2));
    let redriven = given.sqs().messages(&given.target);
    assert_eq!(redriven.len(), 2);
    assert_eq!(
        redriven[0].system.message_group_id.as_deref(),
        Some("auditctl-redrive")
    );
}

#[tokio::test]
async fn a_dry_run_changes_nothing() {
    let given = queues("audit");
    given.moved_by_sqs("one", "AIDAFIRST");
    let options = RedriveOptions {
        dry_run: true,
        max: Some(5),
        ..RedriveOptions::default()
    };

    let report = given.dlq.redrive(&given.target, &options).await.unwrap();

    assert_eq!(report.moved.get("max_receives"), Some(&1));
    assert!(given.sqs().messages(&given.target).is_empty());
    assert_eq!(given.visible_in_dlq().await, 1);
}

#[tokio::test]
async fn a_missing_queue_is_named() {
    let sqs = MemorySqs::new("AIDAPERSON");
    let dlq = DeadLetterQueue::with_sqs(sqs, "https://sqs.memory.localhost/000000000000/gone");
    let error = dlq.list().await.unwrap_err();
    assert!(
        matches!(error, crate::Error::QueueNotFound { .. }),
        "{error:?}"
    );
}
