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
mod tests;
