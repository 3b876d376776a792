"""auditctl works with exactly the operator policies of template.yaml, under moto's access
control: a user holding only AuditReaderPolicy reads the trail (query, a lookup by actor, get)
and proves it (verify, over digests audit-archiver sealed with the stack's key) and is refused
the dead-letter queue (dlq list, dlq redrive); a user holding only AuditOperatorPolicy does all
of it; each command first records its own access on the access queue
(auditctl runs with ACCESS_QUEUE_URL set), under the caller's ARN, claiming the caller's user id
that SQS attests as the message's SenderId; neither may write, update or delete an item. The
reader may send to the access queue and to no other queue; the operator also to the audit queue
(the redrive); AuditProducerPolicy to the audit queue only. The policies are read from the
template at run time and resolved to this stack's ARNs. What moto cannot check:
tests/e2e/iam_support.py.

The tests that run auditctl need auditctl to send its access events to ACCESS_QUEUE_URL with
callerUserId (issue 25) and to read the table's tags: the reader policy no longer allows a send
to AUDIT_QUEUE_URL."""

import json
import subprocess
from datetime import datetime, timezone

import pytest

from iam_support import (DENIED, Account, actions_of, binary, clean_aws_env, deployed_template, managed_policy,
                         refusals, refused, resources_of, seal, sealable_object, sealable_start)
from local.stack import DEFAULT_TEMPLATE, read_stack

ITEM_ID = "iam-trail-1"
ACTOR = "alice"
AUDIT_TIME = "2026-11-22T10:00:00.000Z"
FROM, TO = "2026-11-22T00:00:00Z", "2026-11-22T23:59:59.999Z"
# The archive: one object in an hour two hours back, sealed by audit-archiver (iam_support), and
# verify over that hour.
SEALED = sealable_start()
VERIFY = ("verify", "--from", datetime.fromtimestamp(SEALED, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
          "--to", datetime.fromtimestamp(SEALED + 3599, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
# The repair over that hour: an item written then (LOST_ID) is in no archive object, so the repair
# asks the archiver, by key. moto has no such function: an operator's invocation passes IAM and is
# answered "not found"; a reader's is refused.
LOST_ID = "iam-lost-1"
LOST_TIME = datetime.fromtimestamp(SEALED + 600, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")
REPAIR = ("archive", "repair", *VERIFY[1:])
# The access events of what each test runs: query, a lookup, get, verify, dlq list, dlq redrive.
EVERY_COMMAND = ["auditctl.query", "auditctl.query", "auditctl.get", "auditctl.verify", "auditctl.dlq.list",
                 "auditctl.dlq.redrive"]
LETTER_BODY = json.dumps({"messageId": "iam-letter-1", "auditTime": "2026-11-22T11:00:00Z",
                          "auditText": "bob signed in"})


@pytest.fixture
def account(work_dir):
    acc = Account(work_dir)
    yield acc
    acc.close()


def _fnv1a_32(text: str) -> int:
    h = 2166136261
    for byte in text.encode():
        h = ((h ^ byte) * 16777619) & 0xFFFFFFFF
    return h


def _bucket(message_id: str, audit_time: str) -> str:
    """docs/events.md "The item": the UTC day and FNV-1a 32 of the messageId, modulo 32."""
    return f"{audit_time[:10]}#{_fnv1a_32(message_id) % 32:02d}"


def _lookup_key(value: str, message_id: str) -> str:
    """The lookup indexes' key (crates/model/src/keys.rs): the value and a shard 0-3 of the
    messageId."""
    return f"{value}#{_fnv1a_32(message_id) % 4}"


def _seed(account: Account) -> str:
    """An item in the trail, an archive with a period sealed by audit-archiver, and a
    dead-lettered message, as the functions leave them; returns the dead-lettered message's id."""
    sealable_object(account, SEALED)
    sealed = seal(account)
    assert sealed["failure"] is None and sealed["sealed"], sealed
    account.client("dynamodb").put_item(TableName=account.table_name, Item={
        "messageId": {"S": ITEM_ID}, "auditTime": {"S": AUDIT_TIME},
        "auditBucket": {"S": _bucket(ITEM_ID, AUDIT_TIME)}, "auditText": {"S": "alice signed in"},
        "actor": {"S": ACTOR}, "actorKey": {"S": _lookup_key(ACTOR, ITEM_ID)},
        "sqsMessageId": {"S": "sqs-" + ITEM_ID}, "receivedAt": {"S": AUDIT_TIME},
        "eventSource": {"S": account.queue.arn}})
    # Written in the sealed hour, given up by the stream: in no archive object.
    account.client("dynamodb").put_item(TableName=account.table_name, Item={
        "messageId": {"S": LOST_ID}, "auditTime": {"S": LOST_TIME},
        "auditBucket": {"S": _bucket(LOST_ID, LOST_TIME)}, "auditText": {"S": "dave signed in"},
        "sqsMessageId": {"S": "sqs-" + LOST_ID}, "receivedAt": {"S": LOST_TIME},
        "eventSource": {"S": account.queue.arn}})
    context = {"reason": "throttled", "detail": "throttled 5 times", "sqsMessageId": "sqs-iam-letter-1",
               "sentTimestamp": "1795777200000", "receiveCount": 5, "failedAt": "2026-11-22T11:00:05.000Z",
               "eventSourceArn": account.queue.arn}
    return account.client("sqs").send_message(QueueUrl=account.dlq.url, MessageBody=LETTER_BODY, MessageAttributes={
        "failureReason": {"DataType": "String", "StringValue": "throttled"},
        "failureContext": {"DataType": "String", "StringValue": json.dumps(context)}})["MessageId"]


def _operator(account: Account, policy: str):
    """A user holding exactly this managed policy of the template."""
    doc = managed_policy(account.template, policy)
    return account.user(policy.lower(), managed={account.template.physical_name(policy): doc})


def _auditctl(account: Account, creds, *args: str) -> subprocess.CompletedProcess:
    env = clean_aws_env(account.work_dir, creds, account.endpoint)
    env.update({"TABLE_NAME": account.table_name, "AUDIT_QUEUE_URL": account.queue.url,
                "ACCESS_QUEUE_URL": account.access_queue.url, "DEAD_LETTER_QUEUE_URL": account.dlq.url, "ARCHIVE_BUCKET": account.stack.archive_bucket.name,
                "DIGEST_KEY_ID": account.stack.digest_key.arn,
                # The receiver's attestation key (AuditAttestationKeyArn): verify and get fetch its
                # public key (kms:GetPublicKey, which the operator policies allow on it).
                "ATTESTATION_KEY_ID": account.stack.keys["AuditAttestationKey"].arn,
                "DIGEST_PERIOD_SECONDS": account.stack.archiver.environment["DIGEST_PERIOD_SECONDS"],
                "ARCHIVER_FUNCTION": account.template.arn("AuditArchiverFunction")})
    done = subprocess.run([str(binary("auditctl", account.work_dir)), *args], env=env, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    with open(account.work_dir / "auditctl.log", "a", encoding="utf-8") as log:
        log.write(f"$ auditctl {' '.join(args)}\nexit {done.returncode}\n{done.stdout}{done.stderr}\n")
    return done


# docs/operations.md's check of a digest by hand (AWS CLI, jq, openssl), which the operator
# policies are also for: its `list-objects-v2` is what s3:ListBucket is there for; it reads the
# digest as sealed, its oldest version (`list-object-versions`, `get-object --version-id`), as
# auditctl verify reads every object and digest by version (s3:ListBucketVersions,
# s3:GetObjectVersion).
HAND_CHECK = ("the documented check by hand",)


def _hand_check(account: Account, creds) -> subprocess.CompletedProcess:
    """docs/operations.md's block, as written there, with these credentials (test_proving.py
    runs it against the local stack)."""
    from test_proving import documented_block

    env = clean_aws_env(account.work_dir, creds, account.endpoint)
    env.update({"ARCHIVE_BUCKET": account.stack.archive_bucket.name, "DIGEST_KEY_ID": account.stack.digest_key.arn})
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", documented_block()], env=env, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    with open(account.work_dir / "auditctl.log", "a", encoding="utf-8") as log:
        log.write(f"$ {HAND_CHECK[0]}\nexit {done.returncode}\n{done.stdout}{done.stderr}\n")
    return done


def _command(account: Account, creds, command: tuple) -> subprocess.CompletedProcess:
    return _hand_check(account, creds) if command == HAND_CHECK else _auditctl(account, creds, *command)


def _reads_the_trail(account: Account, creds) -> None:
    query = _auditctl(account, creds, "query", "--from", FROM, "--to", TO, "--format", "jsonl")
    assert query.returncode == 0, query.stderr
    assert [json.loads(line)["messageId"] for line in query.stdout.splitlines()] == [ITEM_ID]
    lookup = _auditctl(account, creds, "query", "--actor", ACTOR, "--from", FROM, "--to", TO, "--format", "jsonl")
    assert lookup.returncode == 0, lookup.stderr
    assert [json.loads(line)["messageId"] for line in lookup.stdout.splitlines()] == [ITEM_ID]
    get = _auditctl(account, creds, "get", ITEM_ID, "--format", "jsonl")
    assert get.returncode == 0, get.stderr
    assert [json.loads(line)["auditTime"] for line in get.stdout.splitlines()] == [AUDIT_TIME]
    # The seeded item was put in the table by hand, not by the receiver: the attestation key's
    # public key was read under the policy, and the item is said not attested.
    assert [json.loads(line)["attested"] for line in get.stdout.splitlines()] == \
        ["NOT ATTESTED: it has no attestation"], get.stdout
    verify = _auditctl(account, creds, *VERIFY)
    # The seeded archive line too was written by hand: with the attestation key (read under the
    # policy, its ARN in the summary) it is the one problem, `item not attested`.
    assert verify.returncode == 1, (verify.stdout, verify.stderr)
    assert "problems  1 (1 item not attested)" in verify.stdout, verify.stdout
    assert "item not attested  iam-earlier-1  " in verify.stdout, verify.stdout
    assert f"against the receiver's attestation key {account.stack.keys['AuditAttestationKey'].arn}" \
        in verify.stdout, verify.stdout
    by_hand = _hand_check(account, creds)
    assert by_hand.returncode == 0 and "Verified OK" in by_hand.stdout, by_hand.stdout + by_hand.stderr
    for done in (query, lookup, get, verify):
        assert "access not recorded" not in done.stderr, done.stderr


def _audit_queue(account: Account, url: str | None = None) -> list[dict]:
    """Every message of the audit queue (or of the queue at ``url``), with its SenderId (received
    once, left in flight)."""
    messages = []
    while True:
        got = account.client("sqs").receive_message(QueueUrl=url or account.queue.url, MaxNumberOfMessages=10,
                                                    VisibilityTimeout=600, MessageAttributeNames=["All"],
                                                    MessageSystemAttributeNames=["SenderId"])
        if not got.get("Messages"):
            return messages
        messages += got["Messages"]


def _access_queue(account: Account) -> list[dict]:
    return _audit_queue(account, account.access_queue.url)


def _is_access_event(message: dict) -> bool:
    body = json.loads(message["Body"])
    return str(body.get("action", "")).startswith("auditctl.")


def _recorded(messages: list[dict], user: str, actions: list[str], failed: tuple[str, ...] = (),
              kind: str = "denied") -> None:
    """Each command recorded its access under the caller's ARN (moto's GetCallerIdentity), and
    claimed as its caller the user id that SQS attests as the message's sender: outcome success
    before it read; each of ``failed``, refused after that, a second event (outcome failure, the
    error's ``kind``) naming the first by its messageId (docs/auditctl.md "A read that fails")."""
    access = [m for m in messages if _is_access_event(m)]
    events = [json.loads(m["Body"]) for m in access]
    first = [e for e in events if e["outcome"] == "success"]
    failures = [e for e in events if e["outcome"] == "failure"]
    assert len(first) + len(failures) == len(events), events
    assert sorted(e["action"] for e in first) == sorted(actions), events
    assert sorted(e["action"] for e in failures) == sorted(failed), events
    by_id = {e["messageId"]: e for e in first}
    for failure in failures:
        recorded = by_id[failure["accessEventId"]]
        assert (recorded["action"], recorded["resource"]) == (failure["action"], failure["resource"]), failure
        assert failure["error"]["kind"] == kind and failure["error"]["text"], failure
    assert {e["actor"] for e in events} == {f"arn:aws:iam::123456789012:user/{user}"}, events
    assert all(json.loads(m["Body"]).get("callerUserId") == m["Attributes"]["SenderId"] for m in access), access


def _writes_are_refused(account: Account, creds) -> None:
    ddb = account.client("dynamodb", creds)
    table, key = account.table_name, {"messageId": {"S": ITEM_ID}, "auditTime": {"S": AUDIT_TIME}}
    denied = {
        "PutItem": refused(ddb.put_item, TableName=table, Item={**key, "auditText": {"S": "rewritten"}}),
        "UpdateItem": refused(ddb.update_item, TableName=table, Key=key, UpdateExpression="SET auditText = :t",
                              ExpressionAttributeValues={":t": {"S": "rewritten"}}),
        "DeleteItem": refused(ddb.delete_item, TableName=table, Key=key),
        "BatchWriteItem": refused(ddb.batch_write_item, RequestItems={table: [{"DeleteRequest": {"Key": key}}]}),
    }
    assert set(denied.values()) == {DENIED["dynamodb"]}, denied
    item = account.client("dynamodb").get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]
    assert item["auditText"]["S"] == "alice signed in"


def _depth(account: Account, url: str) -> int:
    a = account.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=[
        "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
    return int(a["ApproximateNumberOfMessages"]) + int(a["ApproximateNumberOfMessagesNotVisible"])


def _refused_clearly(done: subprocess.CompletedProcess, url: str) -> None:
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    message = done.stderr.lower()
    assert message.startswith("error:") and ("denied" in message or "not authorized" in message), done.stderr
    assert "panicked" not in message


def test_the_reader_policy_reads_the_trail_and_not_the_dead_letter_queue(account):
    letter_id = _seed(account)
    reader = _operator(account, "AuditReaderPolicy")
    account.enforce()

    _reads_the_trail(account, reader)
    listed = _auditctl(account, reader, "dlq", "list")
    _refused_clearly(listed, account.dlq.url)
    assert letter_id not in listed.stdout
    redrive = _auditctl(account, reader, "dlq", "redrive")
    _refused_clearly(redrive, account.dlq.url)
    assert _depth(account, account.dlq.url) == 1  # nothing moved
    _writes_are_refused(account, reader)
    # Refused or not, every command recorded its access first, on the access queue only; the two
    # refused after it (access denied on the dead-letter queue) their failure too.
    _recorded(_access_queue(account), "auditreaderpolicy", EVERY_COMMAND,
              failed=("auditctl.dlq.list", "auditctl.dlq.redrive"))
    assert _audit_queue(account) == []


def test_the_operator_policy_reads_the_trail_and_works_the_dead_letter_queue(account):
    letter_id = _seed(account)
    operator = _operator(account, "AuditOperatorPolicy")
    account.enforce()

    _reads_the_trail(account, operator)
    listed = _auditctl(account, operator, "dlq", "list", "--format", "jsonl")
    assert listed.returncode == 0, listed.stderr
    assert letter_id in listed.stdout and "throttled" in listed.stdout
    redrive = _auditctl(account, operator, "dlq", "redrive")
    assert redrive.returncode == 0, redrive.stderr
    assert "moved 1 message(s)" in redrive.stdout
    assert _depth(account, account.dlq.url) == 0
    moved = _audit_queue(account)
    redriven = [m for m in moved if m["Body"] == LETTER_BODY]
    assert len(redriven) == 1, moved
    context = json.loads(redriven[0]["MessageAttributes"]["failureContext"]["StringValue"])
    assert context["sqsMessageId"] == "sqs-iam-letter-1"  # the identity travels with it
    _writes_are_refused(account, operator)
    assert not [m for m in moved if _is_access_event(m)], moved
    _recorded(_access_queue(account), "auditoperatorpolicy", EVERY_COMMAND)


def test_the_operator_may_ask_the_archiver_to_repair_the_archive_and_the_reader_may_not(account):
    """`auditctl archive repair` (issue 24, finding 11): after its access event and verify's reads,
    it invokes AuditArchiverFunction with the keys of the items the archive lacks. The operator
    policy grants lambda:InvokeFunction on it; the reader policy does not, and the reader is told
    which policy to use. Nothing else is written by either."""
    _seed(account)
    reader = _operator(account, "AuditReaderPolicy")
    operator = _operator(account, "AuditOperatorPolicy")
    account.enforce()

    refused_repair = _auditctl(account, reader, *REPAIR)
    assert refused_repair.returncode == 1, refused_repair.stdout + refused_repair.stderr
    function = account.template.arn("AuditArchiverFunction")
    assert f"error: not allowed to invoke the archiver function {function}" in refused_repair.stderr, \
        refused_repair.stderr
    assert "not authorized to perform: lambda:InvokeFunction" in refused_repair.stderr, refused_repair.stderr
    assert "attach AuditOperatorPolicy" in refused_repair.stderr, refused_repair.stderr
    assert "repaired" not in refused_repair.stdout
    # The operator's invocation passes IAM: moto then has no function of that name.
    asked = _auditctl(account, operator, *REPAIR)
    assert asked.returncode == 1, asked.stdout + asked.stderr
    assert f"error: archiver function {function} not found" in asked.stderr, asked.stderr
    assert "not authorized" not in asked.stderr, asked.stderr
    # moto refused one invocation, the reader's, on the function's ARN.
    assert [r for r in refusals(account.work_dir) if "lambda:" in r] == [f"lambda:InvokeFunction on {function}"]
    # Each recorded its access first, under its own name, then its failure (refused, not found).
    events = [json.loads(m["Body"]) for m in _access_queue(account) if _is_access_event(m)]
    assert sorted((e["action"], e["actor"].rsplit("/", 1)[1], e["outcome"]) for e in events) == [
        ("auditctl.archive.repair", "auditoperatorpolicy", "failure"),
        ("auditctl.archive.repair", "auditoperatorpolicy", "success"),
        ("auditctl.archive.repair", "auditreaderpolicy", "failure"),
        ("auditctl.archive.repair", "auditreaderpolicy", "success")]
    _writes_are_refused(account, reader)
    _writes_are_refused(account, operator)


# ---- who may send where, without auditctl ---------------------------------------------------------

def _sender_id(account: Account, url: str, body: str) -> str:
    """The SenderId of the message with this body in the queue at ``url`` (the administrator
    receives it)."""
    (message,) = [m for m in _audit_queue(account, url) if m["Body"] == body]
    return message["Attributes"]["SenderId"]


def _user_id(account: Account, creds) -> str:
    return account.client("sts", creds).get_caller_identity()["UserId"]


def test_the_reader_policy_sends_to_the_access_queue_only_and_reads_the_tables_tags(account):
    reader = _operator(account, "AuditReaderPolicy")
    account.enforce()
    sqs, ddb = account.client("sqs", reader), account.client("dynamodb", reader)

    body = json.dumps({"action": "auditctl.query", "callerUserId": _user_id(account, reader)})
    sqs.send_message(QueueUrl=account.access_queue.url, MessageBody=body)
    assert _sender_id(account, account.access_queue.url, body) == _user_id(account, reader)
    denied = {
        "SendMessage to AuditQueue": refused(sqs.send_message, QueueUrl=account.queue.url, MessageBody=LETTER_BODY),
        "SendMessageBatch to AuditQueue": refused(sqs.send_message_batch, QueueUrl=account.queue.url,
                                                  Entries=[{"Id": "1", "MessageBody": LETTER_BODY}]),
        "SendMessage to the dead-letter queue": refused(sqs.send_message, QueueUrl=account.dlq.url,
                                                        MessageBody=LETTER_BODY),
        "ReceiveMessage from the access queue": refused(sqs.receive_message, QueueUrl=account.access_queue.url),
    }
    assert denied == {k: DENIED["sqs"] for k in denied}, denied
    assert _audit_queue(account) == []  # nothing reached AuditQueue
    # auditctl checks ACCESS_QUEUE_URL against the table's tag.
    table_arn = account.client("dynamodb").describe_table(TableName=account.table_name)["Table"]["TableArn"]
    tags = {t["Key"]: t["Value"] for t in ddb.list_tags_of_resource(ResourceArn=table_arn)["Tags"]}
    assert tags["audit:access-queue-arn"] == account.access_queue.arn
    assert refused(ddb.tag_resource, ResourceArn=table_arn, Tags=[
        {"Key": "audit:access-queue-arn", "Value": account.queue.arn}]) == DENIED["dynamodb"]


def test_the_operator_policy_sends_access_events_and_redrives_to_the_audit_queue(account):
    operator = _operator(account, "AuditOperatorPolicy")
    account.enforce()
    sqs = account.client("sqs", operator)

    sqs.send_message(QueueUrl=account.access_queue.url, MessageBody="access")
    sqs.send_message(QueueUrl=account.queue.url, MessageBody=LETTER_BODY)  # what a redrive sends
    assert _sender_id(account, account.queue.url, LETTER_BODY) == _user_id(account, operator)
    assert refused(sqs.send_message, QueueUrl=account.dlq.url, MessageBody="x") == DENIED["sqs"]


def test_the_producer_policy_sends_to_the_audit_queue_and_nothing_else(account):
    """AuditProducerPolicy (docs/deploy.md "Producers"): what an application needs to send audit
    events, and what SQS then attests as each event's sender."""
    doc = managed_policy(account.template, "AuditProducerPolicy")
    producer = account.user("producer", managed={account.template.physical_name("AuditProducerPolicy"): doc})
    account.enforce()
    sqs = account.client("sqs", producer)

    body = json.dumps({"messageId": "app-1", "auditText": "alice signed in", "actor": "alice"})
    sqs.send_message(QueueUrl=account.queue.url, MessageBody=body)
    sqs.send_message_batch(QueueUrl=account.queue.url, Entries=[{"Id": "1", "MessageBody": "batched"}])
    assert _sender_id(account, account.queue.url, body) == _user_id(account, producer)
    denied = {
        "sqs:SendMessage to the access queue": refused(sqs.send_message, QueueUrl=account.access_queue.url,
                                                       MessageBody=body),
        "sqs:SendMessage to the dead-letter queue": refused(sqs.send_message, QueueUrl=account.dlq.url,
                                                            MessageBody=body),
        "sqs:ReceiveMessage from AuditQueue": refused(sqs.receive_message, QueueUrl=account.queue.url),
        "sqs:PurgeQueue": refused(sqs.purge_queue, QueueUrl=account.queue.url),
        "dynamodb:Query": refused(account.client("dynamodb", producer).query, TableName=account.table_name,
                                  KeyConditionExpression="messageId = :m",
                                  ExpressionAttributeValues={":m": {"S": "app-1"}}),
    }
    assert denied == {k: DENIED[k.split(":")[0]] for k in denied}, denied
    assert _access_queue(account) == []


def test_the_operator_policy_grants_everything_the_reader_policy_does():
    tpl = deployed_template(read_stack(DEFAULT_TEMPLATE))
    reader = managed_policy(tpl, "AuditReaderPolicy")
    operator = managed_policy(tpl, "AuditOperatorPolicy")
    granted = {(a, r) for st in operator["Statement"] if st["Effect"] == "Allow"
               for a in actions_of(st) for r in resources_of(st)}
    missing = [(a, r) for st in reader["Statement"] if st["Effect"] == "Allow"
               for a in actions_of(st) for r in resources_of(st) if (a, r) not in granted]
    assert missing == []
    assert not [st for st in reader["Statement"] + operator["Statement"] if st["Effect"] != "Allow"]


# ---- no more: every grant is used ------------------------------------------------------------

# The commands each policy is for (docs/deploy.md "Operator access", docs/auditctl.md); a lookup
# reads the byActor index, then the full items with BatchGetItem.
READS = [("query", "--from", FROM, "--to", TO), ("query", "--actor", ACTOR, "--from", FROM, "--to", TO),
         ("get", ITEM_ID), VERIFY, HAND_CHECK]
COMMANDS = {
    "AuditReaderPolicy": READS,
    "AuditOperatorPolicy": READS + [("dlq", "list"), ("dlq", "redrive"), REPAIR],
}


def _grants() -> list[tuple[str, int, str]]:
    """(policy, statement index, action) for every action each operator policy grants."""
    tpl = deployed_template(read_stack(DEFAULT_TEMPLATE))
    return [(policy, i, action) for policy in COMMANDS
            for i, st in enumerate(managed_policy(tpl, policy)["Statement"]) for action in actions_of(st)]


def _without_grant(doc: dict, index: int, action: str) -> dict:
    statements = []
    for i, st in enumerate(doc["Statement"]):
        if i == index:
            st = {**st, "Action": [a for a in actions_of(st) if a != action]}
            if not st["Action"]:
                continue
        statements.append(st)
    return {**doc, "Statement": statements}


# Grants that no command uses today: each case is expected to fail (strict: once the template or
# auditctl changes so that it passes, remove it from here). None now: s3:GetObject, which only
# Athena's SQL over trail/ used, is verify's too since the transparency log (it reads checkpoints
# and tiles, current versions under log/, as prove does).
NOT_USED_YET: dict[tuple[str, str], str] = {}


def _grant_cases() -> list:
    return [pytest.param(p, i, a, id=f"{p}-{i}-{a}",
                         marks=[pytest.mark.xfail(strict=True, reason=NOT_USED_YET[(p, a)])]
                         if (p, a) in NOT_USED_YET else [])
            for p, i, a in _grants()]


@pytest.mark.parametrize("policy, index, action", _grant_cases())
def test_every_grant_of_the_operator_policies_is_used(account, policy, index, action):
    _seed(account)
    doc = _without_grant(managed_policy(account.template, policy), index, action)
    creds = account.user("short-of-one", managed={"short-of-one": doc})
    account.enforce()

    runs = [_command(account, creds, command) for command in COMMANDS[policy]]
    refused_for_it = [r for r in runs if r.returncode != 0 and f"not authorized to perform: {action}" in r.stderr]
    assert refused_for_it, (f"{policy} without {action} (statement {index}): every command it is for still "
                            f"succeeds, so the grant is not needed: " + "; ".join(
                                f"exit {r.returncode} {r.stderr.strip()[:200]}" for r in runs))


# ---- the archive and the digest key: what `auditctl verify` reads --------------------------------

@pytest.mark.parametrize("policy", ["AuditReaderPolicy", "AuditOperatorPolicy"])
def test_the_operator_policies_read_the_archive_and_the_public_key_and_write_nothing(account, policy):
    """The calls `auditctl verify` makes (docs/auditctl.md "Proving the trail unchanged: verify"):
    list a period's versions and delete markers, list the digests, read a digest and an object at a
    given version (GET and HEAD), fetch the digest key's public key. Nothing written, deleted, re-locked or signed; the
    archiver's markers (state/) not read."""
    admin = account.client("s3")
    bucket, key_arn = account.stack.archive_bucket.name, account.stack.digest_key.arn
    trail = "trail/dt=2026-11-22/hour=10/p1795341600-" + "1".zfill(40) + "-a1.jsonl.gz"
    digest = "digest/dt=2026-11-22/hour=10/p1795341600.json"
    with account.bucket_policy_lifted():
        first = admin.put_object(Bucket=bucket, Key=trail, Body=b"first", ChecksumAlgorithm="SHA256")["VersionId"]
        admin.put_object(Bucket=bucket, Key=trail, Body=b"second", ChecksumAlgorithm="SHA256")
        admin.put_object(Bucket=bucket, Key=digest, Body=b"{}", ChecksumAlgorithm="SHA256",
                         Metadata={"signature": "00"})
        admin.put_object(Bucket=bucket, Key="state/marker", Body=b"m", ChecksumAlgorithm="SHA256")
    creds = _operator(account, policy)
    account.enforce()
    s3, kms = account.client("s3", creds), account.client("kms", creds)

    versions = s3.list_object_versions(Bucket=bucket, Prefix="trail/dt=2026-11-22/hour=10/p1795341600-")
    assert len(versions["Versions"]) == 2
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="digest/")["Contents"]] == [digest]
    assert s3.get_object(Bucket=bucket, Key=trail, VersionId=first)["Body"].read() == b"first"
    assert s3.head_object(Bucket=bucket, Key=trail, VersionId=first)["ContentLength"] == 5
    assert s3.get_object(Bucket=bucket, Key=digest)["Metadata"] == {"signature": "00"}
    assert s3.head_object(Bucket=bucket, Key=digest)["ContentLength"] == 2
    public = kms.get_public_key(KeyId=key_arn)
    assert public["PublicKey"] and key_arn.endswith(public["KeyId"])  # moto answers the id, KMS the ARN
    assert refusals(account.work_dir) == []

    from datetime import timedelta

    # What the operator policies themselves refuse: the bucket's policy, which refuses object
    # writes to every principal but the archiver's role before IAM is asked (test_bucket_policy.py),
    # is lifted meanwhile, so that these refusals are the operator policies' own.
    with account.bucket_policy_lifted():
        denied = {
            "s3:PutObject to trail/": refused(s3.put_object, Bucket=bucket, Key=trail, Body=b"x",
                                              ChecksumAlgorithm="SHA256"),
            "s3:PutObject to digest/": refused(s3.put_object, Bucket=bucket, Key=digest, Body=b"x",
                                               ChecksumAlgorithm="SHA256"),
            "s3:GetObject of a marker": refused(s3.get_object, Bucket=bucket, Key="state/marker"),
            "s3:PutObjectRetention": refused(s3.put_object_retention, Bucket=bucket, Key=trail, Retention={
                "Mode": "GOVERNANCE", "RetainUntilDate": datetime.now(timezone.utc) + timedelta(days=1)}),
            "kms:Sign": refused(kms.sign, KeyId=key_arn, Message=b"m", MessageType="RAW",
                                SigningAlgorithm="ECDSA_SHA_256"),
            "kms:DisableKey": refused(kms.disable_key, KeyId=key_arn),
            "kms:ScheduleKeyDeletion": refused(kms.schedule_key_deletion, KeyId=key_arn, PendingWindowInDays=7),
        }
    assert denied == {k: "AccessDenied" if k.startswith("s3") else "AccessDeniedException" for k in denied}, denied
    # Refused by the policy itself (moto's record of its IAM refusals), not by something else.
    assert {r.split(" on ", 1)[0] for r in refusals(account.work_dir)} == {k.split(" ")[0] for k in denied}
    # Deleting is refused too (by the bucket's policy, to everyone, before IAM is asked).
    assert refused(s3.delete_object, Bucket=bucket, Key=trail) in ("403", "AccessDenied")
    assert len(admin.list_object_versions(Bucket=bucket, Prefix="trail/")["Versions"]) == 2
