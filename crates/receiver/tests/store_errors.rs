//! The DynamoDB adapter's error paths, through its real wire over HTTP to a scripted endpoint
//! that answers what DynamoDB answers in trouble: throttling, 5xx, conditional failures with and
//! without ALL_OLD, validation errors, refused access, dropped connections and silence.

mod support;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use audit_aws::dynamodb::DynamoDbStore;
use audit_aws::dynamodb::{PutOutcome, StartupError, StoreError};
use audit_receiver::message::AuditItem;
use lambda_runtime::{Context, LambdaEvent};
use support::http::{Request, read_request, write_response};
use support::*;
use tokio::net::{TcpListener, TcpStream};

#[derive(Clone)]
enum Reply {
    Json(u16, String),
    /// Close the connection without answering.
    Drop,
    /// Never answer.
    Hang,
}

fn error(status: u16, kind: &str, message: &str) -> Reply {
    Reply::Json(
        status,
        format!(r#"{{"__type":"com.amazonaws.dynamodb.v20120810#{kind}","message":"{message}"}}"#),
    )
}

fn ok() -> Reply {
    Reply::Json(200, "{}".into())
}

/// An HTTP endpoint that gives scripted replies in order (the last one repeats) and counts requests.
struct Scripted {
    endpoint: String,
    replies: Arc<Mutex<VecDeque<Reply>>>,
    requests: Arc<Mutex<usize>>,
    connections: Arc<Mutex<usize>>,
    last: Arc<Mutex<Option<Request>>>,
    /// Each request's `X-Amz-Target`, or its method and path when it has none.
    calls: Arc<Mutex<Vec<String>>>,
}

impl Scripted {
    async fn start(replies: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let replies = Arc::new(Mutex::new(VecDeque::from(replies)));
        let requests = Arc::new(Mutex::new(0));
        let connections = Arc::new(Mutex::new(0));
        let last = Arc::new(Mutex::new(None));
        let calls = Arc::new(Mutex::new(Vec::new()));
        let (r, n, c, l, k) = (
            replies.clone(),
            requests.clone(),
            connections.clone(),
            last.clone(),
            calls.clone(),
        );
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                *c.lock().unwrap() += 1;
                tokio::spawn(serve(socket, r.clone(), n.clone(), l.clone(), k.clone()));
            }
        });
        Self {
            endpoint,
            replies,
            requests,
            connections,
            last,
            calls,
        }
    }

    /// How many requests had this target (`DescribeTable`, `PutItem`).
    fn calls(&self, operation: &str) -> usize {
        let target = format!("DynamoDB_20120810.{operation}");
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|t| **t == target)
            .count()
    }

    fn store(&self) -> DynamoDbStore {
        store(&self.endpoint, TABLE)
    }

    fn requests(&self) -> usize {
        *self.requests.lock().unwrap()
    }

    fn connections(&self) -> usize {
        *self.connections.lock().unwrap()
    }

    fn remaining(&self) -> usize {
        self.replies.lock().unwrap().len()
    }
}

async fn serve(
    mut socket: TcpStream,
    replies: Arc<Mutex<VecDeque<Reply>>>,
    requests: Arc<Mutex<usize>>,
    last: Arc<Mutex<Option<Request>>>,
    calls: Arc<Mutex<Vec<String>>>,
) {
    let mut buffer = Vec::new();
    while let Some(request) = read_request(&mut socket, &mut buffer).await {
        *requests.lock().unwrap() += 1;
        calls.lock().unwrap().push(if request.target.is_empty() {
            format!("{} {}", request.method, request.path)
        } else {
            request.target.clone()
        });
        *last.lock().unwrap() = Some(request);
        let reply = {
            let mut replies = replies.lock().unwrap();
            if replies.len() > 1 {
                replies.pop_front()
            } else {
                replies.front().cloned()
            }
        };
        match reply.unwrap_or_else(ok) {
            Reply::Json(status, body) => {
                let headers = [("Content-Type", "application/x-amz-json-1.0")];
                if write_response(&mut socket, status, &headers, body.as_bytes())
                    .await
                    .is_err()
                {
                    return;
                }
            }
            Reply::Drop => return,
            Reply::Hang => {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                return;
            }
        }
    }
}

fn item(body: &str) -> AuditItem {
    audit_item(body, "sqs-1")
}

/// One conditional write through the real adapter against an endpoint giving `reply`.
async fn put_once(reply: Reply) -> Result<PutOutcome, StoreError> {
    let server = Scripted::start(vec![reply]).await;
    server.store().put_if_absent(&item(BODY)).await
}

const BODY: &str = r#"{"auditText":"login","auditTime":"2026-11-22T10:00:00Z","n":1.0}"#;

fn condition_failed(old_item: Option<&str>) -> Reply {
    let item = old_item
        .map(|i| format!(r#","Item":{i}"#))
        .unwrap_or_default();
    Reply::Json(
        400,
        format!(
            r#"{{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed"{item}}}"#
        ),
    )
}

#[tokio::test]
async fn the_write_goes_out_signed_as_the_sdks_signer_signs_it() {
    use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
    use aws_sigv4::sign::v4;

    let server = Scripted::start(vec![ok()]).await;
    let outcome = server.store().put_if_absent(&item(BODY)).await;
    assert_eq!(outcome, Ok(PutOutcome::Written));

    let request = server.last.lock().unwrap().take().expect("a request");
    let header = |name: &str| {
        request
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("POST", "/")
    );
    assert_eq!(request.target, "DynamoDB_20120810.PutItem");
    assert_eq!(header("content-type"), "application/x-amz-json-1.0");
    let host = server.endpoint.trim_start_matches("http://").to_owned();
    assert_eq!(header("host"), host);

    // Sign what arrived with the SDK's signer at the request's own time: the same signature.
    let amz_date = header("x-amz-date");
    let time = chrono::NaiveDateTime::parse_from_str(&amz_date, "%Y%m%dT%H%M%SZ")
        .expect("x-amz-date")
        .and_utc();
    let identity =
        aws_sdk_dynamodb::config::Credentials::new("test", "test", None, None, "t").into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region("us-east-1")
        .name("dynamodb")
        .time(time.into())
        .settings(SigningSettings::default())
        .build()
        .unwrap()
        .into();
    let (content_type, target) = (header("content-type"), header("x-amz-target"));
    let signed = [
        ("content-type", content_type.as_str()),
        ("host", host.as_str()),
        ("x-amz-target", target.as_str()),
    ];
    let uri = format!("{}/", server.endpoint);
    let signable = SignableRequest::new(
        "POST",
        uri.as_str(),
        signed.into_iter(),
        SignableBody::Bytes(&request.body),
    )
    .unwrap();
    let (instructions, _) = sign(signable, &params).unwrap().into_parts();
    let expected = instructions
        .headers()
        .find(|(name, _)| *name == "authorization")
        .map(|(_, value)| value.to_owned());
    assert_eq!(Some(header("authorization")), expected);
}

#[tokio::test]
async fn throttling_is_a_retryable_error() {
    for kind in [
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
    ] {
        let result = put_once(error(400, kind, "Rate exceeded")).await;
        assert!(
            matches!(&result, Err(e @ StoreError::Throttled(_)) if e.is_retryable()),
            "{kind}: {result:?}"
        );
    }
}

#[tokio::test]
async fn server_errors_are_retryable() {
    for reply in [
        error(500, "InternalServerError", "Internal server error"),
        Reply::Json(503, "<html>Service Unavailable</html>".into()),
        Reply::Json(502, String::new()),
    ] {
        let result = put_once(reply).await;
        assert!(
            matches!(&result, Err(e @ StoreError::Unavailable(_)) if e.is_retryable()),
            "{result:?}"
        );
    }
}

#[tokio::test]
async fn a_dropped_connection_is_retryable() {
    let result = put_once(Reply::Drop).await;
    assert!(
        matches!(&result, Err(e @ StoreError::Unavailable(_)) if e.is_retryable()),
        "{result:?}"
    );
}

#[tokio::test]
async fn condition_failure_with_the_same_payload_is_a_duplicate() {
    // DynamoDB returns numbers normalised (1.0 -> 1) and other delivery metadata.
    let old = r#"{"messageId":{"S":"sqs-0"},"auditTime":{"S":"2026-11-22T10:00:00.000Z"},"auditText":{"S":"login"},"sqsMessageId":{"S":"sqs-0"},"extra":{"M":{"n":{"N":"1"}}}}"#;
    assert_eq!(
        put_once(condition_failed(Some(old))).await,
        Ok(PutOutcome::Duplicate)
    );
}

#[tokio::test]
async fn condition_failure_with_another_payload_is_a_conflict() {
    let old = r#"{"messageId":{"S":"sqs-1"},"auditTime":{"S":"2026-11-22T10:00:00.000Z"},"auditText":{"S":"login"},"extra":{"M":{"n":{"N":"2"}}}}"#;
    assert_eq!(
        put_once(condition_failed(Some(old))).await,
        Ok(PutOutcome::Conflict)
    );
}

#[tokio::test]
async fn condition_failure_without_all_old_is_not_taken_for_a_duplicate() {
    assert_eq!(
        put_once(condition_failed(None)).await,
        Err(StoreError::Unverifiable)
    );
    assert!(!StoreError::Unverifiable.is_retryable());
}

#[tokio::test]
async fn validation_and_missing_table_errors_are_final() {
    let result = put_once(error(
        400,
        "ValidationException",
        "One or more parameter values were invalid",
    ))
    .await;
    assert!(
        matches!(&result, Err(e @ StoreError::Rejected(_)) if !e.is_retryable()),
        "{result:?}"
    );

    let result = put_once(error(
        400,
        "ResourceNotFoundException",
        "Requested resource not found",
    ))
    .await;
    assert!(
        matches!(&result, Err(e @ StoreError::TableNotFound(_)) if !e.is_retryable()),
        "{result:?}"
    );
}

#[tokio::test]
async fn the_batch_retries_transient_errors_within_the_invocation() {
    let server = Scripted::start(vec![
        error(
            400,
            "ProvisionedThroughputExceededException",
            "Rate exceeded",
        ),
        error(500, "InternalServerError", "oops"),
        Reply::Drop,
        ok(),
    ])
    .await;
    let handler = audit_receiver::Handler::new(server.store(), settings());

    let response = handler
        .handle(event(vec![record("m1", BODY)]))
        .await
        .unwrap();

    assert!(failed(&response).is_empty());
    assert_eq!(server.requests(), 4);
    assert_eq!(server.remaining(), 1);
}

#[tokio::test]
async fn the_batch_gives_up_after_bounded_retries_and_never_retries_validation_errors() {
    let server = Scripted::start(vec![error(500, "InternalServerError", "down")]).await;
    let handler = audit_receiver::Handler::new(server.store(), settings());
    let response = handler
        .handle(event(vec![record("m1", BODY)]))
        .await
        .unwrap();
    assert_eq!(failed(&response), ["m1"]);
    assert_eq!(server.requests(), settings().retry.max_attempts as usize);

    let server = Scripted::start(vec![error(400, "ValidationException", "bad")]).await;
    let handler = audit_receiver::Handler::new(server.store(), settings());
    let response = handler
        .handle(event(vec![record("m1", BODY)]))
        .await
        .unwrap();
    assert_eq!(failed(&response), ["m1"]);
    assert_eq!(server.requests(), 1);
}

#[tokio::test]
async fn a_silent_store_cannot_make_lambda_time_out() {
    let server = Scripted::start(vec![Reply::Hang]).await;
    let handler = audit_receiver::Handler::new(server.store(), settings());
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let mut context = Context::default();
    context.deadline = now_ms + 1_500; // Lambda's deadline, 1.5 s away; margin 500 ms.
    let mut event = aws_lambda_events::sqs::SqsEvent::default();
    event.records = vec![
        record("m1", BODY),
        record("m2", BODY.replace("login", "logout").as_str()),
    ];

    let started = std::time::Instant::now();
    let response = handler
        .handle(LambdaEvent::new(event, context))
        .await
        .unwrap();
    let elapsed = started.elapsed();

    assert!(
        elapsed < Duration::from_millis(1_300),
        "answered after {elapsed:?}"
    );
    assert_eq!(failed(&response), ["m1", "m2"]);
}

#[tokio::test]
async fn warm_up_opens_the_connections_the_first_batch_uses() {
    let server = Scripted::start(vec![ok()]).await;
    let store = server.store();

    assert_eq!(store.warm_up(5, Duration::from_secs(2)).await, Ok(5));
    assert_eq!(server.connections(), 5);
    assert_eq!(server.calls("DescribeTable"), 1);

    let handler = audit_receiver::Handler::new(store, settings());
    let records = (0..5).map(|i| record(&format!("m{i}"), BODY)).collect();
    let response = handler.handle(event(records)).await.unwrap();

    assert!(failed(&response).is_empty());
    assert_eq!(server.requests(), 10);
    assert_eq!(
        server.connections(),
        5,
        "the batch reused the warm connections"
    );
}

#[tokio::test]
async fn warm_up_makes_one_describe_table_call_per_cold_start() {
    // The function warms as many connections as a default batch of 10 uses.
    let server = Scripted::start(vec![ok()]).await;
    let store = server.store();

    assert_eq!(store.warm_up(10, Duration::from_secs(2)).await, Ok(10));

    assert_eq!(
        server.calls("DescribeTable"),
        1,
        "one metadata call per cold start"
    );
    assert_eq!(server.connections(), 10, "and every connection opened");
    assert_eq!(server.requests(), 10);
}

#[tokio::test]
async fn access_refused_by_a_policy_waits_for_a_later_receive_instead_of_the_dead_letter_queue() {
    use audit_aws::sqs::MemoryDeadLetterQueue;
    use audit_receiver::deadletter::FailureAttributes;

    // Given a role whose policy does not allow PutItem, and a dead-letter queue.
    let server = Scripted::start(vec![error(
        400,
        "AccessDeniedException",
        "User: arn:aws:sts::123456789012:assumed-role/audit/f is not authorized to perform: \
         dynamodb:PutItem on resource: arn:aws:dynamodb:us-east-1:123456789012:table/AuditMessages \
         because no identity-based policy allows the dynamodb:PutItem action",
    )])
    .await;
    let queue = Arc::new(MemoryDeadLetterQueue::new());
    let handler =
        audit_receiver::Handler::new(server.store(), settings()).with_dead_letters(queue.clone());

    // When a record is received the first time: reported failed for SQS to deliver again, not
    // dead-lettered, and not retried within the invocation.
    let response = handler
        .handle(event(vec![record("m1", BODY)]))
        .await
        .unwrap();
    assert_eq!(failed(&response), ["m1"]);
    assert!(queue.sent().is_empty(), "{:?}", queue.sent());
    assert_eq!(server.requests(), 1, "access refused is not hammered");

    // On its last receive (the policy still not fixed), the function dead-letters it itself,
    // with its reason.
    let mut last = record("m1", BODY);
    last.attributes
        .insert("ApproximateReceiveCount".into(), "5".into());
    let response = handler.handle(event(vec![last])).await.unwrap();
    assert!(failed(&response).is_empty());
    let sent = queue.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].reason(), Some("access_denied"));
}

#[tokio::test]
async fn warm_up_reports_a_missing_table() {
    let server = Scripted::start(vec![error(
        400,
        "ResourceNotFoundException",
        "Requested resource not found",
    )])
    .await;
    let result = server.store().warm_up(2, Duration::from_secs(2)).await;
    assert!(
        matches!(
            result,
            Err(StartupError::Store(StoreError::TableNotFound(_)))
        ),
        "{result:?}"
    );
}

#[tokio::test]
async fn a_refusal_that_is_not_about_the_record_leaves_it_to_a_later_receive() {
    use audit_aws::sqs::MemoryDeadLetterQueue;
    use audit_receiver::deadletter::FailureAttributes;

    // Given a proxy in front of DynamoDB that answers with its own page and no error code, a
    // code DynamoDB never sends, or DynamoDB refusing a key the table does not have (TABLE_NAME
    // names another table): the deployment's faults, none the record's.
    let refusals = [
        Reply::Json(400, "<html>400 Bad Request</html>".into()),
        Reply::Json(404, "<html>Not Found</html>".into()),
        error(400, "UnknownGatewayError", "the gateway refused the call"),
        error(
            400,
            "ValidationException",
            "One or more parameter values were invalid: Missing the key id in the item",
        ),
    ];
    for refusal in refusals {
        let server = Scripted::start(vec![refusal]).await;
        let queue = Arc::new(MemoryDeadLetterQueue::new());
        let handler = audit_receiver::Handler::new(server.store(), settings())
            .with_dead_letters(queue.clone());

        // When a record is received the first time: reported failed for SQS to deliver again,
        // not dead-lettered (a fixed deployment then writes it).
        let response = handler
            .handle(event(vec![record("m1", BODY)]))
            .await
            .unwrap();
        assert_eq!(failed(&response), ["m1"]);
        assert!(queue.sent().is_empty(), "{:?}", queue.sent());

        // On its last receive the function dead-letters it itself, with its transient reason.
        let mut last = record("m1", BODY);
        last.attributes
            .insert("ApproximateReceiveCount".into(), "5".into());
        let response = handler.handle(event(vec![last])).await.unwrap();
        assert!(failed(&response).is_empty());
        let sent = queue.sent();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].reason(), Some("store_unavailable"));
    }
}

#[tokio::test]
async fn a_bare_429_is_throttling_and_a_refusal_of_the_item_stays_permanent() {
    let result = put_once(Reply::Json(429, "Too Many Requests".into())).await;
    assert!(
        matches!(&result, Err(e @ StoreError::Throttled(_)) if e.is_retryable()),
        "{result:?}"
    );

    let result = put_once(error(
        400,
        "ValidationException",
        "One or more parameter values were invalid: An AttributeValue may not contain an empty string",
    ))
    .await;
    assert!(
        matches!(&result, Err(e @ StoreError::Rejected(_)) if !e.reason().is_transient()),
        "{result:?}"
    );
}
