//! The structured fields (actor, action, resource, outcome, sourceIp) and the two envelopes
//! (CloudEvents 1.0 structured mode, EventBridge), through the public parse, hostile inputs
//! included: every invalid body gets its reason, and no detail quotes a value.

use audit_model::message::{AuditMessage, EventOutcome, InvalidMessage, canonical_time};
use serde_json::{Value, json};

const SENT: &str = "1795348800123"; // 2026-11-22T12:00:00.123Z

fn parse(body: &str) -> Result<AuditMessage, InvalidMessage> {
    let sent = audit_model::message::parse_sent_timestamp(Some(SENT));
    AuditMessage::parse(Some(body), sent)
}

fn parse_json(body: Value) -> Result<AuditMessage, InvalidMessage> {
    parse(&body.to_string())
}

fn reason(body: Value) -> &'static str {
    match parse_json(body.clone()) {
        Ok(_) => panic!("{body} was accepted"),
        Err(error) => error.code(),
    }
}

#[test]
fn action_alone_is_an_event_and_neither_text_nor_action_is_not() {
    let message = parse_json(json!({"action": "user.login", "actor": "alice"})).unwrap();
    assert_eq!(message.audit_text, None);
    assert_eq!(message.fields.action.as_deref(), Some("user.login"));
    assert_eq!(message.fields.actor.as_deref(), Some("alice"));
    assert!(
        parse_json(json!({"auditText": null, "action": "a"}))
            .unwrap()
            .audit_text
            .is_none()
    );
    assert_eq!(reason(json!({"actor": "alice"})), "missing_audit_text");
    assert_eq!(reason(json!({"auditText": null})), "missing_audit_text");
    assert_eq!(
        reason(json!({"auditText": "", "action": "a"})),
        "empty_audit_text"
    );
}

#[test]
fn structured_fields_are_fields_never_extra() {
    let message = parse_json(json!({
        "auditText": "x", "actor": "alice", "action": "invoice.delete",
        "resource": "invoice/4711", "outcome": "failure", "sourceIp": "203.0.113.7",
        "ticket": "T-1"
    }))
    .unwrap();
    let f = &message.fields;
    assert_eq!(f.actor.as_deref(), Some("alice"));
    assert_eq!(f.action.as_deref(), Some("invoice.delete"));
    assert_eq!(f.resource.as_deref(), Some("invoice/4711"));
    assert_eq!(f.outcome, Some(EventOutcome::Failure));
    assert_eq!(f.source_ip.unwrap().to_string(), "203.0.113.7");
    assert_eq!(message.extra.keys().collect::<Vec<_>>(), ["ticket"]);
}

#[test]
fn lengths_are_counted_in_characters_within_their_bounds() {
    for (field, max) in [("actor", 1024), ("action", 256), ("resource", 1024)] {
        let fits = "é".repeat(max); // 2 bytes each: characters count, not bytes
        let body = json!({"auditText": "x", field: fits});
        assert!(parse_json(body).is_ok(), "{field} of {max} characters");
        let over = "a".repeat(max + 1);
        assert_eq!(
            reason(json!({"auditText": "x", field: over})),
            "invalid_field_value",
            "{field}"
        );
        assert_eq!(
            reason(json!({"auditText": "x", field: ""})),
            "invalid_field_value",
            "{field} empty"
        );
    }
    // A megabyte of actor is refused, not stored and not echoed.
    let huge = "a".repeat(1 << 20);
    let error = parse_json(json!({"auditText": "x", "actor": huge})).unwrap_err();
    assert_eq!(error.code(), "invalid_field_value");
    assert!(error.to_string().len() < 200);
}

#[test]
fn a_wrong_type_at_every_field_is_invalid_field_type() {
    for field in [
        "auditText",
        "auditTime",
        "messageId",
        "actor",
        "action",
        "resource",
        "outcome",
        "sourceIp",
    ] {
        for wrong in [json!(42), json!(true), json!(["a"]), json!({"a": 1})] {
            let mut body =
                json!({"auditText": "x", "action": "a", "auditTime": "2026-11-22T10:00:00Z"});
            body[field] = wrong.clone();
            assert_eq!(reason(body), "invalid_field_type", "{field} = {wrong}");
        }
    }
}

#[test]
fn outcome_is_one_of_three_words() {
    for (text, outcome) in [
        ("success", EventOutcome::Success),
        ("failure", EventOutcome::Failure),
        ("unknown", EventOutcome::Unknown),
    ] {
        let message = parse_json(json!({"action": "a", "outcome": text})).unwrap();
        assert_eq!(message.fields.outcome, Some(outcome));
    }
    for wrong in ["SUCCESS", "ok", "", "failed"] {
        assert_eq!(
            reason(json!({"action": "a", "outcome": wrong})),
            "invalid_field_value"
        );
    }
}

#[test]
fn source_ips_are_stored_in_canonical_form() {
    for (sent, stored) in [
        ("192.0.2.1", "192.0.2.1"),
        ("2001:DB8::1", "2001:db8::1"),
        ("2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1"),
        ("::1", "::1"),
        // IPv4-mapped IPv6 keeps its RFC 5952 form.
        ("::FFFF:192.0.2.1", "::ffff:192.0.2.1"),
    ] {
        let message = parse_json(json!({"action": "a", "sourceIp": sent})).unwrap();
        assert_eq!(
            message.fields.source_ip.unwrap().to_string(),
            stored,
            "{sent}"
        );
    }
    for wrong in [
        "fe80::1%eth0", // a zone id is local to the host that saw it, not an address
        "192.0.2.1:443",
        "[2001:db8::1]",
        "010.0.0.1",
        "256.0.0.1",
        "example.com",
        "",
        " 192.0.2.1",
    ] {
        assert_eq!(
            reason(json!({"action": "a", "sourceIp": wrong})),
            "invalid_field_value",
            "{wrong:?}"
        );
    }
}

#[test]
fn no_detail_quotes_the_value_it_refuses() {
    let secret = "alice@example.com-secret";
    for body in [
        json!({"action": "a", "actor": format!("{secret}{}", "x".repeat(2000))}),
        json!({"action": "a", "outcome": secret}),
        json!({"action": "a", "sourceIp": secret}),
        json!({"specversion": "0.3", "id": secret, "source": "s", "type": "t"}),
    ] {
        let error = parse_json(body).unwrap_err();
        assert!(!error.to_string().contains(secret), "{error}");
    }
}

fn cloud_event() -> Value {
    json!({
        "specversion": "1.0",
        "id": "A234-1234-1234",
        "source": "https://billing.example.com/invoices",
        "type": "com.example.invoice.deleted",
        "subject": "invoice/4711",
        "time": "2026-11-22T12:00:00.123456+02:00",
        "datacontenttype": "application/json",
        "actor": "alice",
        "outcome": "success",
        "sourceip": "2001:DB8::7",
        "tenant": "acme",
        // From text: json!'s literal would go through f64 and lose the trailing zero.
        "data": serde_json::from_str::<Value>(r#"{"amount": 12.50, "currency": "EUR"}"#).unwrap()
    })
}

#[test]
fn a_cloud_event_maps_to_the_fields_and_keeps_everything_else() {
    let message = parse_json(cloud_event()).unwrap();
    assert_eq!(
        message.producer_message_id.as_deref(),
        Some("https://billing.example.com/invoices#A234-1234-1234")
    );
    assert_eq!(
        canonical_time(message.audit_time),
        "2026-11-22T10:00:00.123Z"
    );
    let f = &message.fields;
    assert_eq!(f.action.as_deref(), Some("com.example.invoice.deleted"));
    assert_eq!(f.resource.as_deref(), Some("invoice/4711"));
    assert_eq!(f.actor.as_deref(), Some("alice"));
    assert_eq!(f.outcome, Some(EventOutcome::Success));
    assert_eq!(f.source_ip.unwrap().to_string(), "2001:db8::7");
    assert_eq!(message.audit_text, None);
    let mut keys: Vec<&str> = message.extra.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["data", "datacontenttype", "specversion", "tenant"]);
    assert_eq!(message.extra["data"]["amount"].to_string(), "12.50");
}

#[test]
fn a_cloud_event_with_data_base64_keeps_it_as_sent() {
    let mut event = cloud_event();
    event.as_object_mut().unwrap().remove("data");
    event["data_base64"] = json!("aGVsbG8gd29ybGQ=");
    let message = parse_json(event).unwrap();
    assert_eq!(message.extra["data_base64"], "aGVsbG8gd29ybGQ=");
}

#[test]
fn a_cloud_event_that_is_not_1_0_or_lacks_its_attributes_is_an_invalid_envelope() {
    for (change, value) in [
        ("specversion", json!("0.3")),
        ("specversion", json!(1.0)),
        ("specversion", json!(null)),
        ("id", json!(7)),
        ("source", json!(null)),
        ("type", json!(["t"])),
    ] {
        let mut event = cloud_event();
        event[change] = value.clone();
        assert_eq!(reason(event), "invalid_envelope", "{change} = {value}");
    }
    for missing in ["id", "source", "type"] {
        let mut event = cloud_event();
        event.as_object_mut().unwrap().remove(missing);
        assert_eq!(reason(event), "invalid_envelope", "without {missing}");
    }
}

#[test]
fn a_cloud_event_obeys_the_field_rules_of_what_it_maps() {
    let mut event = cloud_event();
    event.as_object_mut().unwrap().remove("time");
    assert_eq!(reason(event), "message_id_without_audit_time");
    let mut event = cloud_event();
    event["subject"] = json!(4711);
    assert_eq!(reason(event), "invalid_field_type");
    let mut event = cloud_event();
    event["sourceip"] = json!("not an address");
    assert_eq!(reason(event), "invalid_field_value");
    let mut event = cloud_event();
    event["time"] = json!("2026-11-22T12:00:00");
    assert_eq!(reason(event), "audit_time_without_offset");
    let mut event = cloud_event();
    event["id"] = json!("x".repeat(300));
    assert_eq!(reason(event), "invalid_message_id");
}

fn custom_event_bridge() -> Value {
    json!({
        "version": "0",
        "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
        "detail-type": "Invoice Deleted",
        "source": "com.example.billing",
        "account": "111122223333",
        "time": "2026-11-22T12:00:00Z",
        "region": "eu-west-1",
        "resources": ["arn:aws:example:eu-west-1:111122223333:invoice/4711"],
        "detail": {"invoice": "4711", "by": "alice"}
    })
}

#[test]
fn an_event_bridge_event_maps_id_time_type_and_first_resource() {
    let message = parse_json(custom_event_bridge()).unwrap();
    assert_eq!(
        message.producer_message_id.as_deref(),
        Some("6a7e8feb-b491-4cf7-a9f1-bf3703467718")
    );
    assert_eq!(
        canonical_time(message.audit_time),
        "2026-11-22T12:00:00.000Z"
    );
    let f = &message.fields;
    assert_eq!(f.action.as_deref(), Some("Invoice Deleted"));
    assert_eq!(
        f.resource.as_deref(),
        Some("arn:aws:example:eu-west-1:111122223333:invoice/4711")
    );
    assert_eq!(f.actor, None);
    let mut keys: Vec<&str> = message.extra.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "account",
            "detail",
            "region",
            "resources",
            "source",
            "version"
        ]
    );
}

#[test]
fn an_event_bridge_event_without_resources_has_no_resource() {
    let mut event = custom_event_bridge();
    event.as_object_mut().unwrap().remove("resources");
    assert_eq!(parse_json(event.clone()).unwrap().fields.resource, None);
    event["resources"] = json!([]);
    assert_eq!(parse_json(event).unwrap().fields.resource, None);
}

fn cloudtrail_event(source_ip: &str) -> Value {
    json!({
        "version": "0",
        "id": "36eb8523-97d0-4518-b33d-ee3579ff19f0",
        "detail-type": "AWS API Call via CloudTrail",
        "source": "aws.s3",
        "account": "111122223333",
        "time": "2026-11-22T12:00:00Z",
        "region": "us-east-1",
        "resources": [],
        "detail": {
            "eventVersion": "1.08",
            "userIdentity": {
                "type": "AssumedRole",
                "arn": "arn:aws:sts::111122223333:assumed-role/Admin/alice",
                "accountId": "111122223333"
            },
            "eventSource": "s3.amazonaws.com",
            "eventName": "DeleteBucket",
            "sourceIPAddress": source_ip,
            "requestParameters": {"bucketName": "invoices"}
        }
    })
}

#[test]
fn a_cloudtrail_api_call_names_its_actor_and_source_ip() {
    let message = parse_json(cloudtrail_event("203.0.113.7")).unwrap();
    let f = &message.fields;
    assert_eq!(f.action.as_deref(), Some("AWS API Call via CloudTrail"));
    assert_eq!(
        f.actor.as_deref(),
        Some("arn:aws:sts::111122223333:assumed-role/Admin/alice")
    );
    assert_eq!(f.source_ip.unwrap().to_string(), "203.0.113.7");
    // The whole detail is kept, identity included.
    assert_eq!(
        message.extra["detail"]["eventName"],
        Value::String("DeleteBucket".into())
    );
}

#[test]
fn a_service_name_as_source_ip_address_is_kept_in_detail_not_refused() {
    let message = parse_json(cloudtrail_event("ec2.amazonaws.com")).unwrap();
    assert_eq!(message.fields.source_ip, None);
    assert_eq!(
        message.extra["detail"]["sourceIPAddress"],
        Value::String("ec2.amazonaws.com".into())
    );
}

#[test]
fn an_object_that_only_resembles_an_envelope_is_a_native_body() {
    // detail is not an object: not EventBridge; no action or auditText: not an audit event.
    let mut event = custom_event_bridge();
    event["detail"] = json!("text");
    assert_eq!(reason(event.clone()), "missing_audit_text");
    event["auditText"] = json!("x");
    let message = parse_json(event).unwrap();
    assert_eq!(message.producer_message_id, None);
    assert!(message.extra.contains_key("detail-type"));
}

/// `levels` objects nested in one another around a string, as a body field's value.
fn nested(levels: usize) -> Value {
    (0..levels).fold(json!("leaf"), |inner, _| json!({ "n": inner }))
}

#[test]
fn extra_nested_as_deep_as_dynamodb_stores_is_kept_and_deeper_is_nesting_too_deep() {
    // The item's extra map is level 1 and a field's value level 2: 30 objects around a string put
    // the string at level 32, DynamoDB's last.
    let message = parse_json(json!({"action": "a", "deep": nested(30)})).expect("at the limit");
    assert_eq!(
        message.extra["deep"].pointer(&"/n".repeat(30)),
        Some(&json!("leaf"))
    );
    assert_eq!(
        reason(json!({"action": "a", "deep": nested(31)})),
        "nesting_too_deep"
    );
    // Arrays count as objects do, and an empty one is a level of its own.
    let arrays = |levels: usize, leaf: Value| (0..levels).fold(leaf, |inner, _| json!([inner]));
    assert!(parse_json(json!({"action": "a", "deep": arrays(30, json!(1))})).is_ok());
    assert!(parse_json(json!({"action": "a", "deep": arrays(30, json!({}))})).is_ok());
    assert_eq!(
        reason(json!({"action": "a", "deep": arrays(31, json!(1))})),
        "nesting_too_deep"
    );
    assert_eq!(
        reason(json!({"action": "a", "deep": arrays(31, json!([]))})),
        "nesting_too_deep"
    );
    // Through an envelope too: a CloudEvent's data is a field of extra.
    let mut event = cloud_event();
    event["data"] = nested(31);
    assert_eq!(reason(event), "nesting_too_deep");
    let error = parse_json(json!({"action": "a", "deep": nested(40)})).unwrap_err();
    assert!(error.to_string().contains("32 levels"), "{error}");
}
