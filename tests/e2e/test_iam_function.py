"""The function's role in template.yaml is enough and no more, under moto's access control: the
real function binary, with temporary credentials of a role that holds exactly the role's inline
policies (read from the template at run time, resolved to this stack's ARNs), writes a valid
record and dead-letters an invalid one, every request signed and checked. Taking one action out
of the role makes something observable fail, so each is needed; what the role does not grant
is refused; a wrong secret or session token is refused. What moto cannot check:
tests/e2e/iam_support.py."""

import json

import pytest

from iam_support import (DENIED, Account, Function, FunctionExited, actions_of, function_role, refused,
                         resources_of, without_action)
from local.harness import log_events
from local.trigger import lambda_record


@pytest.fixture
def account(work_dir, request):
    """The account; ``indirect`` "moto" keeps moto's own XML refusals (iam_support.AWS_JSON_ERRORS)."""
    acc = Account(work_dir, moto_errors=getattr(request, "param", "aws") == "moto")
    yield acc
    acc.close()


def _role(account: Account, drop: str | None = None):
    role = function_role(account.template)
    policies = without_action(role.policies, drop) if drop else role.policies
    name = account.template.physical_name(role.logical_id)
    return account.assume_role(name, role.trust, policies)


def _send(account: Account, body: str) -> str:
    return account.client("sqs").send_message(QueueUrl=account.queue.url, MessageBody=body)["MessageId"]


def _poll_as_event_source(account: Account, creds, expected: int, url: str | None = None) -> list[dict]:
    """What Lambda's event source mapping does with the function's role: read the queue's
    attributes, receive with every attribute. The messages, received once each."""
    sqs = account.client("sqs", creds)
    url = url or account.queue.url
    sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
    messages: list[dict] = []
    for _ in range(10):  # moto returns what is visible at once; the bound only stops a broken run
        if len(messages) >= expected:
            break
        messages += sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                        MessageSystemAttributeNames=["All"],
                                        MessageAttributeNames=["All"]).get("Messages", [])
    assert len(messages) == expected, messages
    return messages


def _delete_as_event_source(account: Account, creds, messages: list[dict], url: str | None = None) -> None:
    entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]
    done = account.client("sqs", creds).delete_message_batch(QueueUrl=url or account.queue.url, Entries=entries)
    assert len(done.get("Successful", [])) == len(messages), done


def _run(account: Account, creds, messages: list[dict], queue_arn: str | None = None) -> tuple[dict, list[dict]]:
    """One invocation of the function binary with these messages; its response and its logs."""
    event = {"Records": [lambda_record(m, queue_arn or account.queue.arn) for m in messages]}
    with Function(account, creds) as fn:
        response = fn.invoke(event)
    return response, log_events(fn.log_path)


def _item(account: Account, message_id: str, audit_time: str) -> dict | None:
    return account.client("dynamodb").get_item(
        TableName=account.table_name, Key={"messageId": {"S": message_id}, "auditTime": {"S": audit_time}},
        ConsistentRead=True).get("Item")


def _dead_letters(account: Account) -> list[dict]:
    sqs = account.client("sqs")
    out = []
    while True:
        got = sqs.receive_message(QueueUrl=account.dlq.url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
                                  VisibilityTimeout=600, MessageAttributeNames=["All"]).get("Messages", [])
        if not got:
            return out
        out += got


def _startup_check_failures(logs: list[dict]) -> list[dict]:
    return [e for e in logs if e.get("message") == "start-up check failed"]


VALID = json.dumps({"messageId": "iam-valid-1", "auditTime": "2026-11-22T10:00:00Z",
                    "auditText": "alice signed in", "actor": "alice", "action": "user.login"})
AUDIT_TIME = "2026-11-22T10:00:00.000Z"
POISON = "this is not JSON"


def test_the_template_role_writes_a_record_and_dead_letters_an_invalid_one(account):
    creds = _role(account)
    valid_id, poison_id = _send(account, VALID), _send(account, POISON)
    account.enforce()

    messages = _poll_as_event_source(account, creds, 2)
    response, logs = _run(account, creds, messages)
    _delete_as_event_source(account, creds, messages)

    assert response == {"batchItemFailures": []}
    item = _item(account, "iam-valid-1", AUDIT_TIME)
    assert item is not None and item["sqsMessageId"]["S"] == valid_id  # signature accepted, PutItem allowed
    (letter,) = _dead_letters(account)                                 # SendMessage to the DLQ allowed
    assert letter["Body"] == POISON
    assert letter["MessageAttributes"]["failureReason"]["StringValue"] == "invalid_json"
    assert json.loads(letter["MessageAttributes"]["failureContext"]["StringValue"])["sqsMessageId"] == poison_id
    assert _startup_check_failures(logs) == []                         # DescribeTable allowed
    assert account.client("sqs").get_queue_attributes(
        QueueUrl=account.queue.url, AttributeNames=["ApproximateNumberOfMessages",
                                                    "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"] == {"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0"}


def test_the_template_role_grants_nothing_else(account):
    creds = _role(account)
    other = account.client("dynamodb").create_table(
        TableName="OtherTable", BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "messageId", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "messageId", "AttributeType": "S"}])["TableDescription"]
    account.enforce()
    ddb, sqs = account.client("dynamodb", creds), account.client("sqs", creds)
    table, key = account.table_name, {"messageId": {"S": "x"}, "auditTime": {"S": AUDIT_TIME}}
    denied = {
        "dynamodb:GetItem": refused(ddb.get_item, TableName=table, Key=key),
        "dynamodb:Query": refused(ddb.query, TableName=table, KeyConditionExpression="messageId = :m",
                                  ExpressionAttributeValues={":m": {"S": "x"}}),
        "dynamodb:Scan": refused(ddb.scan, TableName=table),
        "dynamodb:UpdateItem": refused(ddb.update_item, TableName=table, Key=key,
                                       UpdateExpression="SET auditText = :t",
                                       ExpressionAttributeValues={":t": {"S": "changed"}}),
        "dynamodb:DeleteItem": refused(ddb.delete_item, TableName=table, Key=key),
        "dynamodb:DeleteTable": refused(ddb.delete_table, TableName=table),
        "dynamodb:PutItem on another table": refused(ddb.put_item, TableName=other["TableName"],
                                                     Item={"messageId": {"S": "x"}}),
        "dynamodb:DescribeTable of another table": refused(ddb.describe_table, TableName=other["TableName"]),
        "sqs:SendMessage to the audit queue": refused(sqs.send_message, QueueUrl=account.queue.url,
                                                      MessageBody="{}"),
        "sqs:ReceiveMessage from the dead-letter queue": refused(sqs.receive_message, QueueUrl=account.dlq.url),
        "sqs:PurgeQueue": refused(sqs.purge_queue, QueueUrl=account.queue.url),
    }
    assert denied == {k: DENIED[k.split(":")[0]] for k in denied}, denied
    # ...while the same calls on the template's own table are allowed: the scoping is what refused.
    ddb.describe_table(TableName=table)


def test_the_template_role_polls_the_access_queue_and_may_not_send_to_it(account):
    """Lambda's second event source mapping reads AuditAccessQueue with the function's role."""
    creds = _role(account)
    sender = account.user("access-sender", inline={"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": account.access_queue.arn}]})
    account.client("sqs", sender).send_message(QueueUrl=account.access_queue.url, MessageBody="access")
    account.enforce()

    url = account.access_queue.url
    (message,) = _poll_as_event_source(account, creds, 1, url)
    _delete_as_event_source(account, creds, [message], url)
    sqs = account.client("sqs", creds)
    assert message["Attributes"]["SenderId"] == account.client("sts", sender).get_caller_identity()["UserId"]
    assert refused(sqs.send_message, QueueUrl=url, MessageBody="{}") == DENIED["sqs"]
    assert refused(sqs.purge_queue, QueueUrl=url) == DENIED["sqs"]


# Needs the receiver to read ACCESS_QUEUE_ARN (issue 25): an auditctl.* event whose callerUserId is
# the delivery's SenderId is written from the access queue, one whose claim is not is dead-lettered
# as access_event_invalid, and an auditctl.* action on AuditQueue as reserved_action.
def test_the_template_role_writes_access_events_and_dead_letters_forged_ones(account):
    creds = _role(account)
    reader = account.user("access-reader", inline={"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": account.access_queue.arn}]})
    caller = account.client("sts", reader).get_caller_identity()
    event = {"messageId": "access-1", "auditTime": "2026-11-22T10:00:00Z", "auditText": "auditctl query",
             "actor": caller["Arn"], "action": "auditctl.query", "resource": account.table_name}
    genuine = json.dumps({**event, "callerUserId": caller["UserId"]})
    forged = json.dumps({**event, "messageId": "access-2", "callerUserId": "AIDAEXAMPLEOTHERUSER"})
    reader_sqs = account.client("sqs", reader)
    genuine_id = reader_sqs.send_message(QueueUrl=account.access_queue.url, MessageBody=genuine)["MessageId"]
    forged_id = reader_sqs.send_message(QueueUrl=account.access_queue.url, MessageBody=forged)["MessageId"]
    reserved_id = _send(account, json.dumps({**event, "messageId": "access-3"}))  # the admin, on AuditQueue
    account.enforce()

    url, arn = account.access_queue.url, account.access_queue.arn
    access = _poll_as_event_source(account, creds, 2, url)
    response, logs = _run(account, creds, access, arn)
    _delete_as_event_source(account, creds, access, url)
    assert response == {"batchItemFailures": []}
    on_audit_queue = _poll_as_event_source(account, creds, 1)
    assert _run(account, creds, on_audit_queue)[0] == {"batchItemFailures": []}

    item = _item(account, "access-1", AUDIT_TIME)
    assert item is not None and item["senderId"]["S"] == caller["UserId"], item
    assert _item(account, "access-2", AUDIT_TIME) is None and _item(account, "access-3", AUDIT_TIME) is None
    reasons = {json.loads(m["MessageAttributes"]["failureContext"]["StringValue"])["sqsMessageId"]:
               m["MessageAttributes"]["failureReason"]["StringValue"] for m in _dead_letters(account)}
    assert reasons == {forged_id: "access_event_invalid", reserved_id: "reserved_action"}, reasons
    assert genuine_id not in reasons


@pytest.mark.parametrize("account", ["aws", "moto"], indirect=True)
def test_without_put_item_a_record_fails_access_denied_and_is_not_dead_lettered(account):
    creds = _role(account, drop="dynamodb:PutItem")
    sqs_id = _send(account, VALID)
    account.enforce()

    messages = _poll_as_event_source(account, creds, 1)
    response, logs = _run(account, creds, messages)

    assert response == {"batchItemFailures": [{"itemIdentifier": sqs_id}]}
    assert _item(account, "iam-valid-1", AUDIT_TIME) is None
    assert _dead_letters(account) == []  # transient: the queue drains by itself once the role is fixed
    assert failure_reasons_from(logs) == {sqs_id: ["access_denied"]}


def test_without_send_message_an_invalid_record_is_left_to_the_queue(account):
    creds = _role(account, drop="sqs:SendMessage")
    sqs_id = _send(account, POISON)
    account.enforce()

    messages = _poll_as_event_source(account, creds, 1)
    response, logs = _run(account, creds, messages)

    assert response == {"batchItemFailures": [{"itemIdentifier": sqs_id}]}  # SQS's own redrive applies
    assert _dead_letters(account) == []
    (failed,) = [e for e in logs if e.get("message") == "record failed"]
    assert failed["reason"] == "invalid_json" and failed.get("dead_letter_error")


def test_without_describe_table_the_start_up_check_is_refused(account):
    creds = _role(account, drop="dynamodb:DescribeTable")
    _send(account, VALID)
    account.enforce()

    messages = _poll_as_event_source(account, creds, 1)
    response, logs = _run(account, creds, messages)

    assert response == {"batchItemFailures": []}  # the writes need only PutItem
    assert _item(account, "iam-valid-1", AUDIT_TIME) is not None
    (warning,) = _startup_check_failures(logs)
    assert "AccessDeniedException" in warning["error"], warning


@pytest.mark.parametrize("tamper", ["secret_access_key", "session_token"])
def test_wrong_credentials_are_refused(account, tamper):
    from dataclasses import replace

    good = _role(account)
    bad = replace(good, **{tamper: "wrong" + getattr(good, tamper)[5:]})
    sqs_ids = {_send(account, VALID), _send(account, POISON)}
    account.enforce()
    expected = {"secret_access_key": "InvalidSignatureException", "session_token": "UnrecognizedClientException"}[tamper]
    assert refused(account.client("dynamodb", bad).describe_table, TableName=account.table_name) == expected

    messages = _poll_as_event_source(account, good, 2)
    logs = _does_not_start(account, bad, messages)

    # It cannot have KMS certify its attestation key, so it does not start: nothing written,
    # nothing dead-lettered, both left to the queue.
    (error,) = [e for e in logs if e.get("message") == "attestation key not certified"]
    assert expected in error["error"], error
    assert _item(account, "iam-valid-1", AUDIT_TIME) is None
    assert _dead_letters(account) == []


def _does_not_start(account: Account, creds, messages: list[dict]) -> list[dict]:
    """The function binary under ``creds`` ends at init without answering; its logs."""
    event = {"Records": [lambda_record(m, account.queue.arn) for m in messages]}
    with Function(account, creds) as fn:
        with pytest.raises(FunctionExited):
            fn.invoke(event)
    return log_events(fn.log_path)


def test_without_kms_sign_the_function_does_not_start_and_writes_nothing(account):
    """kms:Sign on AuditAttestationKey is needed: without it the run's attestation key cannot be
    certified (docs/archive.md "Items attested at birth"), and the function does not start rather
    than write items nobody could tell from ones put behind it."""
    creds = _role(account, drop="kms:Sign")
    _send(account, VALID)
    account.enforce()
    messages = _poll_as_event_source(account, creds, 1)
    logs = _does_not_start(account, creds, messages)
    (error,) = [e for e in logs if e.get("message") == "attestation key not certified"]
    assert "kms:Sign" in error["error"] and "AccessDenied" in error["error"], error
    assert _item(account, "iam-valid-1", AUDIT_TIME) is None


def failure_reasons_from(logs: list[dict]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for e in logs:
        if e.get("message") in ("record failed", "record dead-lettered") and e.get("sqs_message_id"):
            out.setdefault(e["sqs_message_id"], []).append(str(e.get("reason")))
    return out


def test_the_role_polls_and_logs_with_what_the_aws_managed_policies_grant_for_it(account):
    """The statements the function never calls itself: Lambda's event source mapping polls with
    the role (sqs:* of AWSLambdaSQSQueueExecutionRole, on the queue only), and Lambda writes the
    function's logs with it (AWSLambdaBasicExecutionRole's, less CreateLogGroup: the template
    creates the group). Read from moto's copy of the AWS managed policies."""
    from moto.iam.aws_managed_policies import aws_managed_policies_data

    managed = json.loads(aws_managed_policies_data)
    esm = {a for st in managed["AWSLambdaSQSQueueExecutionRole"]["Document"]["Statement"]
           for a in actions_of(st) if a.startswith("sqs:")}
    logs = {a for st in managed["AWSLambdaBasicExecutionRole"]["Document"]["Statement"]
            for a in actions_of(st)} - {"logs:CreateLogGroup"}
    role = function_role(account.template)
    granted: dict[str, set[str]] = {}
    for doc in role.policies.values():
        for st in doc["Statement"]:
            for a in actions_of(st):
                granted.setdefault(a, set()).update(resources_of(st))
    # Two event source mappings: AuditQueue's and AuditAccessQueue's.
    polled = {account.queue.arn, account.access_queue.arn}
    assert {a: granted.get(a) for a in esm} == {a: polled for a in esm}
    log_group = account.template.arn("AuditReceiverLogGroup")
    assert {a: granted.get(a) for a in logs} == {a: {log_group} for a in logs}
    # Everything else the role grants is exercised by the tests above.
    assert set(granted) - esm - logs == {"dynamodb:PutItem", "dynamodb:DescribeTable", "sqs:SendMessage", "kms:Sign"}
