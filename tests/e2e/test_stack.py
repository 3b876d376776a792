"""The local stack is built from template.yaml: the reader evaluates the template's intrinsics,
and the table and queues created on moto have the template's configuration."""

import json
from pathlib import Path

import pytest

from local import procs
from local.cfn import Template, TemplateError, key_id_placeholder, load_template
from local.stack import DEFAULT_TEMPLATE, create_stack, rate_seconds, read_stack

SAMPLE = Path(__file__).parent / "data" / "sample-template.yaml"


def test_short_tags_and_long_forms_evaluate_against_defaults():
    stack = read_stack(SAMPLE)
    assert stack.table_name == "AuditMessages"
    assert stack.table_ttl_attribute == "expiresAt"
    src, dlq = stack.source_queue, stack.dead_letter_queue
    assert src.visibility_timeout == 181          # !FindInMap keyed by a parameter ("30")
    assert dlq.name == "audit-receiver-local-dlq"  # !Sub list form, !If, pseudo parameter
    assert json.loads(src.attributes["RedrivePolicy"]) == {"deadLetterTargetArn": dlq.arn, "maxReceiveCount": 5}
    env = stack.function.environment
    assert env["TABLE_NAME"] == "AuditMessages"    # Ref to a resource: its physical name
    assert "RETENTION_DAYS" not in env             # !If -> AWS::NoValue removes the key
    assert env["QUEUE_ARN"] == src.arn             # long-form Fn::GetAtt
    assert env["JOINED"] == "a-10"
    assert env["MAX_CONCURRENCY"] == "32"          # Globals.Function merged
    assert stack.function.timeout_s == 30
    esm = stack.esm
    assert (esm.batch_size, esm.batching_window_s, esm.maximum_concurrency) == (10, 1.0, 5)
    assert esm.report_batch_item_failures


def test_parameters_conditions_and_numeric_mapping_keys():
    stack = read_stack(SAMPLE, {"FunctionTimeoutSeconds": "60", "UseFifo": "true", "RetentionDays": "30"})
    assert stack.source_queue.visibility_timeout == 361  # mapping key written as a YAML number
    dlq = stack.dead_letter_queue
    assert dlq.name.endswith(".fifo") and dlq.fifo
    assert stack.function.environment["RETENTION_DAYS"] == "30"


def test_bad_parameters_and_unknown_references_are_errors():
    with pytest.raises(TemplateError, match="not one of"):
        read_stack(SAMPLE, {"FunctionTimeoutSeconds": "45"})
    with pytest.raises(TemplateError, match="unknown parameter"):
        read_stack(SAMPLE, {"Nope": "1"})
    tpl = Template(load_template(SAMPLE))
    with pytest.raises(TemplateError):
        tpl.resolve({"Ref": "Missing"}, "x")
    # Only the functions template.yaml uses are evaluated; anything else is an error, not a guess.
    # Fn::Split makes the OCSF table's first eventDay from ArchiveStartDate (Fn::Join over it).
    assert tpl.resolve({"Fn::Join": ["", {"Fn::Split": ["-", "2026-01-01"]}]}, "x") == "20260101"
    for unsupported in ({"Fn::ImportValue": "x"}, {"Fn::Select": [0, ["a"]]},
                        {"Fn::Base64": "x"},
                        {"Fn::GetAtt": ["AuditMessagesTable", "StreamLabel"]}):
        with pytest.raises(TemplateError):
            tpl.resolve(unsupported, "x")


def test_or_and_and_conditions_choose_the_lookup_indexes_the_table_is_created_with():
    # LookupIndexes: each lookup index and its key attribute only when named (Fn::Or of the values
    # that name it); byAuditTime always.
    def indexes(value):
        props = read_stack(DEFAULT_TEMPLATE, {"LookupIndexes": value})._table_props
        return ([i["IndexName"] for i in props["GlobalSecondaryIndexes"]],
                [a["AttributeName"] for a in props["AttributeDefinitions"]][3:])

    assert indexes("actor,action,resource") == (["byAuditTime", "byActor", "byAction", "byResource"],
                                                ["actorKey", "actionKey", "resourceKey"])
    assert indexes("action,resource") == (["byAuditTime", "byAction", "byResource"], ["actionKey", "resourceKey"])
    assert indexes("none") == (["byAuditTime"], [])
    tpl = Template({"Resources": {}, "Conditions": {"Yes": {"Fn::Equals": ["a", "a"]},
                                                    "No": {"Fn::Equals": ["a", "b"]}}})
    assert tpl.resolve({"Fn::Or": [{"Condition": "No"}, {"Condition": "Yes"}]}) is True
    assert tpl.resolve({"Fn::And": [{"Condition": "Yes"}, {"Fn::Equals": ["a", "b"]}]}) is False
    assert tpl.resolve({"Fn::And": [{"Condition": "Yes"}, {"Fn::Not": [{"Condition": "No"}]}]}) is True


def test_scaling_flags_change_only_what_they_name_and_are_recorded():
    base = read_stack(DEFAULT_TEMPLATE)
    scaled = read_stack(DEFAULT_TEMPLATE, visibility_timeout=3, batching_window=0)
    assert scaled.source_queue.visibility_timeout == 3
    assert scaled.access_queue.visibility_timeout == 3  # every queue the receiver reads
    assert scaled.scaled["VisibilityTimeout"] == {"template": base.source_queue.visibility_timeout, "local": 3}
    assert [ev.batching_window_s for ev in scaled.function.events] == [0, 0]
    assert scaled.esm.batch_size == base.esm.batch_size
    assert scaled.dead_letter_queue.attributes == base.dead_letter_queue.attributes


def test_real_template_matches_the_contract():
    stack = read_stack(DEFAULT_TEMPLATE)
    assert stack.table_logical_id == "AuditMessagesTable"
    assert set(stack.queues) >= {"AuditQueue", "AuditDeadLetterQueue"}
    assert stack.source_queue.logical_id == "AuditQueue"
    assert stack.dead_letter_queue.logical_id == "AuditDeadLetterQueue"
    assert stack.source_queue.max_receive_count >= 5
    # Lambda's guidance: visibility timeout >= 6 x function timeout (+ batching window).
    assert stack.source_queue.visibility_timeout >= 6 * stack.function.timeout_s + stack.esm.batching_window_s
    assert stack.function.environment["TABLE_NAME"] == stack.table_name
    assert stack.esm.report_batch_item_failures
    # The access queue: read by the same function through a mapping of its own, the same settings.
    assert stack.access_queue.logical_id == "AuditAccessQueue"
    assert stack.function.environment["ACCESS_QUEUE_ARN"] == stack.access_queue.arn
    assert [q.logical_id for q in stack.event_queues] == ["AuditQueue", "AuditAccessQueue"]
    main, access = stack.function.events
    assert {**vars(access), "queue_logical_id": "AuditQueue"} == vars(main)
    assert stack.access_queue.attributes["RedrivePolicy"] == stack.source_queue.attributes["RedrivePolicy"]
    # The functions run as their roles.
    assert stack.function.role_logical_id == "AuditReceiverRole"
    assert stack.archiver.role_logical_id == "AuditArchiverRole"
    # The archiver: the function with the table's stream event, its bucket and failure queue.
    assert stack.archiver.logical_id == "AuditArchiverFunction" and stack.archiver.binary == "audit-archiver"
    assert stack.archive_bucket.logical_id == "AuditArchiveBucket"
    assert stack.archive_failure_queue.logical_id == "AuditArchiveFailureQueue"
    assert read_stack(SAMPLE).archiver is None  # a template without one


def test_digest_period_is_scaled_only_when_asked_and_recorded():
    base = read_stack(DEFAULT_TEMPLATE)
    scaled = read_stack(DEFAULT_TEMPLATE, digest_period=60)
    assert base.archiver.environment["DIGEST_PERIOD_SECONDS"] == "3600" and not base.scaled
    assert scaled.archiver.environment["DIGEST_PERIOD_SECONDS"] == "60"
    assert scaled.scaled == {"DIGEST_PERIOD_SECONDS": {"template": "3600", "local": 60}}


def test_the_digest_key_and_the_seal_schedule_are_read_from_the_template():
    stack = read_stack(DEFAULT_TEMPLATE)
    key = stack.keys["AuditDigestKey"]
    tpl = load_template(DEFAULT_TEMPLATE)["Resources"]["AuditDigestKey"]["Properties"]
    for prop in ("KeySpec", "KeyUsage", "PendingWindowInDays"):
        assert key.properties[prop] == tpl[prop]
    assert key.aliases == ["alias/audit-receiver-local-audit-digest"]
    # The key policy resolved: the archiver's role by its local ARN, the account's root.
    text = json.dumps(key.properties["KeyPolicy"])
    assert "arn:aws:iam::123456789012:role/audit-receiver-local-AuditArchiverRole" in text
    assert "arn:aws:iam::123456789012:root" in text and "Fn::" not in text
    # Before the key exists its id is a placeholder, which create_stack replaces.
    assert stack.archiver.environment["DIGEST_KEY_ID"] == (
        f"arn:aws:kms:us-east-1:123456789012:key/{key_id_placeholder('AuditDigestKey')}")
    assert stack.digest_key is key
    ev = stack.schedule
    assert (ev.name, ev.expression, ev.interval_s, ev.enabled) == ("SealDigests", "rate(5 minutes)", 300, True)
    assert ev.rule_arn == "arn:aws:events:us-east-1:123456789012:rule/audit-receiver-local-AuditArchiverFunctionSealDigests"
    scaled = read_stack(DEFAULT_TEMPLATE, schedule_interval=5)
    assert scaled.schedule.interval_s == 5
    assert scaled.scaled == {"SealDigests": {"template": "rate(5 minutes)", "local": "every 5 s"}}


def test_rate_expressions_read_as_eventbridge_reads_them():
    assert rate_seconds("rate(5 minutes)") == 300
    assert rate_seconds("rate(1 minute)") == 60
    assert rate_seconds("rate(2 hours)") == 7200
    assert rate_seconds("rate(1 day)") == 86400
    for refused in ("rate(1 minutes)", "rate(5 minute)", "rate(0 minutes)", "cron(0/5 * * * ? *)", ""):
        with pytest.raises(TemplateError):
            rate_seconds(refused)


def test_create_stack_on_moto(work_dir):
    moto, endpoint = procs.start_moto(work_dir)
    try:
        stack = create_stack(read_stack(DEFAULT_TEMPLATE), endpoint)
        from local.harness import _client

        ddb, sqs = _client("dynamodb", endpoint), _client("sqs", endpoint)
        table = ddb.describe_table(TableName=stack.table_name)["Table"]
        assert {(k["AttributeName"], k["KeyType"]) for k in table["KeySchema"]} == {
            ("messageId", "HASH"), ("auditTime", "RANGE")}
        assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
        ttl = ddb.describe_time_to_live(TableName=stack.table_name)["TimeToLiveDescription"]
        assert ttl["AttributeName"] == "expiresAt" and ttl["TimeToLiveStatus"] == "ENABLED"
        src = sqs.get_queue_attributes(QueueUrl=stack.source_queue.url, AttributeNames=["All"])["Attributes"]
        assert src["VisibilityTimeout"] == str(stack.source_queue.visibility_timeout)
        assert src["MessageRetentionPeriod"] == stack.source_queue.attributes["MessageRetentionPeriod"]
        redrive = json.loads(src["RedrivePolicy"])
        assert redrive["deadLetterTargetArn"] == stack.dead_letter_queue.arn
        assert int(redrive["maxReceiveCount"]) == stack.source_queue.max_receive_count
        # The function dead-letters to the local dead-letter queue, with the queue's maxReceiveCount.
        env = stack.function.environment
        assert env["DEAD_LETTER_QUEUE_URL"] == stack.dead_letter_queue.url
        assert env["DEAD_LETTER_QUEUE_URL"].startswith(endpoint)
        assert int(env["MAX_RECEIVE_COUNT"]) == stack.source_queue.max_receive_count
        dlq = sqs.get_queue_attributes(QueueUrl=stack.dead_letter_queue.url, AttributeNames=["All"])["Attributes"]
        assert int(dlq["MessageRetentionPeriod"]) > int(src["MessageRetentionPeriod"])
        # The digest key: as the template defines it, its real ARN where the template refers to it.
        kms = _client("kms", endpoint)
        key = stack.digest_key
        meta = kms.describe_key(KeyId=key.key_id)["KeyMetadata"]
        assert (meta["KeySpec"], meta["KeyUsage"], meta["Enabled"]) == ("ECC_NIST_P256", "SIGN_VERIFY", True)
        assert meta["SigningAlgorithms"] == ["ECDSA_SHA_256"]
        assert meta["Description"] == key.properties["Description"]
        assert meta["Arn"] == key.arn == stack.archiver.environment["DIGEST_KEY_ID"]
        stored = json.loads(kms.get_key_policy(KeyId=key.key_id, PolicyName="default")["Policy"])
        assert stored == key.properties["KeyPolicy"]
        aliases = kms.list_aliases(KeyId=key.key_id)["Aliases"]
        assert [a["AliasName"] for a in aliases] == key.aliases
        assert key_id_placeholder("AuditDigestKey") not in json.dumps(stack.to_json())
        # The query results bucket: versioned, and its lifecycle removes what expiration leaves (the
        # noncurrent versions, then their delete markers), as S3 was given it.
        s3 = _client("s3", endpoint)
        results = stack.buckets["AuditQueryResultsBucket"].name
        assert s3.get_bucket_versioning(Bucket=results)["Status"] == "Enabled"
        rules = {r["ID"]: r for r in s3.get_bucket_lifecycle_configuration(Bucket=results)["Rules"]}
        assert rules["expire-query-results"]["Expiration"] == {"Days": 30}
        assert rules["expire-query-results"]["NoncurrentVersionExpiration"]["NoncurrentDays"] == 1
        assert rules["remove-expired-delete-markers"]["Expiration"] == {"ExpiredObjectDeleteMarker": True}
    finally:
        moto.stop()


def test_the_access_queue_the_table_tags_and_the_functions_role_on_moto(work_dir):
    from local.harness import LocalSystem, _client

    moto, endpoint = procs.start_moto(work_dir)
    try:
        # The local system as `make local-up` builds it, up to the functions (not started here).
        system = LocalSystem(work_dir)
        stack = create_stack(system.stack, endpoint)
        system.endpoint = endpoint
        ddb, sqs, iam = _client("dynamodb", endpoint), _client("sqs", endpoint), _client("iam", endpoint)

        access = sqs.get_queue_attributes(QueueUrl=stack.access_queue.url, AttributeNames=["All"])["Attributes"]
        assert json.loads(access["RedrivePolicy"])["deadLetterTargetArn"] == stack.dead_letter_queue.arn
        assert access["VisibilityTimeout"] == str(stack.source_queue.visibility_timeout)
        assert access["QueueArn"] == stack.function.environment["ACCESS_QUEUE_ARN"]
        # (moto 5.2.5 keeps no RedriveAllowPolicy: what the stack asks for is checked, not what moto holds.)
        assert set(json.loads(stack.dead_letter_queue.attributes["RedriveAllowPolicy"])["sourceQueueArns"]) == {
            stack.source_queue.arn, access["QueueArn"]}

        # The table names the access queue, the receiver's role and its hot window (RetentionDays:
        # 0, items kept forever, as make local-up deploys), as auditctl reads them.
        table_arn = ddb.describe_table(TableName=stack.table_name)["Table"]["TableArn"]
        tags = {t["Key"]: t["Value"] for t in ddb.list_tags_of_resource(ResourceArn=table_arn)["Tags"]}
        role = iam.get_role(RoleName="audit-receiver-local-AuditReceiverRole")["Role"]
        assert tags == {"audit:access-queue-arn": access["QueueArn"], "audit:receiver-role-id": role["RoleId"],
                        "audit:retention-days": "0"}
        assert json.loads(json.dumps(role["AssumeRolePolicyDocument"])) == stack.roles["AuditReceiverRole"].trust

        # The receiver runs as that role, session named after the function, as in Lambda: what it
        # sends (its dead letters) carries "<RoleId>:<function name>" as SenderId.
        creds = stack.function.credentials
        import boto3

        as_function = {"endpoint_url": endpoint, "region_name": "us-east-1",
                       "aws_access_key_id": creds["AWS_ACCESS_KEY_ID"],
                       "aws_secret_access_key": creds["AWS_SECRET_ACCESS_KEY"],
                       "aws_session_token": creds["AWS_SESSION_TOKEN"]}
        expected = f"{role['RoleId']}:{stack.function.name}"
        assert boto3.client("sts", **as_function).get_caller_identity()["UserId"] == expected
        boto3.client("sqs", **as_function).send_message(QueueUrl=stack.dead_letter_queue.url, MessageBody="x")
        (letter,) = sqs.receive_message(QueueUrl=stack.dead_letter_queue.url,
                                        MessageSystemAttributeNames=["SenderId"])["Messages"]
        assert letter["Attributes"]["SenderId"] == expected
        assert expected.split(":")[0] == tags["audit:receiver-role-id"]

        # .local/stack.env names the access queue for auditctl.
        env = system.stack_env()
        assert env["ACCESS_QUEUE_URL"] == stack.access_queue.url and env["ACCESS_QUEUE_URL"].startswith(endpoint)
    finally:
        moto.stop()


def test_lint_variants_set_only_the_named_parameters_defaults(tmp_path):
    from local import lint_variants

    text = DEFAULT_TEMPLATE.read_text()
    varied = tmp_path / "template.yaml"
    varied.write_text(lint_variants.with_defaults(text, {"LookupIndexes": "none", "TableBillingMode": "PROVISIONED",
                                                          "BatchingWindow": "20"}))
    tpl = Template(load_template(DEFAULT_TEMPLATE))
    doc = Template(load_template(varied))
    assert doc.parameter_values["LookupIndexes"] == "none"
    assert doc.parameter_values["TableBillingMode"] == "PROVISIONED"
    changed = {k for k, v in doc.parameter_values.items() if tpl.parameter_values[k] != v}
    assert changed == {"LookupIndexes", "TableBillingMode", "BatchingWindow"}
    # A Number stays a number (cfn-lint compares it with the AllowedValues as written).
    assert "    Default: 20\n" in varied.read_text()
    with pytest.raises(SystemExit, match="Nope"):
        lint_variants.with_defaults(text, {"Nope": "1"})
