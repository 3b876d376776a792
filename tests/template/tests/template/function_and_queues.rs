//! Owns the checks on the receiver function, its SQS event source and the queues (redrive,
//! retention, encryption, TLS). Must not know how the function works inside, only the names it shares.

use crate::support::*;
use serde_yaml::Value;

/// SQS limits: the longest visibility timeout (12 hours).
const SQS_MAX_VISIBILITY_SECONDS: u64 = 43_200;
/// Lambda limits: the longest function timeout and the longest SQS batching window.
const LAMBDA_MAX_TIMEOUT_SECONDS: u64 = 900;
const LAMBDA_MAX_BATCHING_WINDOW_SECONDS: u64 = 300;

/// The queues the function reads, each through an SQS event of its own (docs/deploy.md "The access
/// queue"): the application's and auditctl's access events.
const SOURCE_QUEUES: [&str; 2] = ["AuditQueue", "AuditAccessQueue"];

/// The function's SQS events, each with its properties.
fn sqs_events(t: &Value) -> Vec<&Value> {
    at(function(t), &["Events"])
        .as_mapping()
        .expect("Events is a mapping")
        .values()
        .filter(|e| e.get("Type").and_then(Value::as_str) == Some("SQS"))
        .map(|e| at(e, &["Properties"]))
        .collect()
}

/// The function's SQS event on `queue` (exactly one).
fn sqs_event<'a>(t: &'a Value, queue: &str) -> &'a Value {
    let on_queue: Vec<&Value> = sqs_events(t)
        .into_iter()
        .filter(|e| at(e, &["Queue"]) == &get_att(queue, "Arn"))
        .collect();
    assert_eq!(
        on_queue.len(),
        1,
        "the function has exactly one SQS event on {queue}"
    );
    on_queue[0]
}

#[test]
fn function_is_an_arm64_al2023_binary_built_by_cargo_lambda() {
    let t = template();
    let f = resource(&t, "AuditReceiverFunction");
    assert_eq!(at(f, &["Type"]).as_str(), Some("AWS::Serverless::Function"));
    assert_eq!(
        at(f, &["Metadata", "BuildMethod"]).as_str(),
        Some("rust-cargolambda")
    );
    assert_eq!(
        at(f, &["Metadata", "BuildProperties", "Binary"]).as_str(),
        Some("audit-receiver"),
        "sam build must build the crate's binary"
    );
    let p = function(&t);
    assert_eq!(at(p, &["Runtime"]).as_str(), Some("provided.al2023"));
    assert_eq!(
        at(p, &["Architectures"]),
        &Value::Sequence(vec![Value::from("arm64")])
    );
    assert_eq!(at(p, &["CodeUri"]).as_str(), Some("."));
    assert_eq!(at(p, &["Handler"]).as_str(), Some("bootstrap"));
}

#[test]
fn sqs_event_reports_batch_item_failures_and_takes_its_sizing_from_parameters() {
    let t = template();
    let e = sqs_event(&t, "AuditQueue");
    assert!(
        one_or_many(at(e, &["FunctionResponseTypes"]))
            .contains(&Value::from("ReportBatchItemFailures")),
        "without ReportBatchItemFailures one failed record would send the whole batch back"
    );
    for path in [
        &["BatchSize"][..],
        &["MaximumBatchingWindowInSeconds"],
        &["ScalingConfig", "MaximumConcurrency"],
    ] {
        assert!(
            parameter_ref(&t, at(e, path)).is_some(),
            "{} is a parameter",
            path.join(".")
        );
    }
    for path in ["Timeout", "MemorySize"] {
        assert!(
            parameter_ref(&t, at(function(&t), &[path])).is_some(),
            "function {path} is a parameter"
        );
    }

    let (batch_min, batch_max, _) =
        numeric_range(&t, &parameter_ref(&t, at(e, &["BatchSize"])).unwrap());
    assert!(
        batch_min >= 1 && batch_max <= 10_000,
        "SQS batch sizes are 1 to 10000"
    );
    let concurrency = parameter_ref(&t, at(e, &["ScalingConfig", "MaximumConcurrency"])).unwrap();
    let (min, max, _) = numeric_range(&t, &concurrency);
    assert!(
        min >= 2 && max <= 1000,
        "ScalingConfig.MaximumConcurrency is 2 to 1000"
    );
    let (min, max, _) = numeric_range(
        &t,
        &parameter_ref(&t, at(function(&t), &["MemorySize"])).unwrap(),
    );
    assert!(
        min >= 128 && max <= 10_240,
        "Lambda memory is 128 to 10240 MB"
    );
}

#[test]
fn the_access_queue_has_its_own_mapping_with_the_audit_queues_batch_settings() {
    // docs/deploy.md "The access queue": AuditAccessQueue is read by the same function through an
    // event source mapping of its own. The same settings, so that every check on AuditQueue's
    // mapping holds for it too.
    let t = template();
    let events = sqs_events(&t);
    assert_eq!(
        events.len(),
        SOURCE_QUEUES.len(),
        "one SQS event per queue the function reads, no other"
    );
    let without_queue = |e: &Value| {
        let mut e = e.as_mapping().expect("event properties").clone();
        e.remove("Queue");
        e
    };
    assert_eq!(
        without_queue(sqs_event(&t, "AuditAccessQueue")),
        without_queue(sqs_event(&t, "AuditQueue")),
        "the access queue's mapping has AuditQueue's BatchSize, window, scaling and \
         ReportBatchItemFailures"
    );
}

#[test]
fn the_function_is_told_which_queue_carries_access_events() {
    let t = template();
    assert_eq!(
        at(
            function(&t),
            &["Environment", "Variables", "ACCESS_QUEUE_ARN"]
        ),
        &get_att("AuditAccessQueue", "Arn"),
        "ACCESS_QUEUE_ARN is the access queue's ARN: a record with that eventSourceARN is an \
         access delivery"
    );
}

#[test]
fn the_access_queue_is_configured_as_the_audit_queue() {
    let t = template();
    let (queue, access) = (props(&t, "AuditQueue"), props(&t, "AuditAccessQueue"));
    for property in [
        "VisibilityTimeout",
        "MessageRetentionPeriod",
        "SqsManagedSseEnabled",
        "RedrivePolicy",
    ] {
        assert_eq!(
            at(access, &[property]),
            at(queue, &[property]),
            "AuditAccessQueue's {property} is AuditQueue's"
        );
    }
    assert!(
        access.get("FifoQueue").is_none() && queue.get("FifoQueue").is_none(),
        "both standard queues"
    );
}

#[test]
fn batches_over_ten_are_only_accepted_with_a_batching_window() {
    // Lambda rejects an SQS event source with BatchSize > 10 and no batching window; the
    // template's Rules must refuse such parameters before any resource is touched.
    let t = template();
    let e = sqs_event(&t, "AuditQueue");
    let batch = parameter_ref(&t, at(e, &["BatchSize"])).unwrap();
    let window = parameter_ref(&t, at(e, &["MaximumBatchingWindowInSeconds"])).unwrap();
    let (_, batch_max, _) = numeric_range(&t, &batch);
    assert!(
        rules_accept(&t, &params_with(&t, &[])),
        "the defaults are accepted"
    );
    for w in allowed_values(&t, &window) {
        for b in [1, 2, 10, 11, 100, batch_max] {
            let params = params_with(&t, &[(&batch, b.to_string()), (&window, w.clone())]);
            let lambda_accepts = b <= 10 || w != "0";
            assert_eq!(
                rules_accept(&t, &params),
                lambda_accepts,
                "BatchSize {b} with window {w}"
            );
        }
    }
}

#[test]
fn visibility_timeout_covers_six_function_timeouts_plus_the_window_for_every_allowed_pair() {
    let t = template();
    let timeout =
        parameter_ref(&t, at(function(&t), &["Timeout"])).expect("Timeout is a parameter");
    let window = parameter_ref(
        &t,
        at(
            sqs_event(&t, "AuditQueue"),
            &["MaximumBatchingWindowInSeconds"],
        ),
    )
    .expect("the batching window is a parameter");
    let visibility = at(props(&t, "AuditQueue"), &["VisibilityTimeout"]);

    let timeouts = allowed_values(&t, &timeout);
    let windows = allowed_values(&t, &window);
    assert!(timeouts.contains(&scalar(at(parameter(&t, &timeout), &["Default"]))));
    assert!(windows.contains(&scalar(at(parameter(&t, &window), &["Default"]))));
    for tv in &timeouts {
        for wv in &windows {
            let (ts, ws): (u64, u64) = (tv.parse().unwrap(), wv.parse().unwrap());
            assert!(ts <= LAMBDA_MAX_TIMEOUT_SECONDS && ws <= LAMBDA_MAX_BATCHING_WINDOW_SECONDS);
            let params = params_with(&t, &[(&timeout, tv.clone()), (&window, wv.clone())]);
            let vt = number(&eval(&t, visibility, &params));
            let needed = 6 * ts + ws;
            assert!(
                vt >= needed,
                "timeout {ts}s, window {ws}s: visibility {vt}s < {needed}s"
            );
            assert!(
                vt <= needed + 60,
                "timeout {ts}s, window {ws}s: visibility {vt}s delays every retry needlessly"
            );
            assert!(
                vt <= SQS_MAX_VISIBILITY_SECONDS,
                "SQS allows at most 12 hours"
            );
        }
    }
}

#[test]
fn failed_messages_reach_the_dead_letter_queue_after_at_least_five_receives() {
    let t = template();
    for queue in SOURCE_QUEUES {
        let redrive = at(props(&t, queue), &["RedrivePolicy"]);
        assert_eq!(
            at(redrive, &["deadLetterTargetArn"]),
            &get_att("AuditDeadLetterQueue", "Arn"),
            "{queue}"
        );
        for count in numeric_values(&t, at(redrive, &["maxReceiveCount"])) {
            assert!(count >= 5, "{queue}: maxReceiveCount {count} < 5");
        }
    }
}

#[test]
fn dead_letter_queue_keeps_messages_fourteen_days_longer_than_the_queue() {
    let t = template();
    let dlq = number(at(
        props(&t, "AuditDeadLetterQueue"),
        &["MessageRetentionPeriod"],
    ));
    assert_eq!(
        dlq, SQS_MAX_RETENTION_SECONDS,
        "the dead-letter queue keeps messages 14 days"
    );
    for source in SOURCE_QUEUES {
        let queue = number(at(props(&t, source), &["MessageRetentionPeriod"]));
        assert!(
            dlq > queue,
            "a moved message keeps its enqueue time: DLQ {dlq}s must exceed {source}'s {queue}s"
        );
    }
}

/// An `Fn::Sub` of pseudo parameters only (`${AWS::StackName}`, ...), evaluated for a sample
/// stack, partition, region and account.
fn sub_pseudo(value: &Value) -> String {
    let text = scalar(at(value, &["Fn::Sub"]));
    let evaluated = [
        ("${AWS::Partition}", "aws"),
        ("${AWS::Region}", "eu-west-1"),
        ("${AWS::AccountId}", "123456789012"),
        ("${AWS::StackName}", "audit-stack"),
    ]
    .iter()
    .fold(text, |text, (name, value)| text.replace(name, value));
    assert!(
        !evaluated.contains("${"),
        "only pseudo parameters: {evaluated}"
    );
    evaluated
}

/// `queue`'s ARN as another resource may write it: `Fn::GetAtt`, or an `Fn::Sub` that names the
/// queue's own fixed name.
fn names_the_queue(t: &Value, queue: &str, arn: &Value) -> bool {
    if arn == &get_att(queue, "Arn") {
        return true;
    }
    let Some(name) = props(t, queue).get("QueueName") else {
        return false;
    };
    arn.get("Fn::Sub").is_some()
        && sub_pseudo(arn) == format!("arn:aws:sqs:eu-west-1:123456789012:{}", sub_pseudo(name))
}

#[test]
fn dead_letter_queue_takes_dead_letters_and_redrives_from_the_two_source_queues_only() {
    let t = template();
    let policy = at(props(&t, "AuditDeadLetterQueue"), &["RedriveAllowPolicy"]);
    assert_eq!(
        at(policy, &["redrivePermission"]).as_str(),
        Some("byQueue"),
        "allowAll lets any queue of the account use the audit dead-letter queue"
    );
    let sources = one_or_many(at(policy, &["sourceQueueArns"]));
    assert_eq!(
        sources.len(),
        SOURCE_QUEUES.len(),
        "AuditQueue, AuditAccessQueue and no other: {sources:?}"
    );
    for queue in SOURCE_QUEUES {
        assert!(
            sources.iter().any(|arn| names_the_queue(&t, queue, arn)),
            "{queue}'s ARN is not among {sources:?}"
        );
    }
}

#[test]
fn names_the_queue_tells_its_arn_from_another_queues() {
    let t = template();
    let arn = |text: &str| -> Value {
        serde_yaml::from_str(&format!("{{Fn::Sub: '{text}'}}")).expect("literal YAML")
    };
    let prefix = "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:${AWS::StackName}";
    let own = format!("{prefix}-AuditQueue");
    assert!(names_the_queue(&t, "AuditQueue", &arn(&own)));
    assert!(!names_the_queue(&t, "AuditAccessQueue", &arn(&own)));
    assert!(names_the_queue(
        &t,
        "AuditQueue",
        &get_att("AuditQueue", "Arn")
    ));
    assert!(!names_the_queue(
        &t,
        "AuditQueue",
        &arn(&format!("{prefix}-Other"))
    ));
    assert!(!names_the_queue(
        &t,
        "AuditQueue",
        &get_att("AuditDeadLetterQueue", "Arn")
    ));
}

/// The longest stack name for which every fixed queue name (`${AWS::StackName}-...`) stays
/// within SQS's 80 characters (docs/deploy.md states it).
const LONGEST_STACK_NAME: usize = 68;

#[test]
fn fixed_queue_names_fit_sqs_for_the_stack_names_the_docs_allow() {
    let t = template();
    let stack = "s".repeat(LONGEST_STACK_NAME);
    for (name, _) in resources_of_type(&t, "AWS::SQS::Queue") {
        let Some(fixed) = props(&t, &name).get("QueueName") else {
            continue;
        };
        let text = scalar(at(fixed, &["Fn::Sub"])).replace("${AWS::StackName}", &stack);
        assert!(
            text.len() <= 80,
            "{name}: {text} is {} characters, SQS allows 80",
            text.len()
        );
    }
    let deploy =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/deploy.md"))
            .expect("docs/deploy.md is readable");
    let deploy = deploy.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        deploy.contains(&format!(
            "stack names of at most {LONGEST_STACK_NAME} characters"
        )),
        "docs/deploy.md states the longest stack name"
    );
}

/// The statements of the queue policies that apply to `queue`.
fn queue_policy_statements(t: &Value, queue: &str) -> Vec<Value> {
    resources_of_type(t, "AWS::SQS::QueuePolicy")
        .iter()
        .filter(|(_, p)| one_or_many(at(p, &["Properties", "Queues"])).contains(&reference(queue)))
        .flat_map(|(_, p)| one_or_many(at(p, &["Properties", "PolicyDocument", "Statement"])))
        .collect()
}

#[test]
fn nobody_may_start_a_message_move_task_from_the_dead_letter_queue() {
    // SQS's own redrive gives every message a new id and SentTimestamp; one SQS moved there by
    // itself has no failureContext and would become a second item. auditctl keeps the identity.
    let t = template();
    let denied = queue_policy_statements(&t, "AuditDeadLetterQueue")
        .iter()
        .any(|s| {
            at(s, &["Effect"]).as_str() == Some("Deny")
                && at(s, &["Principal"]).as_str() == Some("*")
                && one_or_many(at(s, &["Action"]))
                    .iter()
                    .any(|a| ["sqs:StartMessageMoveTask", "sqs:*"].contains(&scalar(a).as_str()))
                && one_or_many(at(s, &["Resource"]))
                    .contains(&get_att("AuditDeadLetterQueue", "Arn"))
                && s.get("Condition").is_none()
        });
    assert!(
        denied,
        "the dead-letter queue's policy denies sqs:StartMessageMoveTask to everyone, unconditionally"
    );
}

#[test]
fn every_queue_is_encrypted_and_refuses_requests_without_tls() {
    let t = template();
    let policies = resources_of_type(&t, "AWS::SQS::QueuePolicy");
    let queues: Vec<String> = resources_of_type(&t, "AWS::SQS::Queue")
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    for expected in [
        "AuditQueue",
        "AuditAccessQueue",
        "AuditDeadLetterQueue",
        "AuditArchiveFailureQueue",
    ] {
        assert!(queues.iter().any(|q| q == expected), "{expected} exists");
    }
    for queue in queues.iter().map(String::as_str) {
        assert_eq!(
            at(props(&t, queue), &["SqsManagedSseEnabled"]),
            &Value::Bool(true),
            "{queue} has SSE"
        );
        let denies_plain_http = policies
            .iter()
            .filter(|(_, p)| {
                one_or_many(at(p, &["Properties", "Queues"])).contains(&reference(queue))
            })
            .flat_map(|(_, p)| one_or_many(at(p, &["Properties", "PolicyDocument", "Statement"])))
            .any(|s| {
                at(&s, &["Effect"]).as_str() == Some("Deny")
                    && at(&s, &["Principal"]).as_str() == Some("*")
                    && one_or_many(at(&s, &["Action"])).contains(&Value::from("sqs:*"))
                    && one_or_many(at(&s, &["Resource"])).contains(&get_att(queue, "Arn"))
                    && scalar(at(&s, &["Condition", "Bool", "aws:SecureTransport"])) == "false"
            });
        assert!(
            denies_plain_http,
            "{queue} has a policy denying aws:SecureTransport false"
        );
    }
}

/// The Allow statements of `queue`'s policies, each as written (an `Fn::If` left as it is).
fn queue_policy_allows(t: &Value, queue: &str) -> Vec<Value> {
    queue_policy_statements(t, queue)
        .into_iter()
        .filter(|s| s.get("Effect").and_then(Value::as_str) != Some("Deny"))
        .collect()
}

#[test]
fn the_access_queue_lets_in_nobody_by_its_own_policy() {
    // Who may send access events is IAM's to say (the reader and operator policies); the queue's
    // policy only refuses plain HTTP.
    let t = template();
    assert_eq!(
        queue_policy_allows(&t, "AuditAccessQueue"),
        Vec::<Value>::new()
    );
}

#[test]
fn eventbridge_may_send_to_the_audit_queue_only_for_the_rules_the_parameter_names() {
    // An EventBridge rule's SQS target is sent by EventBridge's service principal, which only
    // the queue's policy can allow (docs/deploy.md "Producers").
    let t = template();
    let allows = queue_policy_allows(&t, "AuditQueue");
    assert_eq!(allows.len(), 1, "one Allow statement: {allows:?}");
    let branches = at(&allows[0], &["Fn::If"])
        .as_sequence()
        .expect("Fn::If [condition, statement, AWS::NoValue]");
    assert_eq!(
        branches[2],
        reference("AWS::NoValue"),
        "nothing without a rule"
    );
    let condition = at(&t, &["Conditions", &scalar(&branches[0])]);
    let rule = "EventBridgeRuleArn";
    assert_eq!(
        scalar(at(parameter(&t, rule), &["Default"])),
        "",
        "no rule by default"
    );
    assert!(!truth(&t, condition, &params_with(&t, &[])));
    assert!(truth(
        &t,
        condition,
        &params_with(
            &t,
            &[(
                rule,
                "arn:aws:events:eu-west-1:123456789012:rule/audit-*".into()
            )]
        )
    ));
    let s = &branches[1];
    assert_eq!(at(s, &["Effect"]).as_str(), Some("Allow"));
    assert_eq!(
        at(s, &["Principal", "Service"]).as_str(),
        Some("events.amazonaws.com")
    );
    assert_eq!(
        one_or_many(at(s, &["Action"])),
        vec![Value::from("sqs:SendMessage")]
    );
    assert_eq!(
        one_or_many(at(s, &["Resource"])),
        vec![get_att("AuditQueue", "Arn")]
    );
    assert_eq!(
        at(s, &["Condition", "ArnLike", "aws:SourceArn"]),
        &reference(rule),
        "only the rules named"
    );
    assert_eq!(
        at(s, &["Condition", "StringEquals", "aws:SourceAccount"]),
        &reference("AWS::AccountId"),
        "only this account's rules"
    );
}
