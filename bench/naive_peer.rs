//! The naive Rust peer: the same job written the way the Lambda Rust runtime's SQS example and most
//! blog posts write it. Every record of the batch becomes one `put_item`, all sent at once with
//! `join_all` (no bound on concurrency), on the default multi-thread Tokio runtime, the default
//! allocator and the SDK's default configuration (standard retries). Failed records are reported
//! in `batchItemFailures`. No dead-lettering, no deadline handling, no duplicate/conflict split
//! beyond the condition: it is here to be measured, not deployed.
//!
//! `bench/load.rs` runs it as it runs the function: a process against the Runtime API stand-in.
//! Run any other way (`cargo bench` of every target), it says so and exits.

use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use aws_sdk_dynamodb::types::AttributeValue;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use std::collections::HashMap;

#[tokio::main]
async fn main() -> Result<(), Error> {
    if std::env::var_os("AWS_LAMBDA_RUNTIME_API").is_none() {
        println!("naive_peer: a Lambda function for bench/load.rs; nothing to run on its own");
        return Ok(());
    }
    let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let client = aws_sdk_dynamodb::Client::new(&config);
    let table = std::env::var("TABLE_NAME")?;
    let (client, table) = (&client, table.as_str());
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        let writes = event.payload.records.into_iter().map(|record| async move {
            let id = record.message_id.clone().unwrap_or_default();
            match put(client, table, record).await {
                Ok(()) => None,
                Err(error) => {
                    tracing::warn!(%error, id, "record failed");
                    Some(id)
                }
            }
        });
        let failed = futures::future::join_all(writes).await;
        let mut response = SqsBatchResponse::default();
        for id in failed.into_iter().flatten() {
            let mut failure = BatchItemFailure::default();
            failure.item_identifier = id;
            response.batch_item_failures.push(failure);
        }
        Ok::<_, Error>(response)
    }))
    .await
}

async fn put(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    record: SqsMessage,
) -> Result<(), Error> {
    let body: serde_json::Value = serde_json::from_str(record.body.as_deref().unwrap_or(""))?;
    let serde_json::Value::Object(mut body) = body else {
        return Err("not_an_object".into());
    };
    let text = match body.remove("auditText") {
        Some(serde_json::Value::String(text)) if !text.is_empty() => text,
        _ => return Err("invalid auditText".into()),
    };
    let sent = record
        .attributes
        .get("SentTimestamp")
        .cloned()
        .unwrap_or_default();
    let sent_at = millis_to_utc(&sent)?;
    let audit_time = match body.remove("auditTime") {
        Some(serde_json::Value::String(when)) => chrono::DateTime::parse_from_rfc3339(&when)?
            .with_timezone(&chrono::Utc)
            .format("%Y-%m-%dT%H:%M:%S%.3fZ")
            .to_string(),
        _ => sent_at.clone(),
    };
    let message_id = match body.remove("messageId") {
        Some(serde_json::Value::String(id)) => id,
        _ => record.message_id.clone().unwrap_or_default(),
    };
    let mut item = HashMap::from([
        ("messageId".to_owned(), AttributeValue::S(message_id)),
        ("auditTime".to_owned(), AttributeValue::S(audit_time)),
        ("auditText".to_owned(), AttributeValue::S(text)),
        (
            "sqsMessageId".to_owned(),
            AttributeValue::S(record.message_id.unwrap_or_default()),
        ),
        ("sentAt".to_owned(), AttributeValue::S(sent_at)),
        (
            "receiveCount".to_owned(),
            AttributeValue::N(
                record
                    .attributes
                    .get("ApproximateReceiveCount")
                    .cloned()
                    .unwrap_or_else(|| "1".into()),
            ),
        ),
        (
            "eventSource".to_owned(),
            AttributeValue::S(record.event_source_arn.unwrap_or_default()),
        ),
        (
            "receivedAt".to_owned(),
            AttributeValue::S(
                chrono::Utc::now()
                    .format("%Y-%m-%dT%H:%M:%S%.3fZ")
                    .to_string(),
            ),
        ),
    ]);
    if !body.is_empty() {
        item.insert(
            "extra".to_owned(),
            to_attribute(serde_json::Value::Object(body)),
        );
    }
    client
        .put_item()
        .table_name(table)
        .set_item(Some(item))
        .condition_expression("attribute_not_exists(messageId)")
        .return_values_on_condition_check_failure(
            aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure::AllOld,
        )
        .send()
        .await?;
    Ok(())
}

fn millis_to_utc(millis: &str) -> Result<String, Error> {
    let millis: i64 = millis.parse()?;
    let moment =
        chrono::DateTime::from_timestamp_millis(millis).ok_or("SentTimestamp out of range")?;
    Ok(moment.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
}

fn to_attribute(value: serde_json::Value) -> AttributeValue {
    match value {
        serde_json::Value::Null => AttributeValue::Null(true),
        serde_json::Value::Bool(b) => AttributeValue::Bool(b),
        serde_json::Value::Number(n) => AttributeValue::N(n.to_string()),
        serde_json::Value::String(s) => AttributeValue::S(s),
        serde_json::Value::Array(items) => {
            AttributeValue::L(items.into_iter().map(to_attribute).collect())
        }
        serde_json::Value::Object(fields) => AttributeValue::M(
            fields
                .into_iter()
                .map(|(k, v)| (k, to_attribute(v)))
                .collect(),
        ),
    }
}
