//! Owns the least-privilege checks: each function's role, the reader and operator policies, and
//! that nothing may update a stored item or loosen the archive. Must not know the programs' code.

use std::collections::{BTreeMap, BTreeSet};

use crate::support::*;
use audit_model::archive::{STATE_PREFIX, TAMPER_PREFIX, TRAIL_PREFIX};
use audit_model::digest::DIGEST_PREFIX;
use audit_model::note::{CHECKPOINTS_PREFIX, COSIGNATURES_PREFIX};
use audit_model::tlog::{LOG_PREFIX, TILE_PREFIX};
use serde_yaml::Value;

fn role_statements(t: &Value, role: &str) -> Vec<Value> {
    let role = props(t, role);
    assert!(
        role.get("ManagedPolicyArns").is_none(),
        "no managed policies: they grant on \"*\""
    );
    one_or_many(at(role, &["Policies"]))
        .iter()
        .flat_map(|p| one_or_many(at(p, &["PolicyDocument", "Statement"])))
        .collect()
}

#[test]
fn each_function_has_its_own_role_and_sam_adds_no_policies() {
    let t = template();
    for (function, role) in [
        ("AuditReceiverFunction", "AuditReceiverRole"),
        ("AuditArchiverFunction", "AuditArchiverRole"),
        ("AuditOcsfWriterFunction", "AuditOcsfWriterRole"),
    ] {
        let f = props(&t, function);
        assert_eq!(at(f, &["Role"]), &get_att(role, "Arn"), "{function}");
        assert!(
            f.get("Policies").is_none(),
            "{function}: with Role set SAM would ignore Policies: keep them in the role"
        );
    }
    let iam: BTreeSet<String> = at(&t, &["Resources"])
        .as_mapping()
        .unwrap()
        .iter()
        .filter(|(_, r)| {
            r.get("Type")
                .and_then(Value::as_str)
                .is_some_and(|k| k.starts_with("AWS::IAM::"))
        })
        .map(|(k, _)| scalar(k))
        .collect();
    assert_eq!(
        iam,
        BTreeSet::from([
            "AuditArchiverRole".to_string(),
            "AuditArchiverSigningPolicy".to_string(),
            "AuditOcsfWriterRole".to_string(),
            "AuditOperatorPolicy".to_string(),
            "AuditOperatorRole".to_string(),
            "AuditProducerPolicy".to_string(),
            "AuditReaderPolicy".to_string(),
            "AuditReceiverRole".to_string(),
            "AuditReceiverTablePolicy".to_string(),
            "AuditWitnessPolicy".to_string()
        ]),
        "each function's role (the archiver's signing grant and the receiver's table grant \
         policies of their own), the producer policy, the two operator policies, the operator \
         role redrives run as, and the witness's, no other IAM resource"
    );
    for policy in [
        "AuditReaderPolicy",
        "AuditOperatorPolicy",
        "AuditProducerPolicy",
        "AuditWitnessPolicy",
    ] {
        for attachment in ["Roles", "Users", "Groups"] {
            assert!(
                props(&t, policy).get(attachment).is_none(),
                "{policy} is for people and tools to attach, never attached by the stack ({attachment})"
            );
        }
    }
}

#[test]
fn function_may_only_put_items_poll_its_own_queues_and_send_dead_letters() {
    let t = template();
    let one = |r: &str| vec![r.to_string()];
    let polled = vec![QUEUE.to_string(), ACCESS_QUEUE.to_string()];
    assert_eq!(
        all_role_grants(&t, "AuditReceiverRole"),
        owned_grants(&[
            // PutItem on the table, DescribeTable for the start-up check, nothing else in
            // DynamoDB.
            ("dynamodb:DescribeTable", one(TABLE)),
            ("dynamodb:PutItem", one(TABLE)),
            // What the two event source mappings poll with, on the two queues only.
            ("sqs:ReceiveMessage", polled.clone()),
            ("sqs:DeleteMessage", polled.clone()),
            ("sqs:GetQueueAttributes", polled),
            // Dead-lettering with the reason, to the dead-letter queue only.
            ("sqs:SendMessage", one(DEAD_LETTER_QUEUE)),
            ("logs:CreateLogStream", one("${AuditReceiverLogGroup.Arn}")),
            ("logs:PutLogEvents", one("${AuditReceiverLogGroup.Arn}")),
            // The run's attestation key certified once at start-up, with its own key only.
            ("kms:Sign", one(ATTESTATION_KEY)),
        ])
    );
    // The table grant is a policy of its own (the table's tags name the role's RoleId: inside the
    // role it would be a cycle), and the function waits for it.
    assert_eq!(
        attached_policies(&t, "AuditReceiverRole"),
        vec!["AuditReceiverTablePolicy".to_string()]
    );
    assert!(
        role_grants(&t, "AuditReceiverRole")
            .values()
            .flatten()
            .all(|r| !r.contains("AuditMessagesTable")),
        "a grant on the table inside the role would make the role depend on the table, whose \
         tags name the role"
    );
    assert_eq!(
        scalar(at(resource(&t, "AuditReceiverFunction"), &["DependsOn"])),
        "AuditReceiverTablePolicy"
    );
}

/// Every IAM policy document of the template: the function role's inline policies and each
/// managed policy's, by resource name.
fn policy_documents(t: &Value) -> Vec<(String, Value)> {
    let mut documents = Vec::new();
    for (name, r) in at(t, &["Resources"]).as_mapping().expect("Resources") {
        let p = r.get("Properties").cloned().unwrap_or(Value::Null);
        match r.get("Type").and_then(Value::as_str) {
            Some("AWS::IAM::Role") => documents.extend(
                one_or_many(p.get("Policies").unwrap_or(&Value::Sequence(vec![])))
                    .iter()
                    .map(|policy| (scalar(name), at(policy, &["PolicyDocument"]).clone())),
            ),
            Some("AWS::IAM::ManagedPolicy" | "AWS::IAM::Policy") => {
                documents.push((scalar(name), at(&p, &["PolicyDocument"]).clone()))
            }
            _ => {}
        }
    }
    documents
}

type Grants = BTreeMap<String, BTreeSet<String>>;

/// What a managed policy allows: each action with the resources it is allowed on. Only plain
/// Allow statements (no NotAction, NotResource, Condition or wildcard action), so that the map is
/// all the policy grants.
fn managed_policy_grants(t: &Value, name: &str) -> Grants {
    let resource = resource(t, name);
    assert_eq!(
        at(resource, &["Type"]).as_str(),
        Some("AWS::IAM::ManagedPolicy")
    );
    let mut grants = Grants::new();
    for s in one_or_many(at(props(t, name), &["PolicyDocument", "Statement"])) {
        assert_eq!(at(&s, &["Effect"]).as_str(), Some("Allow"), "{name}: {s:?}");
        for key in ["NotAction", "NotResource", "Condition", "Principal"] {
            assert!(s.get(key).is_none(), "{name}: no {key} ({s:?})");
        }
        let resources: Vec<String> = one_or_many(at(&s, &["Resource"]))
            .iter()
            .map(resource_text)
            .collect();
        for action in one_or_many(at(&s, &["Action"])).iter().map(scalar) {
            assert!(!action.contains('*'), "{name}: wildcard action {action}");
            for r in &resources {
                assert_ne!(r, "*", "{name}: {action} on every resource");
                grants.entry(action.clone()).or_default().insert(r.clone());
            }
        }
    }
    grants
}

const TABLE: &str = "${AuditMessagesTable.Arn}";

const TABLE_INDEXES: &str = "${AuditMessagesTable.Arn}/index/*";

const QUEUE: &str = "${AuditQueue.Arn}";

const ACCESS_QUEUE: &str = "${AuditAccessQueue.Arn}";

const DEAD_LETTER_QUEUE: &str = "${AuditDeadLetterQueue.Arn}";

/// Verbs (the part after `service:`) that write, change, delete or reconfigure.
const WRITE_VERBS: &[&str] = &[
    "Put",
    "Update",
    "Delete",
    "BatchWrite",
    "Write",
    "Create",
    "Restore",
    "Import",
    "Transact",
    "PartiQL",
    "ExecuteStatement",
    "ExecuteTransaction",
    "Purge",
    "Set",
    "Tag",
    "Untag",
    "Change",
    "Receive",
    "StartMessageMoveTask",
    "AddPermission",
    "RemovePermission",
];

fn writes(action: &str) -> bool {
    let verb = action.split_once(':').map_or(action, |(_, verb)| verb);
    WRITE_VERBS.iter().any(|w| verb.starts_with(w))
}

#[test]
fn reader_policy_reads_the_table_and_its_indexes_and_records_its_own_access_only() {
    let t = template();
    let reader = managed_policy_grants(&t, "AuditReaderPolicy");
    for (action, resources) in &reader {
        // Sending to the access queue is how the access itself is recorded (docs/deploy.md "The
        // access queue"): it adds an event, it changes none. Never to AuditQueue: a reader cannot
        // write an application event.
        if action == "sqs:SendMessage" {
            assert_eq!(resources, &BTreeSet::from([ACCESS_QUEUE.to_string()]));
            continue;
        }
        assert!(!writes(action), "the reader policy may {action}");
    }
    let one = |r: &str| vec![r.to_string()];
    assert_eq!(
        reader,
        owned_grants(&[
            ("dynamodb:BatchGetItem", one(TABLE)),
            ("dynamodb:DescribeTable", one(TABLE)),
            // auditctl reads the table's tags: the access queue it may send to, the receiver's
            // role id.
            ("dynamodb:ListTagsOfResource", one(TABLE)),
            ("dynamodb:Query", vec![TABLE.into(), TABLE_INDEXES.into()]),
            ("sqs:SendMessage", one(ACCESS_QUEUE)),
            ("s3:GetObject", verified_prefixes()),
            ("s3:GetObjectVersion", verified_prefixes()),
            ("s3:ListBucket", one(ARCHIVE_BUCKET)),
            ("s3:ListBucketVersions", one(ARCHIVE_BUCKET)),
            // verify: the default retention, to tell a digest expired lawfully from one removed.
            ("s3:GetBucketObjectLockConfiguration", one(ARCHIVE_BUCKET)),
            // The digest key's public key, and the receiver's attestation key's (verify, get
            // and ui check the items' attestations: docs/archive.md "Items attested at birth").
            (
                "kms:GetPublicKey",
                vec![DIGEST_KEY.into(), ATTESTATION_KEY.into()]
            ),
        ]),
        "auditctl query and get: DescribeTable, Query (table and indexes), BatchGetItem (a \
         lookup's full items); the table's tags and the access event on AuditAccessQueue. No \
         GetItem: no command calls it. \
         auditctl verify and the check by hand (docs/operations.md): the archive's objects and \
         digests, their listings, the digest key's public key and the attestation key's; never \
         the archiver's markers (state/), never kms:Sign"
    );
}

#[test]
fn operator_policy_is_the_readers_plus_working_the_dead_letter_queue() {
    let t = template();
    let reader = managed_policy_grants(&t, "AuditReaderPolicy");
    let operator = managed_policy_grants(&t, "AuditOperatorPolicy");
    for (action, resources) in &reader {
        let held = operator.get(action).cloned().unwrap_or_default();
        assert!(
            held.is_superset(resources),
            "the operator may {action} on {resources:?} as the reader may (has {held:?})"
        );
    }
    let mut expected = reader.clone();
    // The redrive sends the message back to AuditQueue: the only send to it an operator may make.
    expected
        .entry("sqs:SendMessage".to_string())
        .or_default()
        .insert(QUEUE.to_string());
    // auditctl dlq list and dlq redrive (crates/auditctl/src/dlq.rs): receive, make visible
    // again (ChangeMessageVisibilityBatch is authorised as ChangeMessageVisibility), delete after
    // the redrive's send (DeleteMessageBatch would be DeleteMessage), and the queue's counts.
    for action in [
        "sqs:ReceiveMessage",
        "sqs:ChangeMessageVisibility",
        "sqs:DeleteMessage",
        "sqs:GetQueueAttributes",
    ] {
        expected
            .entry(action.to_string())
            .or_default()
            .insert(DEAD_LETTER_QUEUE.to_string());
    }
    // auditctl archive repair: the archiver archives what the archive lacks; the operator only
    // asks it (the reader may not).
    expected
        .entry("lambda:InvokeFunction".to_string())
        .or_default()
        .insert("${AuditArchiverFunction.Arn}".to_string());
    assert!(!reader.contains_key("lambda:InvokeFunction"));
    assert_eq!(operator, expected);
    for action in operator.keys().filter(|a| a.starts_with("dynamodb:")) {
        assert!(!writes(action), "the operator policy may {action}");
    }
    assert!(
        !operator.contains_key("sqs:StartMessageMoveTask"),
        "SQS's own redrive loses the identity"
    );
}

#[test]
fn write_verbs_are_recognised() {
    for action in [
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "dynamodb:BatchWriteItem",
        "dynamodb:PartiQLUpdate",
        "dynamodb:UpdateTable",
        "sqs:DeleteMessage",
        "sqs:PurgeQueue",
        "sqs:SetQueueAttributes",
    ] {
        assert!(writes(action), "{action}");
    }
    for action in [
        "dynamodb:Query",
        "dynamodb:GetItem",
        "dynamodb:DescribeTable",
        "sqs:GetQueueAttributes",
    ] {
        assert!(!writes(action), "{action}");
    }
}

#[test]
fn nothing_in_the_template_may_update_or_delete_a_stored_item() {
    // The writer only ever inserts (a conditional PutItem that never overwrites); nobody the
    // template grants anything to may change or remove an item.
    let t = template();
    let mut put_item = Vec::new();
    for (owner, document) in policy_documents(&t) {
        for s in one_or_many(at(&document, &["Statement"])) {
            if at(&s, &["Effect"]).as_str() != Some("Allow") {
                continue;
            }
            assert!(s.get("NotAction").is_none(), "{owner}: NotAction");
            for action in one_or_many(at(&s, &["Action"])).iter().map(scalar) {
                let Some(verb) = action.strip_prefix("dynamodb:") else {
                    continue;
                };
                assert!(!verb.contains('*'), "{owner}: {action}");
                if verb == "PutItem" {
                    put_item.push(owner.clone());
                    continue;
                }
                assert!(!writes(&action), "{owner} may {action}");
            }
        }
    }
    assert_eq!(
        put_item,
        vec!["AuditReceiverTablePolicy".to_string()],
        "only the function may put items"
    );
    assert_eq!(
        one_or_many(at(props(&t, "AuditReceiverTablePolicy"), &["Roles"])),
        vec![reference("AuditReceiverRole")],
        "the function's role and no other"
    );
    for attachment in ["Users", "Groups"] {
        assert!(
            props(&t, "AuditReceiverTablePolicy")
                .get(attachment)
                .is_none()
        );
    }
}

#[test]
fn producer_policy_sends_to_the_audit_queue_and_nothing_else() {
    // What an application needs (docs/deploy.md "Producers"): SendMessage on AuditQueue, and the
    // queue key if one is used. The queue is encrypted with SQS's own key, which needs no KMS
    // grant.
    let t = template();
    assert_eq!(
        managed_policy_grants(&t, "AuditProducerPolicy"),
        owned_grants(&[("sqs:SendMessage", vec![QUEUE.to_string()])])
    );
    let queue = props(&t, "AuditQueue");
    assert_eq!(at(queue, &["SqsManagedSseEnabled"]), &Value::Bool(true));
    assert!(
        queue.get("KmsMasterKeyId").is_none(),
        "a customer managed queue key would need kms:GenerateDataKey and kms:Decrypt here"
    );
}

/// Who may send to `queue`: every policy of the template that grants sqs:SendMessage on it.
fn senders(t: &Value, queue: &str) -> BTreeSet<String> {
    let mut owners = BTreeSet::new();
    for (owner, document) in policy_documents(t) {
        for s in one_or_many(at(&document, &["Statement"])) {
            let actions = one_or_many(at(&s, &["Action"]));
            let sends = actions
                .iter()
                .any(|a| ["sqs:SendMessage", "sqs:*", "*"].contains(&scalar(a).as_str()));
            let on_queue = one_or_many(at(&s, &["Resource"]))
                .iter()
                .any(|r| resource_text(r) == queue || resource_text(r) == "*");
            if at(&s, &["Effect"]).as_str() == Some("Allow") && sends && on_queue {
                owners.insert(owner.clone());
            }
        }
    }
    owners
}

#[test]
fn access_events_come_from_auditctl_and_application_events_from_producers() {
    // Access events cannot be forged, and readers cannot write application events
    // (docs/deploy.md "The access queue").
    let t = template();
    assert_eq!(
        senders(&t, ACCESS_QUEUE),
        BTreeSet::from([
            "AuditOperatorPolicy".to_string(),
            "AuditReaderPolicy".to_string()
        ]),
        "the access queue takes auditctl's access events, from the two operator policies only"
    );
    assert_eq!(
        senders(&t, QUEUE),
        BTreeSet::from([
            "AuditOperatorPolicy".to_string(),
            "AuditProducerPolicy".to_string()
        ]),
        "AuditQueue takes the producers' events and the operator's redrive; never the reader's"
    );
}

const ARCHIVE_BUCKET: &str = "${AuditArchiveBucket.Arn}";

const DIGEST_KEY: &str = "${AuditDigestKey.Arn}";
const ATTESTATION_KEY: &str = "${AuditAttestationKey.Arn}";

/// `${AuditArchiveBucket.Arn}/<prefix>*` for each prefix (audit_model's `trail/`, ...).
fn under(prefixes: &[&str]) -> Vec<String> {
    prefixes
        .iter()
        .map(|p| format!("{ARCHIVE_BUCKET}/{p}*"))
        .collect()
}

/// Everything the archiver writes: the archive's objects, its markers, the digests, and the
/// transparency log's tiles, checkpoints and indexes (never the witnesses' cosignatures).
fn archiver_prefixes() -> Vec<String> {
    under(&[
        TRAIL_PREFIX,
        TAMPER_PREFIX,
        STATE_PREFIX,
        DIGEST_PREFIX,
        "log/tile/",
        audit_model::note::CHECKPOINTS_PREFIX,
        audit_model::note::INDEX_PREFIX,
    ])
}

/// What `auditctl verify` reads: the archive's objects, the digests and the transparency log
/// (not the markers).
fn verified_prefixes() -> Vec<String> {
    under(&[TRAIL_PREFIX, TAMPER_PREFIX, DIGEST_PREFIX, LOG_PREFIX])
}

const TABLE_STREAM: &str = "${AuditMessagesTable.StreamArn}";

const TABLE_STREAMS: &str = "${AuditMessagesTable.Arn}/stream/*";

/// What plain Allow statements grant: each action with the resources it is allowed on (no
/// NotAction, NotResource, Condition, Principal or wildcard, so that the map is all they grant).
fn statement_grants(owner: &str, statements: &[Value], grants: &mut Grants) {
    for s in statements {
        assert_eq!(at(s, &["Effect"]).as_str(), Some("Allow"), "{owner}: {s:?}");
        for key in ["NotAction", "NotResource", "Condition", "Principal"] {
            assert!(s.get(key).is_none(), "{owner}: no {key} ({s:?})");
        }
        let resources: Vec<String> = one_or_many(at(s, &["Resource"]))
            .iter()
            .map(resource_text)
            .collect();
        for action in one_or_many(at(s, &["Action"])).iter().map(scalar) {
            assert!(!action.contains('*'), "{owner}: wildcard action {action}");
            for r in &resources {
                assert_ne!(r, "*", "{owner}: {action} on every resource");
                grants.entry(action.clone()).or_default().insert(r.clone());
            }
        }
    }
}

/// What a role's inline policies allow.
fn role_grants(t: &Value, role: &str) -> Grants {
    let mut grants = Grants::new();
    statement_grants(role, &role_statements(t, role), &mut grants);
    grants
}

/// The AWS::IAM::Policy resources attached to `role`, by name.
fn attached_policies(t: &Value, role: &str) -> Vec<String> {
    resources_of_type(t, "AWS::IAM::Policy")
        .into_iter()
        .filter(|(_, r)| one_or_many(at(r, &["Properties", "Roles"])).contains(&reference(role)))
        .map(|(name, _)| name)
        .collect()
}

/// What a role may do: its inline policies and the AWS::IAM::Policy resources attached to it.
fn all_role_grants(t: &Value, role: &str) -> Grants {
    let mut grants = role_grants(t, role);
    for policy in attached_policies(t, role) {
        let statements = one_or_many(at(props(t, &policy), &["PolicyDocument", "Statement"]));
        statement_grants(&policy, &statements, &mut grants);
    }
    grants
}

fn owned_grants(expected: &[(&str, Vec<String>)]) -> Grants {
    expected
        .iter()
        .map(|(action, resources)| (action.to_string(), resources.iter().cloned().collect()))
        .collect()
}

#[test]
fn archiver_may_only_read_the_stream_write_and_read_its_prefixes_seal_send_give_ups_and_log() {
    let t = template();
    let one = |r: &str| vec![r.to_string()];
    assert_eq!(
        all_role_grants(&t, "AuditArchiverRole"),
        owned_grants(&[
            // What the event source mapping polls the stream with (the AWS guide's four, on
            // this table's streams only).
            ("dynamodb:DescribeStream", one(TABLE_STREAM)),
            ("dynamodb:GetRecords", one(TABLE_STREAM)),
            ("dynamodb:GetShardIterator", one(TABLE_STREAM)),
            ("dynamodb:ListStreams", one(TABLE_STREAMS)),
            // New objects under its own prefixes (conditional puts never replace one), read
            // back (GetObject also authorises HEAD); ListBucket so that a missing key is a 404,
            // not a 403. No delete, no retention, no lock.
            ("s3:PutObject", archiver_prefixes()),
            ("s3:GetObject", archiver_prefixes()),
            ("s3:ListBucket", one(ARCHIVE_BUCKET)),
            // Sealing a period: its versions listed, the head of each listed version (a HEAD
            // with a versionId is authorised as GetObjectVersion) of the archive's objects, and
            // the previous digest and each object's marker read as first written (their first
            // version, by versionId); the digest signed with the digest key and nothing else,
            // the digest chained on checked with its public key.
            ("s3:ListBucketVersions", one(ARCHIVE_BUCKET)),
            ("s3:GetObjectVersion", archiver_prefixes()),
            ("kms:Sign", one(DIGEST_KEY)),
            // A repair (auditctl archive repair) reads the items to archive from the table
            // itself, by key (BatchGetItem, ConsistentRead): a read only.
            ("dynamodb:BatchGetItem", one(TABLE)),
            (
                "kms:GetPublicKey",
                vec![DIGEST_KEY.to_string(), ATTESTATION_KEY.to_string()]
            ),
            // The on-failure destination is sent with the function's role.
            ("sqs:SendMessage", one("${AuditArchiveFailureQueue.Arn}")),
            ("logs:CreateLogStream", one("${AuditArchiverLogGroup.Arn}")),
            ("logs:PutLogEvents", one("${AuditArchiverLogGroup.Arn}")),
        ])
    );
    // The signing grant is a policy of its own (the key's policy names the role: inside the role
    // it would be a cycle), and the function waits for it.
    assert_eq!(
        attached_policies(&t, "AuditArchiverRole"),
        vec!["AuditArchiverSigningPolicy".to_string()]
    );
    assert!(
        !role_grants(&t, "AuditArchiverRole").contains_key("kms:Sign"),
        "kms:Sign inside the role would make the role depend on the key, which names the role"
    );
    assert_eq!(
        scalar(at(resource(&t, "AuditArchiverFunction"), &["DependsOn"])),
        "AuditArchiverSigningPolicy"
    );
    assert_eq!(
        all_role_grants(&t, "AuditReceiverRole").get("kms:Sign"),
        Some(&BTreeSet::from([ATTESTATION_KEY.to_string()])),
        "the receiver signs with its attestation key only, never a digest"
    );
    // The archiver checks each INSERT's attestation with the key's public half, read from the
    // role's own policy (docs/archive.md "Items attested at birth"), and never signs with it.
    assert_eq!(
        role_grants(&t, "AuditArchiverRole").get("kms:GetPublicKey"),
        Some(&BTreeSet::from([ATTESTATION_KEY.to_string()]))
    );
}

/// S3 actions that remove an object or a version, or loosen what keeps it.
fn loosens_the_archive(action: &str) -> bool {
    let verb = action.strip_prefix("s3:").unwrap_or("");
    verb.starts_with("Delete")
        || verb.starts_with("PutObjectRetention")
        || verb.starts_with("PutObjectLegalHold")
        || verb.starts_with("BypassGovernanceRetention")
        || verb.starts_with("PutBucket")
        || verb.starts_with("PutLifecycle")
        || verb.starts_with("PutObjectAcl")
        || verb.starts_with("PutObjectVersionAcl")
        || verb.starts_with("PutEncryption")
        || verb.contains('*')
        || action == "*"
}

#[test]
fn loosens_the_archive_is_recognised() {
    for action in [
        "s3:DeleteObject",
        "s3:DeleteObjectVersion",
        "s3:PutObjectRetention",
        "s3:BypassGovernanceRetention",
        "s3:PutBucketObjectLockConfiguration",
        "s3:PutLifecycleConfiguration",
        "s3:PutBucketPolicy",
        "s3:*",
        "*",
    ] {
        assert!(loosens_the_archive(action), "{action}");
    }
    for action in [
        "s3:PutObject",
        "s3:GetObject",
        "s3:ListBucket",
        "dynamodb:PutItem",
    ] {
        assert!(!loosens_the_archive(action), "{action}");
    }
}

#[test]
fn nothing_in_the_template_may_delete_unlock_or_reconfigure_the_archive() {
    let t = template();
    for (owner, document) in policy_documents(&t) {
        for s in one_or_many(at(&document, &["Statement"])) {
            if at(&s, &["Effect"]).as_str() != Some("Allow") {
                continue;
            }
            assert!(s.get("NotAction").is_none(), "{owner}: NotAction");
            for action in one_or_many(at(&s, &["Action"])).iter().map(scalar) {
                assert!(!loosens_the_archive(&action), "{owner} may {action}");
            }
        }
    }
}

#[test]
fn only_the_archiver_may_sign_and_the_readers_fetch_the_public_key() {
    // IAM's side of the keys: no policy of the template grants anything on KMS but the
    // archiver's kms:Sign and the operator policies' kms:GetPublicKey on the digest key, the
    // receiver's kms:Sign on its attestation key, and the reader's and operator's
    // kms:GetPublicKey on it (nothing more).
    let t = template();
    let mut kms: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (owner, document) in policy_documents(&t) {
        for s in one_or_many(at(&document, &["Statement"])) {
            assert_eq!(at(&s, &["Effect"]).as_str(), Some("Allow"), "{owner}");
            for action in one_or_many(at(&s, &["Action"])).iter().map(scalar) {
                if action.starts_with("kms:") || action.contains('*') {
                    for r in one_or_many(at(&s, &["Resource"])) {
                        kms.entry(format!("{action} on {}", resource_text(&r)))
                            .or_default()
                            .insert(owner.clone());
                    }
                }
            }
        }
    }
    assert_eq!(
        kms,
        BTreeMap::from([
            (
                format!("kms:GetPublicKey on {DIGEST_KEY}"),
                BTreeSet::from([
                    "AuditArchiverSigningPolicy".into(),
                    "AuditOperatorPolicy".into(),
                    "AuditReaderPolicy".into(),
                    "AuditWitnessPolicy".into()
                ])
            ),
            (
                format!("kms:GetPublicKey on {ATTESTATION_KEY}"),
                BTreeSet::from([
                    "AuditArchiverRole".into(),
                    "AuditOperatorPolicy".into(),
                    "AuditReaderPolicy".into(),
                ])
            ),
            (
                format!("kms:Sign on {DIGEST_KEY}"),
                BTreeSet::from(["AuditArchiverSigningPolicy".into()])
            ),
            (
                format!("kms:Sign on {ATTESTATION_KEY}"),
                BTreeSet::from(["AuditReceiverTablePolicy".into()])
            ),
        ])
    );
}

#[test]
fn witness_policy_reads_the_log_and_adds_cosignatures_only() {
    // auditctl witness: lists checkpoints and cosignatures, reads checkpoints, tiles and
    // cosignatures, fetches the log's public key, adds its cosignature under log/cosignatures/. No
    // other read (not the period indexes, which name every event), no other write.
    let t = template();
    let statements = one_or_many(at(
        props(&t, "AuditWitnessPolicy"),
        &["PolicyDocument", "Statement"],
    ));
    let mut grants = Grants::new();
    for s in &statements {
        assert_eq!(at(s, &["Effect"]).as_str(), Some("Allow"), "{s:?}");
        for key in ["NotAction", "NotResource", "Principal"] {
            assert!(s.get(key).is_none(), "no {key} ({s:?})");
        }
        let actions: Vec<String> = one_or_many(at(s, &["Action"])).iter().map(scalar).collect();
        if actions == ["s3:ListBucket"] {
            // Listing only the checkpoints and the cosignatures.
            assert_eq!(
                at(s, &["Condition", "StringLike", "s3:prefix"]),
                &Value::Sequence(vec![
                    Value::from("log/checkpoints/*"),
                    Value::from("log/cosignatures/*")
                ]),
                "{s:?}"
            );
            assert_eq!(at(s, &["Condition"]).as_mapping().map(|m| m.len()), Some(1));
        } else {
            assert!(s.get("Condition").is_none(), "{s:?}");
        }
        for action in actions {
            for r in one_or_many(at(s, &["Resource"])) {
                grants
                    .entry(action.clone())
                    .or_default()
                    .insert(resource_text(&r));
            }
        }
    }
    let one = |r: &str| vec![r.to_string()];
    assert_eq!(
        grants,
        owned_grants(&[
            ("s3:ListBucket", one(ARCHIVE_BUCKET)),
            (
                "s3:GetObject",
                under(&[CHECKPOINTS_PREFIX, TILE_PREFIX, COSIGNATURES_PREFIX])
            ),
            (
                "s3:PutObject",
                one(&format!("{ARCHIVE_BUCKET}/log/cosignatures/*"))
            ),
            ("kms:GetPublicKey", one(DIGEST_KEY)),
        ])
    );
}

#[test]
fn the_function_honours_failure_contexts_from_its_own_role_and_the_operator_role_only() {
    // docs/events.md "Delivery facts": the two role ids, set from the stack's own roles.
    let t = template();
    let env = at(
        props(&t, "AuditReceiverFunction"),
        &["Environment", "Variables"],
    );
    assert_eq!(
        at(env, &["RECEIVER_ROLE_ID"]),
        &get_att("AuditReceiverRole", "RoleId")
    );
    assert_eq!(
        at(env, &["REDRIVE_ROLE_ID"]),
        &get_att("AuditOperatorRole", "RoleId")
    );
    // The operator role: assumed from the account (whose own policies say who may), holding the
    // operator's policy and nothing else.
    let role = props(&t, "AuditOperatorRole");
    let trust = one_or_many(at(role, &["AssumeRolePolicyDocument", "Statement"]));
    assert_eq!(trust.len(), 1, "{trust:?}");
    assert_eq!(at(&trust[0], &["Effect"]).as_str(), Some("Allow"));
    assert_eq!(scalar(at(&trust[0], &["Action"])), "sts:AssumeRole");
    assert_eq!(
        resource_text(at(&trust[0], &["Principal", "AWS"])),
        "arn:${AWS::Partition}:iam::${AWS::AccountId}:root"
    );
    assert_eq!(
        one_or_many(at(role, &["ManagedPolicyArns"])),
        vec![Value::Mapping(
            [(Value::from("Ref"), Value::from("AuditOperatorPolicy"))]
                .into_iter()
                .collect()
        )]
    );
    for inline in ["Policies", "PermissionsBoundary"] {
        assert!(role.get(inline).is_none(), "{inline}");
    }
}
