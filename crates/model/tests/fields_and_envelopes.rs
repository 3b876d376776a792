//! The structured fields (actor, action, resource, outcome, sourceIp) and the two envelopes
//! (CloudEvents 1.0 structured mode, EventBridge), through the public parse, hostile inputs
//! included: every invalid body gets its reason, and no detail quotes a value.

use audit_model::envelope::{cloud_event_message_id, cloud_event_source_and_id};
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
    assert_eq!(
        keys,
        [
            "data",
            "datacontenttype",
            "id",
            "source",
            "specversion",
            "tenant"
        ]
    );
    assert_eq!(message.extra["data"]["amount"].to_string(), "12.50");
    // What the key was built from is read back under the attributes' own names.
    assert_eq!(
        message.extra["source"],
        "https://billing.example.com/invoices"
    );
    assert_eq!(message.extra["id"], "A234-1234-1234");
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
        ("id", json!("")),
        ("source", json!(null)),
        ("source", json!("")),
        ("type", json!(["t"])),
        ("type", json!("")),
    ] {
        let mut event = cloud_event();
        event[change] = value.clone();
        let error = parse_json(event).unwrap_err();
        assert_eq!(error.code(), "invalid_envelope", "{change} = {value}");
        assert!(
            error.to_string().contains(&format!(": {change} ")),
            "the detail names {change}: {error}"
        );
    }
    for missing in ["id", "source", "type"] {
        let mut event = cloud_event();
        event.as_object_mut().unwrap().remove(missing);
        let error = parse_json(event).unwrap_err();
        assert_eq!(error.code(), "invalid_envelope", "without {missing}");
        assert!(
            error.to_string().contains(&format!(": {missing} ")),
            "{error}"
        );
    }
}

fn key_of(source: &str, id: &str) -> String {
    let mut event = cloud_event();
    event["source"] = json!(source);
    event["id"] = json!(id);
    parse_json(event)
        .unwrap()
        .producer_message_id
        .expect("a CloudEvent has a producer key")
}

#[test]
fn cloud_events_whose_source_and_id_only_split_differently_get_different_keys() {
    // `source#id` gave both pairs of each row the same key: the second was taken for a duplicate.
    for [(s1, i1), (s2, i2)] in [
        [("svc#a", "1"), ("svc", "a#1")],
        [("a%23b", "1"), ("a#b", "1")],
        [("svc%", "1"), ("svc%25", "1")],
        [
            ("https://x.example/p#frag", "order#42"),
            ("https://x.example/p", "frag#order#42"),
        ],
    ] {
        let (k1, k2) = (key_of(s1, i1), key_of(s2, i2));
        assert_ne!(k1, k2, "({s1}, {i1}) and ({s2}, {i2})");
        for (key, source, id) in [(&k1, s1, i1), (&k2, s2, i2)] {
            assert_eq!(
                cloud_event_source_and_id(key),
                Some((source.to_owned(), id.to_owned())),
                "{key} reads back"
            );
        }
    }
    // A source without `%` or `#` keeps the key it always had.
    assert_eq!(
        key_of("urn:example:auth", "login-1"),
        "urn:example:auth#login-1"
    );
    assert_eq!(key_of("svc", "a#1"), "svc#a#1");
    assert_eq!(key_of("svc#a", "1"), "svc%23a#1");
}

#[test]
fn only_keys_a_cloud_event_gives_read_back() {
    for key in ["no-hash", "a%2#1", "a%41#1", "a%#1", "%2"] {
        assert_eq!(cloud_event_source_and_id(key), None, "{key}");
    }
    assert_eq!(
        cloud_event_source_and_id("%25%23#"),
        Some(("%#".to_owned(), String::new()))
    );
    for (source, id) in [("", "x"), ("%%##", "#%"), ("é#ü%", "ß"), ("a", "")] {
        let key = cloud_event_message_id(source, id);
        assert_eq!(
            cloud_event_source_and_id(&key),
            Some((source.to_owned(), id.to_owned()))
        );
    }
}

#[test]
fn a_cloud_event_key_over_256_characters_names_the_attribute_that_made_it_long() {
    let detail = |source: String, id: String| {
        let mut event = cloud_event();
        event["source"] = json!(source);
        event["id"] = json!(id);
        let error = parse_json(event).unwrap_err();
        assert_eq!(error.code(), "invalid_envelope");
        error.to_string()
    };
    // source (254) + '#' + id (1) = 256 fits; one more character of either does not.
    assert!(key_of(&"s".repeat(254), "i").chars().count() == 256);
    assert!(detail("s".repeat(254), "ii".into()).contains(": id is too long"));
    assert!(detail("s".repeat(100), "i".repeat(200)).contains(": id is too long"));
    assert!(detail("s".repeat(255), "i".into()).contains(": source is too long"));
    // An escaped `#` counts three characters.
    assert!(detail(format!("{}#", "s".repeat(252)), "i".into()).contains(": source is too long"));
    // Characters, not bytes.
    assert!(
        parse_json({
            let mut event = cloud_event();
            event["source"] = json!("é".repeat(200));
            event["id"] = json!("ü".repeat(55));
            event
        })
        .is_ok()
    );
}

#[test]
fn authid_is_the_actor_when_there_is_no_actor_and_stays_in_extra() {
    let mut event = cloud_event();
    event.as_object_mut().unwrap().remove("actor");
    event["authtype"] = json!("app_user");
    event["authid"] = json!("user-42");
    let message = parse_json(event.clone()).unwrap();
    assert_eq!(message.fields.actor.as_deref(), Some("user-42"));
    assert_eq!(message.extra["authid"], "user-42");
    assert_eq!(message.extra["authtype"], "app_user");

    // An actor extension wins; authid is kept beside it.
    event["actor"] = json!("alice");
    let message = parse_json(event.clone()).unwrap();
    assert_eq!(message.fields.actor.as_deref(), Some("alice"));
    assert_eq!(message.extra["authid"], "user-42");

    // Used as the actor, authid obeys the actor's rules, and the detail says where it came from.
    event.as_object_mut().unwrap().remove("actor");
    for (authid, code) in [
        (json!(""), "invalid_field_value"),
        (json!("a".repeat(1025)), "invalid_field_value"),
        (json!(42), "invalid_field_type"),
    ] {
        event["authid"] = authid;
        let error = parse_json(event.clone()).unwrap_err();
        assert_eq!(error.code(), code);
        assert!(error.to_string().contains("authid"), "{error}");
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

/// An S3 `DeleteBucket` as CloudTrail records it and EventBridge delivers it (a rule's target).
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
            "eventVersion": "1.09",
            "userIdentity": {
                "type": "AssumedRole",
                "principalId": "AROA3EXAMPLEROLEID:alice",
                "arn": "arn:aws:sts::111122223333:assumed-role/Admin/alice",
                "accountId": "111122223333",
                "accessKeyId": "ASIA3EXAMPLEKEYID",
                "sessionContext": {
                    "sessionIssuer": {
                        "type": "Role",
                        "principalId": "AROA3EXAMPLEROLEID",
                        "arn": "arn:aws:iam::111122223333:role/Admin",
                        "accountId": "111122223333",
                        "userName": "Admin"
                    },
                    "attributes": {
                        "creationDate": "2026-11-22T11:40:02Z",
                        "mfaAuthenticated": "true"
                    }
                }
            },
            "eventTime": "2026-11-22T12:00:00Z",
            "eventSource": "s3.amazonaws.com",
            "eventName": "DeleteBucket",
            "awsRegion": "us-east-1",
            "sourceIPAddress": source_ip,
            "userAgent": "[aws-cli/2.15.30 md/Botocore#1.34.30 ua/2.0 os/linux#6.5.0 md/arch#x86_64]",
            "requestParameters": {"bucketName": "invoices", "Host": "invoices.s3.us-east-1.amazonaws.com"},
            "responseElements": null,
            "additionalEventData": {
                "SignatureVersion": "SigV4",
                "CipherSuite": "TLS_AES_128_GCM_SHA256",
                "bytesTransferredIn": 0,
                "AuthenticationMethod": "AuthHeader",
                "x-amz-id-2": "EXAMPLE/ID2=",
                "bytesTransferredOut": 0
            },
            "requestID": "9E0F1D2C3B4A5968",
            "eventID": "b7f0a1c2-3d4e-5f60-7182-93a4b5c6d7e8",
            "readOnly": false,
            "resources": [
                {"accountId": "111122223333", "type": "AWS::S3::Bucket", "ARN": "arn:aws:s3:::invoices"}
            ],
            "eventType": "AwsApiCall",
            "managementEvent": true,
            "recipientAccountId": "111122223333",
            "eventCategory": "Management",
            "tlsDetails": {
                "tlsVersion": "TLSv1.3",
                "cipherSuite": "TLS_AES_128_GCM_SHA256",
                "clientProvidedHostHeader": "invoices.s3.us-east-1.amazonaws.com"
            }
        }
    })
}

#[test]
fn a_cloudtrail_api_call_says_who_did_what_to_what_with_what_result() {
    let message = parse_json(cloudtrail_event("203.0.113.7")).unwrap();
    let f = &message.fields;
    assert_eq!(f.action.as_deref(), Some("s3:DeleteBucket"));
    assert_eq!(
        f.actor.as_deref(),
        Some("arn:aws:sts::111122223333:assumed-role/Admin/alice")
    );
    assert_eq!(f.resource.as_deref(), Some("arn:aws:s3:::invoices"));
    assert_eq!(f.outcome, Some(EventOutcome::Success));
    assert_eq!(f.source_ip.unwrap().to_string(), "203.0.113.7");
    assert_eq!(
        message.producer_message_id.as_deref(),
        Some("36eb8523-97d0-4518-b33d-ee3579ff19f0")
    );
    // The whole detail is kept, identity included; the detail type is no longer the action, so
    // it is kept too.
    assert_eq!(message.extra["detail"]["eventName"], "DeleteBucket");
    assert_eq!(message.extra["detail-type"], "AWS API Call via CloudTrail");
}

#[test]
fn a_cloudtrail_error_code_is_a_failure() {
    let mut event = cloudtrail_event("203.0.113.7");
    event["detail"]["errorCode"] = json!("AccessDenied");
    event["detail"]["errorMessage"] = json!("Access Denied");
    assert_eq!(
        parse_json(event).unwrap().fields.outcome,
        Some(EventOutcome::Failure)
    );
}

#[test]
fn a_failed_console_sign_in_is_a_failure_though_it_has_no_error_code() {
    let event = json!({
        "version": "0",
        "id": "d4a3c1f0-8e22-4b7a-9d3e-1a2b3c4d5e6f",
        "detail-type": "AWS Console Sign In via CloudTrail",
        "source": "aws.signin",
        "account": "111122223333",
        "time": "2026-11-22T12:00:00Z",
        "region": "us-east-1",
        "resources": [],
        "detail": {
            "eventVersion": "1.08",
            "userIdentity": {
                "type": "IAMUser",
                "principalId": "AIDA3EXAMPLEUSERID",
                "accountId": "111122223333",
                "accessKeyId": "",
                "userName": "bob"
            },
            "eventTime": "2026-11-22T12:00:00Z",
            "eventSource": "signin.amazonaws.com",
            "eventName": "ConsoleLogin",
            "awsRegion": "us-east-1",
            "sourceIPAddress": "198.51.100.23",
            "userAgent": "Mozilla/5.0",
            "errorMessage": "Failed authentication",
            "requestParameters": null,
            "responseElements": {"ConsoleLogin": "Failure"},
            "additionalEventData": {"LoginTo": "https://console.aws.amazon.com/", "MobileVersion": "No", "MFAUsed": "No"},
            "eventID": "1a2b3c4d-0000-4000-8000-000000000001",
            "readOnly": false,
            "eventType": "AwsConsoleSignIn",
            "managementEvent": true,
            "recipientAccountId": "111122223333",
            "eventCategory": "Management"
        }
    });
    let message = parse_json(event.clone()).unwrap();
    let f = &message.fields;
    assert_eq!(f.action.as_deref(), Some("signin:ConsoleLogin"));
    assert_eq!(f.outcome, Some(EventOutcome::Failure));
    // No ARN for a failed IAM user sign-in: the principal id says who.
    assert_eq!(f.actor.as_deref(), Some("AIDA3EXAMPLEUSERID"));
    let mut event = event;
    event["detail"]["responseElements"]["ConsoleLogin"] = json!("Success");
    event["detail"]
        .as_object_mut()
        .unwrap()
        .remove("errorMessage");
    assert_eq!(
        parse_json(event).unwrap().fields.outcome,
        Some(EventOutcome::Success)
    );
}

#[test]
fn a_cloudtrail_actor_falls_back_from_arn_to_principal_id_to_invoking_service() {
    let actor = |identity: Value| {
        let mut event = cloudtrail_event("203.0.113.7");
        event["detail"]["userIdentity"] = identity;
        parse_json(event).unwrap().fields.actor
    };
    assert_eq!(
        actor(json!({"type": "AWSAccount", "principalId": "AIDA3EXAMPLE", "accountId": "444455556666"}))
            .as_deref(),
        Some("AIDA3EXAMPLE")
    );
    assert_eq!(
        actor(json!({"type": "AWSService", "invokedBy": "cloudformation.amazonaws.com"}))
            .as_deref(),
        Some("cloudformation.amazonaws.com")
    );
    assert_eq!(
        actor(json!({"type": "AWSService", "arn": "", "invokedBy": "s3.amazonaws.com"})).as_deref(),
        Some("s3.amazonaws.com"),
        "an empty arn is no identity"
    );
    assert_eq!(actor(json!({"type": "Unknown"})), None);
}

#[test]
fn a_cloudtrail_resource_is_the_first_arn_of_detail_else_of_the_event() {
    let resource = |detail_resources: Option<Value>, resources: Value| {
        let mut event = cloudtrail_event("203.0.113.7");
        match detail_resources {
            Some(list) => event["detail"]["resources"] = list,
            None => {
                event["detail"].as_object_mut().unwrap().remove("resources");
            }
        }
        event["resources"] = resources;
        parse_json(event).unwrap().fields.resource
    };
    let top = json!(["arn:aws:s3:::from-the-event"]);
    assert_eq!(
        resource(
            Some(json!([
                {"type": "AWS::S3::Object", "ARNPrefix": "arn:aws:s3:::invoices/2026/"},
                {"type": "AWS::S3::Bucket", "ARN": "arn:aws:s3:::invoices"},
                {"type": "AWS::S3::Bucket", "ARN": "arn:aws:s3:::other"}
            ])),
            top.clone()
        )
        .as_deref(),
        Some("arn:aws:s3:::invoices")
    );
    assert_eq!(
        resource(None, top.clone()).as_deref(),
        Some("arn:aws:s3:::from-the-event")
    );
    assert_eq!(
        resource(Some(json!([])), top).as_deref(),
        Some("arn:aws:s3:::from-the-event")
    );
    assert_eq!(resource(None, json!([])), None);
}

#[test]
fn every_cloudtrail_detail_type_that_names_a_call_maps_it_and_others_keep_the_detail_type() {
    for (detail_type, source, name, action) in [
        (
            "AWS Console Action via CloudTrail",
            "s3.amazonaws.com",
            "ListBuckets",
            "s3:ListBuckets",
        ),
        (
            "AWS Service Event via CloudTrail",
            "kms.amazonaws.com",
            "RotateKey",
            "kms:RotateKey",
        ),
        // CloudWatch's endpoint is not its IAM prefix.
        (
            "AWS API Call via CloudTrail",
            "monitoring.amazonaws.com",
            "PutMetricAlarm",
            "cloudwatch:PutMetricAlarm",
        ),
        (
            "AWS API Call via CloudTrail",
            "elasticloadbalancing.amazonaws.com",
            "DeleteLoadBalancer",
            "elasticloadbalancing:DeleteLoadBalancer",
        ),
        // Not a call: the detail type stays the action.
        (
            "AWS Insight via CloudTrail",
            "s3.amazonaws.com",
            "DeleteBucket",
            "AWS Insight via CloudTrail",
        ),
    ] {
        let mut event = cloudtrail_event("203.0.113.7");
        event["detail-type"] = json!(detail_type);
        event["detail"]["eventSource"] = json!(source);
        event["detail"]["eventName"] = json!(name);
        let message = parse_json(event).unwrap();
        assert_eq!(
            message.fields.action.as_deref(),
            Some(action),
            "{detail_type}"
        );
    }
    // Without an eventName there is no call to name: the detail type is the action.
    let mut event = cloudtrail_event("203.0.113.7");
    event["detail"].as_object_mut().unwrap().remove("eventName");
    let message = parse_json(event).unwrap();
    assert_eq!(
        message.fields.action.as_deref(),
        Some("AWS API Call via CloudTrail")
    );
    assert!(!message.extra.contains_key("detail-type"));
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
fn an_aws_event_is_never_refused_for_a_derived_field_out_of_its_bounds() {
    // IAM allows ARNs of up to 2,048 characters; our resource and actor stop at 1,024.
    let long_arn = format!("arn:aws:s3:::invoices/{}", "k".repeat(1500));
    let mut event = cloudtrail_event("203.0.113.7");
    event["detail"]["resources"] = json!([{"type": "AWS::S3::Object", "ARN": long_arn}]);
    event["detail"]["userIdentity"]["arn"] = json!(format!(
        "arn:aws:sts::111122223333:assumed-role/{}",
        "r".repeat(1100)
    ));
    event["detail"]["eventName"] = json!("X".repeat(300));
    let message = parse_json(event).expect("an AWS event is stored");
    let f = &message.fields;
    assert_eq!(f.resource, None, "left out");
    assert_eq!(f.actor, None, "left out, not replaced by a lesser identity");
    assert_eq!(f.action.as_deref(), Some("AWS API Call via CloudTrail"));
    assert_eq!(
        message.extra["detail"]["resources"][0]["ARN"],
        json!(long_arn)
    );

    // The same for any EventBridge event, and for a value of another type.
    let mut event = custom_event_bridge();
    event["resources"] = json!([long_arn]);
    let message = parse_json(event.clone()).expect("stored");
    assert_eq!(message.fields.resource, None);
    assert_eq!(message.extra["resources"][0], json!(long_arn));
    event["resources"] = json!([{"not": "a string"}]);
    assert_eq!(parse_json(event).expect("stored").fields.resource, None);
}

#[test]
fn an_event_bridge_event_is_refused_only_for_its_own_attributes() {
    for (name, value) in [
        ("id", json!("")),
        ("id", json!("i".repeat(257))),
        ("detail-type", json!("")),
        ("detail-type", json!("d".repeat(257))),
    ] {
        let mut event = custom_event_bridge();
        event[name] = value;
        let error = parse_json(event).unwrap_err();
        assert_eq!(error.code(), "invalid_envelope", "{name}");
        assert!(error.to_string().contains(&format!(": {name} ")), "{error}");
    }
    let mut event = custom_event_bridge();
    event["time"] = json!("2026-11-22T12:00:00");
    assert_eq!(reason(event), "audit_time_without_offset");
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
