//! Owns the viewer's dead-letter pages over HTTP against moto (src/ui/dead_letters.rs): the queue
//! by reason with counts, bodies on request, the redrive of one reason after a confirmation that
//! states the count, and the refusals (no audit queue; a reader, whom SQS denies). Must not know
//! the search pages.

use std::sync::Arc;

use crate::dlq::queues;
use crate::harness::*;
use crate::support::http::{read_request, write_response};
use crate::support::*;
use crate::ui::Ui;

/// An endpoint in front of moto that denies every SQS request but SendMessage (the access
/// events), as SQS denies a caller with AuditReaderPolicy; everything else is forwarded.
fn reader_endpoint(upstream: &str) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.set_nonblocking(true).unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let upstream = Arc::new(upstream.trim_start_matches("http://").to_owned());
    tokio::spawn(async move {
        let listener = tokio::net::TcpListener::from_std(listener).unwrap();
        while let Ok((mut socket, _)) = listener.accept().await {
            let upstream = upstream.clone();
            tokio::spawn(async move {
                let mut buffer = Vec::new();
                while let Some(request) = read_request(&mut socket, &mut buffer).await {
                    let denied = request.target.starts_with("AmazonSQS.")
                        && request.target != "AmazonSQS.SendMessage";
                    let (status, content_type, body, error) = if denied {
                        let body = format!(
                            r#"{{"__type":"com.amazon.coral.service#AccessDeniedException","message":"User: arn:aws:sts::123456789012:assumed-role/reader/alice is not authorized to perform: {} on resource: AuditDeadLetterQueue"}}"#,
                            request.target.replace("AmazonSQS.", "sqs:")
                        );
                        (
                            400,
                            "application/x-amz-json-1.0".to_owned(),
                            body.into_bytes(),
                            true,
                        )
                    } else {
                        let (s, c, b) = forward(&upstream, &request, &request.body).await;
                        (s, c, b, false)
                    };
                    let mut headers = vec![("Content-Type", content_type.as_str())];
                    if error {
                        headers.push(("x-amzn-query-error", "AccessDenied;Sender"));
                    }
                    if write_response(&mut socket, status, &headers, &body)
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    endpoint
}

#[tokio::test]
async fn the_dead_letter_page_counts_by_reason_and_shows_bodies_only_on_request() {
    let moto = Moto::start();
    let q = queues(&moto).await;
    q.dead_letter(r#"{"auditText":"secret one"}"#, Some("throttled"))
        .await;
    q.dead_letter(r#"{"auditText":"secret two!"}"#, Some("throttled"))
        .await;
    q.dead_letter(r#"{"auditText":"clash"}"#, Some("conflict"))
        .await;
    q.dead_letter(r#"{"auditText":"moved by SQS"}"#, None).await;
    let ui = Ui::start(&moto, &q.env());
    let cookie = ui.open().await;
    let page = ui.get("/dlq", Some(&cookie)).await;
    assert_eq!(page.status, 200, "{}", page.text());
    let html = page.text();
    for (reason, n) in [("conflict", 1), ("max_receives", 1), ("throttled", 2)] {
        assert!(
            html.contains(&format!("<td><code>{reason}</code></td><td>{n}</td>")),
            "{reason}: {html}"
        );
    }
    assert!(!html.contains("secret"), "no body unless asked: {html}");
    // Each reason explained in place; a redrive offered where it can pass, a warning elsewhere.
    let row = |reason: &str| {
        let start = html
            .find(&format!("<td><code>{reason}</code></td>"))
            .unwrap();
        html[start..start + html[start..].find("</tr>").unwrap()].to_owned()
    };
    let throttled = row("throttled");
    assert!(
        throttled.contains("still throttled after the invocation's retries.")
            && throttled.contains("Transient: a redrive may pass.")
            && throttled
                .contains("class=\"button\" href=\"dlq-confirm?reason=throttled\">Redrive 2…</a>")
            && !throttled.contains("fail again"),
        "{throttled}"
    );
    let conflict = row("conflict");
    assert!(
        conflict.contains("the same key holds another payload: the stored item is kept.")
            && conflict.contains("<strong>Permanent</strong>: a redrive fails again.")
            && conflict.contains("Will fail again")
            && conflict.contains(">Redrive anyway…</a>")
            && !conflict.contains("class=\"button\""),
        "{conflict}"
    );
    assert!(row("max_receives").contains("Transient"), "{html}");
    let bodies = q.access_events().await;
    assert_eq!(bodies.len(), 1, "{bodies:?}");
    let confirm = ui
        .get("/dlq-confirm?reason=conflict", Some(&cookie))
        .await
        .text();
    assert!(
        confirm.contains("<strong>This redrive will fail again</strong>")
            && confirm.contains("Redrive 1 message(s) anyway"),
        "{confirm}"
    );
    let confirm = ui
        .get("/dlq-confirm?reason=throttled", Some(&cookie))
        .await
        .text();
    assert!(
        !confirm.contains("fail again") && confirm.contains("Redrive 2 message(s)</button>"),
        "{confirm}"
    );
    assert_eq!(
        q.access_events().await.len(),
        2,
        "each confirmation lists the queue"
    );
    let arguments = crate::access::assert_access_event(&bodies[0], "auditctl.ui.view", &q.dlq);
    assert_eq!(arguments["page"], "dlq");
    let html = ui.get("/dlq?reason=throttled", Some(&cookie)).await.text();
    assert!(html.contains("orig-throttled-"), "{html}");
    assert!(!html.contains("secret"), "{html}");
    assert_eq!(q.access_events().await.len(), 1, "the listing of throttled");
    // Bodies cost: a GET that asks for them, or a POST from another origin, lists nothing.
    let asked = ui.get("/dlq?reason=throttled&body=1", Some(&cookie)).await;
    assert_eq!(asked.status, 405, "{}", asked.text());
    let foreign = ui
        .post(
            "/dlq",
            &cookie,
            Some("http://127.0.0.1:1"),
            "reason=throttled&body=1",
        )
        .await;
    assert_eq!(foreign.status, 403, "{}", foreign.text());
    assert!(!foreign.text().contains("secret one") && !asked.text().contains("secret one"));
    assert!(q.access_events().await.is_empty(), "nothing listed");
    let origin = format!("http://{}", ui.address);
    let html = ui
        .post("/dlq", &cookie, Some(&origin), "reason=throttled&body=1")
        .await
        .text();
    assert!(
        html.contains("secret one") && html.contains("secret two!"),
        "{html}"
    );
    assert!(!html.contains("clash"), "only that reason's: {html}");
    let bodies = q.access_events().await;
    assert_eq!(bodies[0]["arguments"]["showBody"], true, "{bodies:?}");
    assert_eq!(
        q.depth(&q.dlq).await.0,
        4,
        "listing leaves the queue as it was"
    );
}

#[tokio::test]
async fn a_redrive_by_reason_states_the_count_then_moves_that_reason_only() {
    let moto = Moto::start();
    let q = queues(&moto).await;
    q.dead_letter(r#"{"auditText":"a"}"#, Some("throttled"))
        .await;
    q.dead_letter(r#"{"auditText":"b"}"#, Some("throttled"))
        .await;
    q.dead_letter(r#"{"auditText":"c"}"#, Some("conflict"))
        .await;
    let ui = Ui::start(&moto, &q.env());
    let cookie = ui.open().await;
    let confirm = ui.get("/dlq-confirm?reason=throttled", Some(&cookie)).await;
    assert_eq!(confirm.status, 200, "{}", confirm.text());
    assert!(
        confirm
            .text()
            .contains("<strong>2 message(s)</strong> of reason <code>throttled</code>"),
        "{}",
        confirm.text()
    );
    q.access_events().await;
    // From another site (no Origin of ours): refused, nothing moved.
    let forged = ui
        .post("/dlq-redrive", &cookie, None, "reason=throttled&count=2")
        .await;
    assert_eq!(forged.status, 403, "{}", forged.text());
    assert!(q.access_events().await.is_empty());
    let origin = format!("http://{}", ui.address);
    let done = ui
        .post(
            "/dlq-redrive",
            &cookie,
            Some(&origin),
            "reason=throttled&count=2",
        )
        .await;
    assert_eq!(done.status, 200, "{}", done.text());
    assert!(
        done.text().contains("Moved 2 message(s)"),
        "{}",
        done.text()
    );
    let bodies = q.access_events().await;
    assert_eq!(bodies.len(), 1, "{bodies:?}");
    let arguments = crate::access::assert_access_event(&bodies[0], "auditctl.ui.redrive", &q.dlq);
    assert_eq!(arguments["reason"], "throttled");
    assert_eq!(arguments["count"], 2);
    assert_eq!(q.depth(&q.source).await.0, 2, "moved to the audit queue");
    assert_eq!(q.depth(&q.dlq).await.0, 1, "the conflict stays");
}

#[tokio::test]
async fn without_an_audit_queue_the_redrive_says_why_it_is_unavailable() {
    let moto = Moto::start();
    let q = queues(&moto).await;
    q.dead_letter(r#"{"auditText":"a"}"#, Some("throttled"))
        .await;
    let ui = Ui::start(
        &moto,
        &[
            ("DEAD_LETTER_QUEUE_URL", q.dlq.as_str()),
            ("ACCESS_QUEUE_URL", &q.access),
        ],
    );
    let cookie = ui.open().await;
    let html = ui.get("/dlq", Some(&cookie)).await.text();
    assert!(html.contains("disabled"), "{html}");
    assert!(
        html.contains("redrive is unavailable: no audit queue"),
        "{html}"
    );
    let confirm = ui.get("/dlq-confirm?reason=throttled", Some(&cookie)).await;
    assert_eq!(confirm.status, 409);
}

#[tokio::test]
async fn a_reader_is_refused_the_dead_letter_queue_with_the_reason() {
    let moto = Moto::start();
    let q = queues(&moto).await;
    q.dead_letter(r#"{"auditText":"a"}"#, Some("throttled"))
        .await;
    let endpoint = reader_endpoint(&moto.endpoint);
    let ui = Ui::start_at(&endpoint, &q.env());
    let cookie = ui.open().await;
    for answer in [
        ui.get("/dlq", Some(&cookie)).await,
        ui.get("/dlq-confirm?reason=throttled", Some(&cookie)).await,
    ] {
        assert_eq!(answer.status, 403, "{}", answer.text());
        let html = answer.text();
        assert!(
            html.contains("not allowed to work the dead-letter queue")
                && html.contains("need AuditOperatorPolicy")
                && html.contains("not authorized to perform: sqs:"),
            "{html}"
        );
    }
    let origin = format!("http://{}", ui.address);
    let refused = ui
        .post(
            "/dlq-redrive",
            &cookie,
            Some(&origin),
            "reason=throttled&count=1",
        )
        .await;
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert!(
        refused.text().contains("need AuditOperatorPolicy"),
        "{}",
        refused.text()
    );
    assert_eq!(q.depth(&q.dlq).await.0, 1, "nothing moved");
}
