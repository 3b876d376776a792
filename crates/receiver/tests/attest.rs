//! The attestation against moto's KMS and DynamoDB over HTTP (docs/archive.md "Items attested at
//! birth"): the run's key certified by one KMS Sign (RAW, ECDSA_SHA_256) with a key as the
//! template defines `AuditAttestationKey`, a batch written through the function, and each stored
//! item checked from its line alone with the key's public half from `GetPublicKey`; an item put
//! behind the function is not attested.

mod support;

use audit_aws::config::ClientOptions;
use audit_aws::kms::KmsKey;
use audit_model::attest::{NotAttested, ReceiverKey, check};
use audit_model::line::plain_map;
use audit_receiver::attest::Uncertified;
use audit_testkit::endpoint::sdk_config;
use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Map, Value, json};
use support::*;

/// An attribute as DynamoDB's JSON, as a stream image carries it.
fn dynamodb_json(value: &AttributeValue) -> Value {
    match value {
        AttributeValue::S(s) => json!({"S": s}),
        AttributeValue::N(n) => json!({"N": n}),
        AttributeValue::Bool(b) => json!({"BOOL": b}),
        AttributeValue::Null(_) => json!({"NULL": true}),
        AttributeValue::M(m) => {
            json!({"M": m.iter().map(|(k, v)| (k.clone(), dynamodb_json(v))).collect::<Map<_, _>>()})
        }
        AttributeValue::L(l) => json!({"L": l.iter().map(dynamodb_json).collect::<Vec<_>>()}),
        other => panic!("the function writes no {other:?}"),
    }
}

/// The stored item's line, as the archive and `auditctl query --format jsonl` give it.
fn line(item: &Item) -> Map<String, Value> {
    let image: Map<String, Value> = item
        .iter()
        .map(|(k, v)| (k.clone(), dynamodb_json(v)))
        .collect();
    plain_map(&image)
}

#[tokio::test]
async fn items_written_by_the_function_check_under_the_kms_key_and_one_put_behind_it_does_not() {
    let moto = Moto::start();
    create_table(&moto.client(), TABLE).await;
    let kms_client =
        audit_aws::config::kms(&sdk_config(&moto.endpoint), ClientOptions::AS_CONFIGURED);
    let arn = kms_client
        .create_key()
        .key_spec(aws_sdk_kms::types::KeySpec::EccNistP256)
        .key_usage(aws_sdk_kms::types::KeyUsageType::SignVerify)
        .send()
        .await
        .unwrap()
        .key_metadata
        .and_then(|m| m.arn)
        .unwrap();
    let kms = KmsKey::new(kms_client, &arn);
    let run = Uncertified::generate(1_795_000_000_000).unwrap();
    let signature = kms.sign(&run.statement()).await.unwrap();
    let handler =
        handler(&moto.endpoint, TABLE, settings()).with_attester(run.certified(signature));

    let records = (0..4)
        .map(|i| {
            record(
                &format!("sqs-{i}"),
                &format!(r#"{{"auditText":"paid","actor":"alice","amount":12.50,"n":{i}}}"#),
            )
        })
        .collect();
    let response = handler.handle(event(records)).await.unwrap();
    assert!(failed(&response).is_empty());

    let key = ReceiverKey::from_der(&kms.public_key().await.unwrap().der);
    let items = scan(&moto.client(), TABLE).await;
    assert_eq!(items.len(), 4);
    for item in &items {
        let attestation = check(&line(item), &key).unwrap();
        assert_eq!(attestation.size, 4);
    }
    // Copied field for field by someone with dynamodb:PutItem, under another key: not attested.
    let mut forged = items[0].clone();
    forged.insert("messageId".into(), AttributeValue::S("forged-1".into()));
    forged.remove("attestation");
    assert_eq!(
        check(&line(&forged), &key).unwrap_err(),
        NotAttested::Missing
    );
    forged.insert("attestation".into(), items[1]["attestation"].clone());
    assert_eq!(
        check(&line(&forged), &key).unwrap_err(),
        NotAttested::Signature
    );
}
