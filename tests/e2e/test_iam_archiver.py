"""The archiver's role in template.yaml is enough and no more, under moto's access control: the
real audit-archiver binary, with temporary credentials of a role that holds exactly
AuditArchiverRole's inline policies and AuditArchiverSigningPolicy (read from the template at
run time, resolved to this stack's ARNs and its KMS key), archives a stream batch into the
archive bucket, archives it again as a retry would (finding its own objects), repairs an item the
stream never delivered (`auditctl archive repair`: it reads the item from the table, BatchGetItem), and on
EventBridge's Scheduled Event seals the digests that are due, signed with AuditDigestKey, then
chains on from them (checking the head's signature with the key's public key), having read
AuditAttestationKey's public key at start-up (the items put here are not attested: each is found);
every request signed and checked. Taking any one of its S3 or KMS actions
away makes a step fail, naming the action; what the role does not grant is refused (deleting,
writing outside its prefixes or to another bucket, changing retention, signing with another
key or fetching another key's public key, disabling or deleting the key, the table's items). Its stream,
log and on-failure statements are what Lambda uses, checked against AWS's own managed policy.
What moto cannot check (key policies among it): tests/e2e/iam_support.py."""

import gzip
import hashlib
import json
import time
from datetime import datetime, timedelta, timezone

import pytest

from iam_support import (Account, Function, actions_of, function_role, refusals, refused, resources_of,
                         sealable_object, without_action)
from local.harness import log_events
from local.schedule import scheduled_event
from local.streams import lambda_record

FUNCTION = "AuditArchiverFunction"
ITEMS = [("iam-archive-1", "2026-11-22T10:00:00.000Z", "alice signed in"),
         ("iam-archive-2", "2026-11-22T10:00:01.000Z", "bob approved invoice 7")]
# The actions the function itself calls (the rest is Lambda's: the stream, the logs, the
# on-failure destination).
OWN = {"s3:PutObject", "s3:GetObject", "s3:GetObjectVersion", "s3:ListBucket", "s3:ListBucketVersions", "kms:Sign",
       "dynamodb:BatchGetItem", "kms:GetPublicKey"}
# An item the stream never delivered: `auditctl archive repair` asks the archiver for it by key,
# and the archiver reads it from the table with the role (BatchGetItem).
REPAIRED = ("iam-repair-1", "2026-11-22T10:00:02.000Z", "carol signed in")
REPAIR_EVENT = {"auditArchiveRepair": {"version": 1, "keys": [
    {"messageId": REPAIRED[0], "auditTime": REPAIRED[1]}]}}


@pytest.fixture
def account(work_dir):
    acc = Account(work_dir)
    yield acc
    acc.close()


def _role(account: Account, drop: str | None = None):
    role = function_role(account.template, FUNCTION)
    policies = without_action(role.policies, drop) if drop else role.policies
    return account.assume_role(account.template.physical_name(role.logical_id), role.trust, policies)


def _bucket(account: Account) -> str:
    return account.stack.archive_bucket.name


def _stream_event(account: Account) -> dict:
    """Items put into the table by the administrator, as Lambda's event source mapping hands
    their stream records to the function."""
    ddb = account.client("dynamodb")
    for message_id, audit_time, text in ITEMS:
        ddb.put_item(TableName=account.table_name, Item={
            "messageId": {"S": message_id}, "auditTime": {"S": audit_time}, "auditText": {"S": text},
            "eventSource": {"S": account.queue.arn}})
    streams = account.client("dynamodbstreams")
    arn = account.stack.stream_arn
    records = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        records += streams.get_records(ShardIterator=iterator)["Records"]
    assert len(records) == len(ITEMS), records
    message_id, audit_time, text = REPAIRED
    ddb.put_item(TableName=account.table_name, Item={
        "messageId": {"S": message_id}, "auditTime": {"S": audit_time}, "auditText": {"S": text},
        "eventSource": {"S": account.queue.arn}})
    return {"Records": [lambda_record(r, arn) for r in records]}


def _answer(fn: Function, event: dict, timeout_s: float) -> dict:
    """The function's answer, or {"failure": …} when it failed the invocation (a refused repair) or
    never started (an init error)."""
    try:
        return fn.invoke(event, timeout_s)
    except AssertionError as error:
        return {"failure": str(error)}


def _run(account: Account, creds, stream_event: dict) -> dict:
    """The archiver's day with this role: a stream batch, a first scheduled run, the batch again
    (a retry), a repair, then a second scheduled run in a new process (a new container: it reads
    the chain's head from the bucket, where a warm one's idle run reads nothing, docs/archive.md
    "Digests"). Every answer, and the functions' logs."""
    rule = account.stack.schedule.rule_arn
    with Function(account, creds, log_name="archiver.log", archiver=True) as fn:
        # Each step answered, or failed: without kms:GetPublicKey on the attestation key the
        # function does not start (docs/archive.md "Items attested at birth").
        answers = {"archive": _answer(fn, stream_event, 60),
                   "seal": _answer(fn, scheduled_event(time.time(), rule), 120),
                   "archive again": _answer(fn, stream_event, 60),
                   "repair": _answer(fn, REPAIR_EVENT, 60)}
    with Function(account, creds, log_name="archiver-cold.log", archiver=True) as cold:
        answers["seal again"] = _answer(cold, scheduled_event(time.time(), rule), 120)
    return {"answers": answers, "logs": log_events(fn.log_path) + log_events(cold.log_path)}


def _objects(account: Account, prefix: str) -> list[dict]:
    page = account.client("s3").list_object_versions(Bucket=_bucket(account), Prefix=prefix)
    assert not page.get("DeleteMarkers")
    return page.get("Versions", [])


def test_the_template_role_archives_a_batch_and_seals_the_digests_due(account):
    sealable_key, sealable_start = sealable_object(account)
    event = _stream_event(account)
    creds = _role(account)
    account.enforce()

    run = _run(account, creds, event)

    answers = run["answers"]
    assert answers["archive"] == {"batchItemFailures": []}
    assert answers["archive again"] == {"batchItemFailures": []}
    # The repair read its item from the table with the role and archived it, marked as a repair.
    repair = answers["repair"]
    assert [(r["messageId"], r["auditTime"]) for r in repair["repaired"]] == [REPAIRED[:2]], repair
    assert repair["failed"] == [] and repair["notFound"] == [], repair
    repaired = repair["repaired"][0]["object"]
    head = account.client("s3").head_object(Bucket=_bucket(account), Key=repaired)
    assert head["Metadata"].get("repair") == "true", head["Metadata"]
    trail = [o for o in _objects(account, "trail/") if o["Key"] not in (sealable_key, repaired)]
    assert len(trail) == 1, trail  # the retry found its object: one object, one version
    body = account.client("s3").get_object(Bucket=_bucket(account), Key=trail[0]["Key"])["Body"].read()
    assert sorted(json.loads(line)["messageId"] for line in gzip.decompress(body).splitlines()) == [
        i[0] for i in ITEMS]
    for name in ("seal", "seal again"):
        assert answers[name]["failure"] is None, answers[name]
    # The first run started the chain at the earlier object's period and sealed every period due.
    sealed = answers["seal"]["sealed"]
    assert sealed and sealed[0].endswith(f"/p{sealable_start}.json"), sealed
    assert answers["seal again"]["head"] == answers["seal"]["head"] or answers["seal again"]["sealed"]

    # The digest lists the object, names the key, and the key's public key checks its signature.
    s3, kms = account.client("s3"), account.client("kms")
    got = s3.get_object(Bucket=_bucket(account), Key=sealed[0])
    data = got["Body"].read()
    digest = json.loads(data)
    assert [(o["key"], o["events"]) for o in digest["objects"]] == [(sealable_key, 1)]
    key_arn = account.stack.archiver.environment["DIGEST_KEY_ID"]
    assert digest["keyId"] == key_arn == account.stack.digest_key.arn
    signed = "\n".join(["audit-receiver-digest/1", digest["periodEnd"], f"{_bucket(account)}/{sealed[0]}",
                        hashlib.sha256(data).hexdigest(), "null"]).encode()
    assert kms.verify(KeyId=key_arn, Message=signed, MessageType="RAW", SigningAlgorithm="ECDSA_SHA_256",
                      Signature=bytes.fromhex(got["Metadata"]["signature"]))["SignatureValid"]
    # The administrator's items were put behind the receiver (no attestation): the archiver read
    # the attestation key's public key with the role and found each, on both deliveries and in
    # the repair.
    foreign = [e for e in run["logs"] if str(e.get("message", "")).startswith("item not attested")]
    assert sorted(json.loads(e["keys"])["messageId"] for e in foreign) == sorted(
        2 * [i[0] for i in ITEMS] + [REPAIRED[0]])
    failures = [e for e in run["logs"] if e.get("level") in ("ERROR", "WARN") and e not in foreign]
    assert failures == [], failures
    assert refusals(account.work_dir) == []  # not one request of the role was refused


@pytest.mark.parametrize("action", sorted(OWN))
def test_every_s3_and_kms_grant_of_the_role_is_needed(account, action):
    sealable_object(account)
    event = _stream_event(account)
    creds = _role(account, drop=action)
    account.enforce()

    run = _run(account, creds, event)

    answers = run["answers"]
    failed = {name for name, a in answers.items()
              if a.get("batchItemFailures") or a.get("failure") or a.get("failed")}
    assert failed, f"without {action} every step still succeeds: {answers}"
    # What was refused is that action (moto's own record: a refused HEAD's answer has no body).
    refused_actions = {r.split(" on ", 1)[0] for r in refusals(account.work_dir)}
    assert refused_actions == {action}, (refused_actions, answers)


def test_the_role_grants_nothing_else(account):
    creds = _role(account)
    admin_s3, admin_kms = account.client("s3"), account.client("kms")
    other_bucket = "iam-test-other-bucket"
    admin_s3.create_bucket(Bucket=other_bucket)
    admin_s3.put_object(Bucket=other_bucket, Key="trail/x", Body=b"x")
    other_key = admin_kms.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")["KeyMetadata"]["Arn"]
    bucket, key_arn = _bucket(account), account.stack.digest_key.arn
    with account.bucket_policy_lifted():
        put = admin_s3.put_object(Bucket=bucket, Key="trail/x.jsonl.gz", Body=b"x", ChecksumAlgorithm="SHA256")
    account.enforce()
    s3, kms = account.client("s3", creds), account.client("kms", creds)
    ddb, sqs = account.client("dynamodb", creds), account.client("sqs", creds)
    table, item_key = account.table_name, {"messageId": {"S": "x"}, "auditTime": {"S": "2026-11-22T10:00:00.000Z"}}
    # The archive bucket's policy refuses deletes to everyone (moto enforces it, before IAM);
    # another bucket shows that the role's own policies do not allow them either.
    by_bucket_policy = {
        "s3:DeleteObject": refused(s3.delete_object, Bucket=bucket, Key="trail/x.jsonl.gz"),
        "s3:DeleteObjectVersion": refused(s3.delete_object, Bucket=bucket, Key="trail/x.jsonl.gz",
                                          VersionId=put["VersionId"]),
    }
    assert set(by_bucket_policy.values()) <= {"403", "AccessDenied"}, by_bucket_policy
    denied = {
        "s3:DeleteObject in another bucket": refused(s3.delete_object, Bucket=other_bucket, Key="trail/x"),
        "s3:PutObject outside its prefixes": refused(s3.put_object, Bucket=bucket, Key="other/x", Body=b"x",
                                                     ChecksumAlgorithm="SHA256"),
        "s3:PutObject to another bucket": refused(s3.put_object, Bucket=other_bucket, Key="trail/x", Body=b"x"),
        "s3:GetObject of another bucket": refused(s3.get_object, Bucket=other_bucket, Key="trail/x"),
        "s3:PutObjectRetention": refused(s3.put_object_retention, Bucket=bucket, Key="trail/x.jsonl.gz",
                                         Retention={"Mode": "GOVERNANCE", "RetainUntilDate":
                                                    datetime.now(timezone.utc) + timedelta(days=1)}),
        "s3:PutBucketPolicy": refused(s3.put_bucket_policy, Bucket=bucket, Policy="{}"),
        "kms:Sign with another key": refused(kms.sign, KeyId=other_key, Message=b"m", MessageType="RAW",
                                             SigningAlgorithm="ECDSA_SHA_256"),
        "kms:GetPublicKey of another key": refused(kms.get_public_key, KeyId=other_key),
        "kms:DisableKey": refused(kms.disable_key, KeyId=key_arn),
        "kms:ScheduleKeyDeletion": refused(kms.schedule_key_deletion, KeyId=key_arn, PendingWindowInDays=7),
        "dynamodb:PutItem": refused(ddb.put_item, TableName=table, Item=item_key),
        "dynamodb:UpdateItem": refused(ddb.update_item, TableName=table, Key=item_key,
                                       UpdateExpression="SET auditText = :t",
                                       ExpressionAttributeValues={":t": {"S": "changed"}}),
        "dynamodb:DeleteItem": refused(ddb.delete_item, TableName=table, Key=item_key),
        "sqs:SendMessage to the audit queue": refused(sqs.send_message, QueueUrl=account.queue.url,
                                                      MessageBody="{}"),
    }
    expected = {"s3": "AccessDenied", "kms": "AccessDeniedException", "dynamodb": "AccessDeniedException",
                "sqs": "AccessDenied"}
    assert denied == {k: expected[k.split(":")[0]] for k in denied}, denied
    # Each refused by the role's identity policies (moto's record of its IAM refusals).
    assert {r.split(" on ", 1)[0] for r in refusals(account.work_dir)} == {
        k.split(" ")[0] for k in denied}
    # ...while signing with the digest key itself is allowed: the key's scope is what refused.
    assert kms.sign(KeyId=key_arn, Message=b"m", MessageType="RAW", SigningAlgorithm="ECDSA_SHA_256")["Signature"]


def test_the_roles_stream_log_and_failure_statements_are_what_lambda_uses(account):
    """The statements the function never calls itself: Lambda's event source mapping reads the
    stream with the role (AWSLambdaDynamoDBExecutionRole's dynamodb actions, on this table's
    stream only), Lambda writes the logs with it (its logs actions less CreateLogGroup: the
    template creates the group) and sends the on-failure record to the failure queue with it.
    Read from moto's copy of the AWS managed policies."""
    from moto.iam.aws_managed_policies import aws_managed_policies_data

    managed = json.loads(aws_managed_policies_data)
    lambda_actions = {a for st in managed["AWSLambdaDynamoDBExecutionRole"]["Document"]["Statement"]
                      for a in actions_of(st)} - {"logs:CreateLogGroup"}
    role = function_role(account.template, FUNCTION)
    granted: dict[str, set[str]] = {}
    for doc in role.policies.values():
        for st in doc["Statement"]:
            for a in actions_of(st):
                granted.setdefault(a, set()).update(resources_of(st))
    stream = account.template.get_att("AuditMessagesTable", "StreamArn")
    table = account.template.arn("AuditMessagesTable")
    assert {a: granted.get(a) for a in lambda_actions} == {
        "dynamodb:DescribeStream": {stream}, "dynamodb:GetRecords": {stream}, "dynamodb:GetShardIterator": {stream},
        "dynamodb:ListStreams": {f"{table}/stream/*"},
        "logs:CreateLogStream": {account.template.arn("AuditArchiverLogGroup")},
        "logs:PutLogEvents": {account.template.arn("AuditArchiverLogGroup")}}
    assert granted["sqs:SendMessage"] == {account.template.arn("AuditArchiveFailureQueue")}
    # Everything else the role grants is exercised by the tests above.
    assert set(granted) - lambda_actions - {"sqs:SendMessage"} == OWN
