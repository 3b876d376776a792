//! Owns the DynamoDB adapter: the conditional `PutItem` with ALL_OLD and the start-up check
//! through its wire (`Transport`), and what DynamoDB's answers mean as `StoreError`s, by the
//! shared classification (`crate::error`) and DynamoDB's own cases. Must not know SQS or batching.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{Map, Value};

use super::item::{found, put_item_body};
use super::outcome::{PutOutcome, StartupError, StoreError};
use super::port::Transport;
use super::wire::Wire;
use crate::error::{AwsError, CREDENTIALS_REFUSED, ErrorKind};
use audit_model::keys::{MAX_ITEM_BYTES, PARTITION_KEY, SORT_KEY};
use audit_model::message::AuditItem;

/// Writes audit items to one table, never overwriting.
/// `T` is the wire (`Transport`): `Wire` in production, a scripted one in tests.
#[derive(Debug, Clone)]
pub struct DynamoDbStore<T = Wire> {
    wire: T,
    table: String,
}

impl<T: Transport> DynamoDbStore<T> {
    pub fn new(wire: T, table: impl Into<String>) -> Self {
        Self {
            wire,
            table: table.into(),
        }
    }

    /// Runs during init, so that the first batch after a cold start does not pay TCP/TLS set-up:
    /// one `DescribeTable` call (a read-only metadata action), which finds a missing table (or a
    /// refused access) at start-up, and beside it `connections - 1` unsigned `GET /` probes, all
    /// at once, which leave that many open connections in the pool. Bounded by `within`.
    /// Returns how many connections answered; the `DescribeTable` call's error; or
    /// `StartupError::WrongTable` when the table's key schema is not the one the function
    /// writes (`key_schema_mismatch`).
    pub async fn warm_up(
        &self,
        connections: usize,
        within: Duration,
    ) -> Result<usize, StartupError> {
        let body = serde_json::json!({ "TableName": self.table }).to_string();
        let describe = self.call("DescribeTable", body.into_bytes());
        let probes = futures::future::join_all((1..connections).map(|_| self.wire.probe()));
        let (described, probed) =
            tokio::time::timeout(within, futures::future::join(describe, probes))
                .await
                .map_err(|_| {
                    StoreError::Unavailable(format!("no answer within {} ms", within.as_millis()))
                })?;
        match described {
            Ok(answer) => match key_schema_mismatch(&self.table, &answer) {
                Some(why) => Err(StartupError::WrongTable(why)),
                None => Ok(1 + probed.iter().filter(|p| p.is_ok()).count()),
            },
            Err(Failure::Error(error)) => Err(error.into()),
            Err(Failure::Exists(_)) => Err(StoreError::Rejected(
                "DescribeTable answered ConditionalCheckFailedException".into(),
            )
            .into()),
        }
    }

    /// Writes `item` unless an item with its key exists, never overwriting; an existing one is
    /// a duplicate or a conflict by the model's payload rule (`item::found`).
    pub async fn put_if_absent(&self, item: &AuditItem) -> Result<PutOutcome, StoreError> {
        let body = put_item_body(&self.table, item)?;
        match self.call("PutItem", body).await {
            Ok(_) => Ok(PutOutcome::Written),
            Err(Failure::Exists(Some(old))) => Ok(found(&old, item)),
            Err(Failure::Exists(None)) => Err(StoreError::Unverifiable),
            Err(Failure::Error(error)) => Err(error),
        }
    }

    /// One call; a 2xx answer is `Ok` with its body, anything else a `Failure`. A request refused
    /// for its time (signed more than the threshold off the service's clock as its answer's
    /// `Date` shows, judged by the correction it was signed with) is signed again at the
    /// service's time and sent once more, within this call: not one of the batch's retries, and
    /// whether this answer corrected the clock or a concurrent call's did. Refused credentials
    /// are fetched again for the next call; a refusal for the time never throws them away.
    async fn call(&self, operation: &str, body: Vec<u8>) -> Result<Bytes, Failure> {
        let body = Bytes::from(body);
        let mut signed_again = false;
        loop {
            let reply = self
                .wire
                .call(operation, body.clone())
                .await
                .map_err(|error| Failure::Error(StoreError::Unavailable(error.to_string())))?;
            if (200..300).contains(&reply.status) {
                return Ok(reply.body);
            }
            let verdict = classify(reply.status, reply.error_type.as_deref(), &reply.body);
            if verdict.clock_suspect && self.wire.correct_clock(&reply) {
                if !signed_again {
                    signed_again = true;
                    continue;
                }
                // Refused for its time again, just after being signed at the service's: a
                // clock that jumps. Once is enough; the credentials were not at fault.
                return Err(verdict.failure);
            }
            if verdict.credentials_refused {
                self.wire.forget_credentials();
            }
            return Err(verdict.failure);
        }
    }
}

/// What a `DescribeTable` answer says against the table, if anything: its key schema is not the
/// function's (`messageId` HASH and `auditTime` RANGE, both strings, as template.yaml defines
/// `AuditMessagesTable` and docs/deploy.md "Parameters" states). Every write to such a table is
/// refused (`Missing the key`), so the function would send every record to the dead-letter queue:
/// it refuses to start instead, naming both keys. An answer without a key schema (a stand-in's
/// `{}`) cannot be checked and passes.
fn key_schema_mismatch(table: &str, answer: &[u8]) -> Option<String> {
    let answer: Value = serde_json::from_slice(answer).ok()?;
    let described = answer.get("Table")?;
    let schema = described.get("KeySchema")?.as_array()?;
    let text = |value: &Value, name: &str| {
        value
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_owned()
    };
    let type_of = |attribute: &str| {
        described
            .get("AttributeDefinitions")
            .and_then(Value::as_array)
            .and_then(|all| {
                all.iter()
                    .find(|d| d.get("AttributeName").and_then(Value::as_str) == Some(attribute))
            })
            .map_or_else(|| "?".to_owned(), |d| text(d, "AttributeType"))
    };
    let mut found: Vec<(String, String, String)> = schema
        .iter()
        .map(|element| {
            let name = text(element, "AttributeName");
            let kind = text(element, "KeyType");
            let scalar = type_of(&name);
            (name, kind, scalar)
        })
        .collect();
    // HASH before RANGE, as the key is written.
    found.sort_by_key(|(_, kind, _)| kind != "HASH");
    let wanted = [(PARTITION_KEY, "HASH", "S"), (SORT_KEY, "RANGE", "S")];
    let same = found.len() == wanted.len()
        && found
            .iter()
            .zip(wanted)
            .all(|((n, k, t), (wn, wk, wt))| n == wn && k == wk && t == wt);
    if same {
        return None;
    }
    let said = |keys: &mut dyn Iterator<Item = (&str, &str, &str)>| {
        keys.map(|(name, kind, scalar)| format!("{name} ({kind}, {scalar})"))
            .collect::<Vec<_>>()
            .join(" + ")
    };
    let has = said(
        &mut found
            .iter()
            .map(|(n, k, t)| (n.as_str(), k.as_str(), t.as_str())),
    );
    let writes = said(&mut wanted.into_iter());
    Some(format!(
        "table {table} has key schema {has} but the function writes {writes}: point TABLE_NAME at the stack's AuditMessagesTable"
    ))
}

enum Failure {
    /// The condition failed: an item with this key exists (with its attributes, if returned).
    Exists(Option<Map<String, Value>>),
    Error(StoreError),
}

/// Answers that a request signed at the wrong time gets (DynamoDB says
/// `InvalidSignatureException: Signature expired`): the SDK's clock-skew codes, and the Java
/// SDK's. Each makes the client compare the answer's `Date` with its own clock, and sign again at
/// the service's time when it was more than 4 minutes off; otherwise it stands as it is.
const CLOCK_SKEW: [&str; 7] = [
    "InvalidSignatureException",
    "SignatureDoesNotMatch",
    "AuthFailure",
    "RequestTimeTooSkewed",
    "RequestExpired",
    "RequestInTheFuture",
    "AccessDeniedException",
];

/// What a non-2xx answer means.
struct Verdict {
    /// Exists, retryable, or final.
    failure: Failure,
    /// DynamoDB refused the credentials (`error::CREDENTIALS_REFUSED`): they are fetched again.
    credentials_refused: bool,
    /// The refusal may be a clock too far off: worth checking the answer's `Date`.
    clock_suspect: bool,
}

/// A non-2xx answer -> what the batch needs to know: exists, retryable, or final; and whether
/// the credentials or the clock may be at fault. DynamoDB's own cases (a failed condition with
/// the stored item, an item over the size limit) first; everything else by the shared
/// classification (`error::classify`), each kind worded as DynamoDB's answers always were.
fn classify(status: u16, error_type: Option<&str>, body: &[u8]) -> Verdict {
    // DynamoDB's error body (JSON 1.0 protocol): `__type` is `namespace#Code`; read field by
    // field so that a null or repeated message cannot hide the code or the old item.
    let body: Map<String, Value> = serde_json::from_slice(body).unwrap_or_default();
    let text = |names: &[&str]| {
        names
            .iter()
            .find_map(|name| body.get(*name).and_then(Value::as_str))
            .unwrap_or_default()
            .to_owned()
    };
    let kind = match error_type.filter(|t| !t.is_empty()) {
        Some(header) => header.to_owned(),
        None => text(&["__type"]),
    };
    // `com.amazonaws.dynamodb.v20120810#Code`, or `Code:http://…` in the header form.
    let code = kind.rsplit('#').next().unwrap_or_default();
    let code = code.split(':').next().unwrap_or_default();
    let message = text(&["message", "Message", "errorMessage"]);
    if code == "ConditionalCheckFailedException" {
        let old = body.get("Item").and_then(Value::as_object).cloned();
        return Verdict {
            failure: Failure::Exists(old),
            credentials_refused: false,
            clock_suspect: false,
        };
    }
    let error = AwsError::from_answer(status, code, &message);
    let error = match error.kind {
        ErrorKind::Rejected if code == "ValidationException" && message.contains("Item size") => {
            StoreError::ItemTooLarge(MAX_ITEM_BYTES + 1)
        }
        ErrorKind::Rejected if caused_by_the_item(code, &message) => {
            StoreError::Rejected(said(&error, status))
        }
        // Refused, but not for anything in the item: the table is not the function's, or a code
        // this adapter does not know (a new one, or a proxy's own). The same record may be
        // written once the deployment is right, so it must not be dead-lettered at its first
        // receive: it stays on the transient path (`store_unavailable`), where SQS delivers it
        // again and the function dead-letters it with its reason on its last receive.
        ErrorKind::Rejected => StoreError::Unavailable(format!(
            "{} (HTTP {status}; not a refusal of the item's content)",
            error.text
        )),
        ErrorKind::NotFound => StoreError::TableNotFound(message),
        ErrorKind::Throttled => StoreError::Throttled(named(code, status)),
        ErrorKind::Denied => StoreError::AccessDenied(said(&error, status)),
        ErrorKind::Unavailable | ErrorKind::TimedOut => {
            StoreError::Unavailable(if error.is(&CREDENTIALS_REFUSED) {
                format!("{code}: {message}")
            } else if code.is_empty() {
                // No error code: not DynamoDB's answer, but something's on the way (a proxy,
                // a gateway).
                format!("HTTP {status} with no error code")
            } else if crate::error::classify(Some(400), code) == ErrorKind::Unavailable {
                // The code alone says so, at a status that says nothing by itself
                // (InternalServerError, TransactionConflictException, RequestTimeout, …).
                code.to_owned()
            } else {
                // The status says so (a 5xx, or ServiceUnavailable, with whatever code came).
                format!("HTTP {status} {code}").trim_end().to_owned()
            })
        }
    };
    Verdict {
        failure: Failure::Error(error),
        credentials_refused: CREDENTIALS_REFUSED.contains(&code),
        clock_suspect: CLOCK_SKEW.contains(&code),
    }
}

/// DynamoDB's refusals that the item itself causes: sent again unchanged, it is refused again on
/// every receive, so the record is dead-lettered at once (`store_rejected`). A
/// `ValidationException` about the item (an attribute value, the nesting depth, a number); a
/// `SerializationException` (a request body DynamoDB could not read: the item's encoding). An
/// item over the size limit and a failed condition are DynamoDB's other content cases, read
/// before this.
const ITEM_REFUSALS: [&str; 2] = ["ValidationException", "SerializationException"];

/// Words of a `ValidationException` about the table rather than the item: its key schema, or an
/// index's key type, is not what the function writes (`TABLE_NAME` names another table). The
/// same item is written by the stack's table, so the refusal is the deployment's.
const TABLE_MISMATCH: [&str; 5] = [
    "Missing the key",
    "Type mismatch for key",
    "Type mismatch for Index Key",
    "does not match the schema",
    "required keys",
];

/// Whether a refusal with this code and message is the item's own doing.
fn caused_by_the_item(code: &str, message: &str) -> bool {
    ITEM_REFUSALS.contains(&code) && !TABLE_MISMATCH.iter().any(|words| message.contains(words))
}

/// The code, or the status where the answer had none.
fn named(code: &str, status: u16) -> String {
    if code.is_empty() {
        format!("HTTP {status}")
    } else {
        code.to_owned()
    }
}

/// `code: message` (or the code alone), or the status where the answer had no code.
fn said(error: &AwsError, status: u16) -> String {
    if error.code.is_empty() {
        format!("HTTP {status}")
    } else {
        error.text.clone()
    }
}

#[cfg(test)]
mod tests {
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
}
