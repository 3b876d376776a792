//! Tests of the DynamoDB adapter: what DynamoDB's answers mean as `StoreError`s, and the conditional write through a scripted `Transport`.
//! Unit tests: they reach the module's private items through `use super::*`; no I/O.

use super::*;

#[test]
fn answers_map_to_retryable_and_final_errors() {
    let error = |status: u16, code: &str, message: &str| {
        let body = format!(
            r#"{{"__type":"com.amazonaws.dynamodb.v20120810#{code}","message":"{message}"}}"#
        );
        let verdict = classify(status, None, body.as_bytes());
        assert_eq!(
            verdict.credentials_refused,
            CREDENTIALS_REFUSED.contains(&code),
            "{code}"
        );
        match verdict.failure {
            Failure::Error(error) => error,
            Failure::Exists(_) => panic!("{code} is not a condition failure"),
        }
    };
    assert!(matches!(
        error(400, "ThrottlingException", "x"),
        StoreError::Throttled(_)
    ));
    for code in CREDENTIALS_REFUSED {
        assert!(
            matches!(error(400, code, "x"), e @ StoreError::Unavailable(_) if e.is_retryable()),
            "{code}"
        );
    }
    for code in ["TransactionConflictException", "RequestTimeout"] {
        assert!(error(400, code, "x").is_retryable(), "{code}");
    }
    // A null message, or both spellings of it, still leave the code and the old item readable.
    let both = br#"{"__type":"x#ConditionalCheckFailedException","message":null,"Message":"m","Item":{"auditText":{"S":"a"}}}"#;
    assert!(
        matches!(classify(400, None, both).failure, Failure::Exists(Some(item)) if item.contains_key("auditText"))
    );
    assert_eq!(
        error(
            400,
            "ValidationException",
            "Item size has exceeded the maximum allowed size"
        ),
        StoreError::ItemTooLarge(MAX_ITEM_BYTES + 1)
    );
    // The error type may come in the x-amzn-ErrorType header, with no JSON body.
    assert!(matches!(
        classify(400, Some("ThrottlingException:http://internal.amazon.com/"), b"").failure,
        Failure::Error(StoreError::Throttled(code)) if code == "ThrottlingException"
    ));
}

#[test]
fn only_refusals_of_the_items_content_are_permanent() {
    let verdict = |status: u16, code: &str, message: &str| {
        let body = format!(
            r#"{{"__type":"com.amazonaws.dynamodb.v20120810#{code}","message":"{message}"}}"#
        );
        match classify(status, None, body.as_bytes()).failure {
            Failure::Error(error) => error,
            Failure::Exists(_) => panic!("{code} is not a condition failure"),
        }
    };
    // The item's own content: the same on every receive.
    for (code, message) in [
        (
            "ValidationException",
            "One or more parameter values were invalid: An AttributeValue may not contain an empty string",
        ),
        (
            "ValidationException",
            "Nesting Levels have exceeded supported limits",
        ),
        (
            "SerializationException",
            "NUMBER_VALUE cannot be converted to String",
        ),
    ] {
        let error = verdict(400, code, message);
        assert!(
            matches!(error, StoreError::Rejected(_)),
            "{code}: {message}: {error:?}"
        );
        assert!(!error.reason().is_transient());
    }
    // The table is not the function's: the deployment's fault, transient.
    for message in [
        "One or more parameter values were invalid: Missing the key id in the item",
        "One or more parameter values were invalid: Type mismatch for key messageId expected: N actual: S",
        "One or more parameter values were invalid: Type mismatch for Index Key auditBucket Expected: N Actual: S IndexName: byAuditTime",
    ] {
        let error = verdict(400, "ValidationException", message);
        assert_eq!(
            error.reason(),
            audit_model::Reason::StoreUnavailable,
            "{message}"
        );
    }
    // A code this adapter does not know (a new one, or a proxy's own): not the item's.
    let error = verdict(400, "SomeGatewayError", "bad gateway config");
    assert_eq!(error.reason(), audit_model::Reason::StoreUnavailable);
    assert!(error.to_string().contains("SomeGatewayError"), "{error}");
    // No error code at all (a proxy's page): not DynamoDB judging the item.
    for status in [400, 404, 413] {
        let error = match classify(status, None, b"<html>Bad Request</html>").failure {
            Failure::Error(error) => error,
            Failure::Exists(_) => panic!("not a condition failure"),
        };
        assert_eq!(
            error,
            StoreError::Unavailable(format!("HTTP {status} with no error code"))
        );
    }
    // A bare 429 is a request to slow down.
    assert!(matches!(
        classify(429, None, b"Too Many Requests").failure,
        Failure::Error(StoreError::Throttled(why)) if why == "HTTP 429"
    ));
}

#[test]
fn access_refused_by_a_policy_is_access_denied_and_not_retried_now() {
    let classify_code = |status: u16, code: &str, message: &str| {
        let body = format!(
            r#"{{"__type":"com.amazonaws.dynamodb.v20120810#{code}","message":"{message}"}}"#
        );
        classify(status, None, body.as_bytes())
    };
    let kms = "KMS key access denied error: com.amazonaws.services.kms.model.AWSKMSException: \
               The ciphertext refers to a customer master key that does not exist, does not \
               exist in this region, or you are not allowed to access.";
    let cases = [
        (
            400,
            "AccessDeniedException",
            "User: arn:aws:sts::1:assumed-role/r/f is not authorized to perform: dynamodb:PutItem on resource: arn:aws:dynamodb:us-east-1:1:table/AuditMessages because no identity-based policy allows the dynamodb:PutItem action",
        ),
        (
            400,
            "AccessDeniedException",
            "... with an explicit deny in a service control policy",
        ),
        (
            400,
            "AccessDeniedException",
            "... because no VPC endpoint policy allows the dynamodb:PutItem action",
        ),
        (400, "AccessDeniedException", kms),
        (400, "AccessDenied", "Access Denied"),
        (403, "NotAuthorized", "not authorized"),
        (400, "KMSAccessDeniedException", "x"),
        (400, "KMSDisabledException", "x"),
        (400, "KMSInvalidStateException", "x"),
        (400, "KMSNotFoundException", "x"),
    ];
    for (status, code, message) in cases {
        let verdict = classify_code(status, code, message);
        let Failure::Error(error) = verdict.failure else {
            panic!("{code} is not a condition failure");
        };
        assert!(
            matches!(error, StoreError::AccessDenied(_)),
            "{code}: {error:?}"
        );
        assert_eq!(error.reason(), audit_model::Reason::AccessDenied);
        assert!(!error.is_retryable(), "{code} is not hammered");
        assert!(error.reason().is_transient(), "{code} drains once fixed");
        assert!(!verdict.credentials_refused, "{code} keeps the credentials");
    }
    // A bare 403 (no error code) says the same.
    assert!(matches!(
        classify(403, None, b"<html>Forbidden</html>").failure,
        Failure::Error(StoreError::AccessDenied(why)) if why == "HTTP 403"
    ));
    // Refused credentials stay what they were: retryable, fetched again.
    for code in CREDENTIALS_REFUSED {
        let verdict = classify_code(400, code, "x");
        assert!(verdict.credentials_refused, "{code}");
        assert!(
            matches!(verdict.failure, Failure::Error(e @ StoreError::Unavailable(_)) if e.is_retryable()),
            "{code}"
        );
    }
}

#[test]
fn a_table_keyed_otherwise_is_named_and_one_keyed_as_the_function_writes_passes() {
    let described = |keys: &str, definitions: &str| {
        format!(
            r#"{{"Table":{{"TableName":"T","KeySchema":[{keys}],"AttributeDefinitions":[{definitions}]}}}}"#
        )
    };
    let right = described(
        r#"{"AttributeName":"auditTime","KeyType":"RANGE"},{"AttributeName":"messageId","KeyType":"HASH"}"#,
        r#"{"AttributeName":"messageId","AttributeType":"S"},{"AttributeName":"auditTime","AttributeType":"S"},{"AttributeName":"auditBucket","AttributeType":"S"}"#,
    );
    assert_eq!(key_schema_mismatch("T", right.as_bytes()), None);
    // An answer that says nothing of the key (a stand-in's `{}`) cannot be checked.
    assert_eq!(key_schema_mismatch("T", b"{}"), None);
    assert_eq!(key_schema_mismatch("T", b"not json"), None);

    let id = described(
        r#"{"AttributeName":"id","KeyType":"HASH"}"#,
        r#"{"AttributeName":"id","AttributeType":"S"}"#,
    );
    assert_eq!(
        key_schema_mismatch("Other", id.as_bytes()).as_deref(),
        Some(
            "table Other has key schema id (HASH, S) but the function writes messageId (HASH, S) + auditTime (RANGE, S): point TABLE_NAME at the stack's AuditMessagesTable"
        )
    );
    // The right names with another type, or without the sort key, are not the table either.
    let numeric = described(
        r#"{"AttributeName":"messageId","KeyType":"HASH"},{"AttributeName":"auditTime","KeyType":"RANGE"}"#,
        r#"{"AttributeName":"messageId","AttributeType":"S"},{"AttributeName":"auditTime","AttributeType":"N"}"#,
    );
    let why = key_schema_mismatch("T", numeric.as_bytes()).unwrap();
    assert!(
        why.contains("has key schema messageId (HASH, S) + auditTime (RANGE, N) but"),
        "{why}"
    );
    let hash_only = described(
        r#"{"AttributeName":"messageId","KeyType":"HASH"}"#,
        r#"{"AttributeName":"messageId","AttributeType":"S"}"#,
    );
    assert!(key_schema_mismatch("T", hash_only.as_bytes()).is_some());
}

#[test]
fn only_refusals_that_a_skewed_clock_causes_make_the_clock_suspect() {
    let suspect = |code: &str| {
        let body = format!(r#"{{"__type":"x#{code}","message":"m"}}"#);
        classify(400, None, body.as_bytes()).clock_suspect
    };
    for code in [
        "InvalidSignatureException",
        "RequestTimeTooSkewed",
        "AccessDeniedException",
    ] {
        assert!(suspect(code), "{code}");
    }
    for code in [
        "ExpiredTokenException",
        "UnrecognizedClientException",
        "ValidationException",
        "ThrottlingException",
        "ConditionalCheckFailedException",
    ] {
        assert!(!suspect(code), "{code}");
    }
}

mod through_the_port {
    //! The store's logic over a scripted wire: no socket, no HTTP.

    use std::collections::VecDeque;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::super::super::item::tests::{item, stored};
    use super::super::super::memory::MemoryStore;
    use super::*;
    use crate::dynamodb::port::{Reply, WireError};

    /// Answers calls from a script (then `200 {}`), counting what the store asked of it. Keeps
    /// a signing clock as the wire does: each reply carries the correction its call was
    /// signed with.
    #[derive(Default)]
    struct Scripted {
        replies: Mutex<VecDeque<Result<Reply, WireError>>>,
        operations: Mutex<Vec<String>>,
        skew_ms: std::sync::atomic::AtomicI64,
        clock_corrections: AtomicUsize,
        credentials_forgotten: AtomicUsize,
    }

    impl Scripted {
        fn answering(replies: impl IntoIterator<Item = Result<Reply, WireError>>) -> Self {
            Self {
                replies: Mutex::new(replies.into_iter().collect()),
                ..Self::default()
            }
        }

        fn calls(&self) -> usize {
            self.operations.lock().unwrap().len()
        }
    }

    impl Transport for Scripted {
        async fn call(&self, operation: &str, _body: Bytes) -> Result<Reply, WireError> {
            self.operations.lock().unwrap().push(operation.to_owned());
            let signed_skew_ms = self.skew_ms.load(Ordering::SeqCst);
            let next = self.replies.lock().unwrap().pop_front();
            next.unwrap_or_else(|| Ok(answer(200, "{}")))
                .map(|reply| Reply {
                    signed_skew_ms,
                    ..reply
                })
        }

        async fn probe(&self) -> Result<(), WireError> {
            Ok(())
        }

        /// Judges and corrects a skew over the signer's threshold, as the wire does.
        fn correct_clock(&self, reply: &Reply) -> bool {
            let Some(measured) = reply.skew_ms else {
                return false;
            };
            if measured.abs_diff(reply.signed_skew_ms) <= 240_000 {
                return false;
            }
            let applied = self.skew_ms.load(Ordering::SeqCst);
            if measured.abs_diff(applied) > 240_000 {
                self.skew_ms.store(measured, Ordering::SeqCst);
                self.clock_corrections.fetch_add(1, Ordering::SeqCst);
            }
            true
        }

        fn forget_credentials(&self) {
            self.credentials_forgotten.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn answer(status: u16, body: &str) -> Reply {
        Reply {
            status,
            body: Bytes::from(body.to_owned()),
            ..Reply::default()
        }
    }

    fn refused(code: &str, skew_ms: Option<i64>) -> Result<Reply, WireError> {
        let body = format!(r#"{{"__type":"x#{code}","message":"m"}}"#);
        Ok(Reply {
            skew_ms,
            ..answer(400, &body)
        })
    }

    /// DynamoDB's answer to a write whose key exists, with the stored item of `body`.
    fn exists(body: Option<&str>) -> Result<Reply, WireError> {
        let old = body.map(|b| format!(r#","Item":{}"#, Value::Object(stored(b))));
        let text = format!(
            r#"{{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed"{}}}"#,
            old.unwrap_or_default()
        );
        Ok(answer(400, &text))
    }

    fn over(wire: Scripted) -> DynamoDbStore<Scripted> {
        DynamoDbStore::new(wire, "AuditMessages")
    }

    const BODY: &str = r#"{"auditText":"login","auditTime":"2026-11-22T10:00:00Z","n":1.0}"#;

    #[tokio::test]
    async fn an_existing_key_is_a_duplicate_or_a_conflict_by_the_payload_rule() {
        let other = r#"{"auditText":"logout","auditTime":"2026-11-22T10:00:00Z","n":1.0}"#;
        let store = over(Scripted::answering([
            Ok(answer(200, "{}")),
            exists(Some(BODY)),
            exists(Some(other)),
            exists(None),
        ]));
        let new = item(BODY);
        assert_eq!(store.put_if_absent(&new).await, Ok(PutOutcome::Written));
        assert_eq!(store.put_if_absent(&new).await, Ok(PutOutcome::Duplicate));
        assert_eq!(store.put_if_absent(&new).await, Ok(PutOutcome::Conflict));
        assert_eq!(
            store.put_if_absent(&new).await,
            Err(StoreError::Unverifiable)
        );
    }

    #[tokio::test]
    async fn a_refusal_for_a_skewed_clock_is_signed_again_once() {
        let skewed = Some(600_000);
        let wire = Scripted::answering([refused("InvalidSignatureException", skewed)]);
        let store = over(wire);
        assert_eq!(
            store.put_if_absent(&item(BODY)).await,
            Ok(PutOutcome::Written)
        );
        assert_eq!(store.wire.calls(), 2);
        assert_eq!(store.wire.credentials_forgotten.load(Ordering::SeqCst), 0);

        // Refused again after the correction: the error stands, the credentials are fetched
        // again for the next call.
        let wire = Scripted::answering([
            refused("InvalidSignatureException", skewed),
            refused("InvalidSignatureException", skewed),
        ]);
        let store = over(wire);
        assert!(matches!(
            store.put_if_absent(&item(BODY)).await,
            Err(e @ StoreError::Unavailable(_)) if e.is_retryable()
        ));
        assert_eq!(store.wire.calls(), 2);
        assert_eq!(store.wire.clock_corrections.load(Ordering::SeqCst), 1);
        assert_eq!(store.wire.credentials_forgotten.load(Ordering::SeqCst), 1);

        // A refusal with the clock right is not sent again.
        let store = over(Scripted::answering([refused(
            "InvalidSignatureException",
            Some(1_000),
        )]));
        assert!(store.put_if_absent(&item(BODY)).await.is_err());
        assert_eq!(store.wire.calls(), 1);

        // Refused for its time again after the correction (a clock that jumps): signed again
        // once only, and the credentials, not at fault, are kept.
        let store = over(Scripted::answering([
            refused("InvalidSignatureException", skewed),
            refused("InvalidSignatureException", Some(1_200_000)),
        ]));
        assert!(store.put_if_absent(&item(BODY)).await.is_err());
        assert_eq!(store.wire.calls(), 2);
        assert_eq!(store.wire.credentials_forgotten.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_lost_exchange_is_unavailable_and_an_oversized_item_never_leaves() {
        let store = over(Scripted::answering([Err(WireError::Connect)]));
        assert_eq!(
            store.put_if_absent(&item(BODY)).await,
            Err(StoreError::Unavailable("connection failed".into()))
        );
        let large = format!(
            r#"{{"auditText":"{}","auditTime":"2026-11-22T10:00:00Z"}}"#,
            "x".repeat(MAX_ITEM_BYTES)
        );
        assert!(matches!(
            store.put_if_absent(&item(&large)).await,
            Err(StoreError::ItemTooLarge(_))
        ));
        assert!(matches!(
            MemoryStore::new().put_if_absent(&item(&large)).await,
            Err(StoreError::ItemTooLarge(_))
        ));
        assert_eq!(store.wire.calls(), 1);
    }

    #[tokio::test]
    async fn the_twin_decides_as_the_adapter_does() {
        let time = r#""auditTime":"2026-11-22T10:00:00Z""#;
        let pairs = [
            (r#""auditText":"x","n":1.0"#, r#""auditText":"x","n":1"#),
            (r#""auditText":"x","n":1.0"#, r#""auditText":"x","n":2"#),
            (r#""auditText":"x""#, r#""auditText":"y""#),
            (
                r#""auditText":"x","m":{"a":[1,"b",null]}"#,
                r#""auditText":"x","m":{"a":[1.0,"b",null]}"#,
            ),
            (
                r#""auditText":"x","m":{"a":[1]}"#,
                r#""auditText":"x","m":{"a":[1,2]}"#,
            ),
            (r#""auditText":"x""#, r#""auditText":"x","n":1"#),
            (
                r#""action":"a","actor":"alice""#,
                r#""action":"a","actor":"bob""#,
            ),
            (
                r#""action":"a","outcome":"success""#,
                r#""action":"a","outcome":"failure""#,
            ),
            (
                r#""action":"a","sourceIp":"2001:DB8::1""#,
                r#""action":"a","sourceIp":"2001:db8::1""#,
            ),
        ];
        for (first, second) in pairs {
            let (first, second) = (
                format!("{{{first},{time}}}"),
                format!("{{{second},{time}}}"),
            );
            let twin = MemoryStore::new();
            twin.insert(item(&first));
            let by_twin = twin.put_if_absent(&item(&second)).await;
            let adapter = over(Scripted::answering([exists(Some(&first))]));
            let by_adapter = adapter.put_if_absent(&item(&second)).await;
            assert_eq!(by_twin, by_adapter, "{first} then {second}");
            assert!(by_twin.is_ok(), "{first} then {second}");
        }
    }
}
