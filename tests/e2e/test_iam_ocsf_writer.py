"""The OCSF writer's role in template.yaml is enough and no more, under moto's access control
(docs/ocsf.md "In the template"): the real audit-ocsf-writer binary, with temporary credentials of
a role that holds exactly AuditOcsfWriterRole's inline policies (read from the template at run
time, resolved to this stack's ARNs), writes a stream batch as Parquet under ext/ of
AuditOcsfBucket, and writes it again as a retry would (finding its own objects by their bytes);
every request signed and checked. Taking s3:PutObject or s3:GetObject away makes a step fail,
naming the action; what the role does not grant is refused (writing outside ext/, the archive
bucket, deleting, the table's items). What moto cannot check: tests/e2e/iam_support.py."""

import pytest

from iam_support import Account, Function, function_role, refusals, refused, stream_event, without_action

FUNCTION = "AuditOcsfWriterFunction"
ITEMS = [("iam-ocsf-1", "2026-11-22T10:00:00.000Z", "user.login"),
         ("iam-ocsf-2", "2026-11-22T10:00:01.000Z", "invoice.create")]


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
    return account.stack.ocsf_bucket.name


def _stream_event(account: Account) -> dict:
    event = stream_event(account, [{
        "messageId": {"S": message_id}, "auditTime": {"S": audit_time}, "action": {"S": action},
        "actor": {"S": "alice"}, "eventSource": {"S": account.queue.arn}} for message_id, audit_time, action in ITEMS])
    assert len(event["Records"]) == len(ITEMS), event
    return event


def _run(account: Account, creds, event: dict) -> list[dict]:
    """The batch, then the batch again (a retry): the two answers."""
    with Function(account, creds, log_name="ocsf-writer.log", spec=account.stack.ocsf_writer) as fn:
        return [fn.invoke(event, 60), fn.invoke(event, 60)]


def _objects(account: Account) -> list[dict]:
    page = account.client("s3").list_object_versions(Bucket=_bucket(account), Prefix="ext/")
    return page.get("Versions", [])


def test_the_template_role_writes_a_batch_and_its_retry_writes_nothing_more(account):
    event = _stream_event(account)
    creds = _role(account)
    account.enforce()

    answers = _run(account, creds, event)

    assert answers == [{"batchItemFailures": []}] * 2
    keys = sorted(o["Key"] for o in _objects(account))
    assert [k.rsplit("/", 1)[1].split("-", 1)[0] for k in keys] == ["3002", "6003"], keys
    assert all(k.startswith("ext/audit-receiver/region=us-east-1/") for k in keys), keys
    assert len(_objects(account)) == 2, "one version each: the retry found its objects"
    assert refusals(account.work_dir) == []  # not one request of the role was refused


@pytest.mark.parametrize("action", ["s3:PutObject", "s3:GetObject"])
def test_each_object_grant_of_the_role_is_needed(account, action):
    event = _stream_event(account)
    creds = _role(account, drop=action)
    account.enforce()

    answers = _run(account, creds, event)

    assert any(a["batchItemFailures"] for a in answers), answers
    refused_actions = {r.split(" on ", 1)[0] for r in refusals(account.work_dir)}
    assert refused_actions == {action}, (refused_actions, answers)


def test_the_role_grants_nothing_else(account):
    creds = _role(account)
    account.enforce()
    s3, ddb = account.client("s3", creds), account.client("dynamodb", creds)
    ocsf, archive = _bucket(account), account.stack.archive_bucket.name
    assert refused(s3.put_object, Bucket=ocsf, Key="elsewhere/x.parquet", Body=b"x") == "AccessDenied"
    assert refused(s3.put_object, Bucket=archive, Key="ext/x.parquet", Body=b"x") == "AccessDenied"
    assert refused(s3.put_object, Bucket=archive, Key="trail/x.jsonl.gz", Body=b"x") == "AccessDenied"
    assert refused(s3.delete_object, Bucket=ocsf, Key="ext/x.parquet") == "AccessDenied"
    assert refused(ddb.scan, TableName=account.table_name) == "AccessDeniedException"
