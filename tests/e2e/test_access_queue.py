"""The local stack reads AuditAccessQueue as Lambda would (its own trigger into the same
receiver, ACCESS_QUEUE_ARN set), and the receiver runs as its role: what it dead-letters carries
the SenderId "<RoleId>:<function name>" that the table's tag audit:receiver-role-id names, and an
access event sent with the local `test` key carries the sender auditctl claims for that key
(local/motoserver.py). One local system (moto, the real receiver under cargo lambda watch) for the
module.

test_a_forged_access_event_is_refused_and_a_genuine_one_kept needs the receiver to read
ACCESS_QUEUE_ARN and check callerUserId against SenderId (issue 25): it fails until then."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from local.harness import LocalSystem, _client

ROOT = Path(__file__).resolve().parents[2]
AUDIT_TIME = "2026-11-22T10:00:00.000Z"


@pytest.fixture(scope="module")
def auditctl() -> Path:
    env = dict(os.environ, CARGO_TERM_COLOR="never")
    subprocess.run(["cargo", "build", "--quiet", "--bin", "auditctl"], cwd=ROOT, env=env, check=True)
    return ROOT / "target" / "debug" / "auditctl"


@pytest.fixture(scope="module")
def system():
    work_dir = Path(os.environ.get("E2E_WORK_DIR", ROOT / ".local" / "e2e")) / "test_access_queue"
    work_dir.mkdir(parents=True, exist_ok=True)
    with LocalSystem(work_dir, visibility_timeout=4, pollers=1) as s:
        yield s


def _caller(system: LocalSystem) -> dict:
    """Who the local `test` key is (as auditctl would ask)."""
    return _client("sts", system.endpoint).get_caller_identity()


def _access_event(system: LocalSystem, message_id: str, caller_user_id: str, action: str = "auditctl.query") -> str:
    return json.dumps({"messageId": message_id, "auditTime": AUDIT_TIME, "auditText": "auditctl query",
                       "actor": _caller(system)["Arn"], "action": action, "resource": system.stack.table_name,
                       "callerUserId": caller_user_id})


def _items(system: LocalSystem, message_id: str) -> list[dict]:
    return [it for it in system.scan_table() if it["messageId"] == message_id]


def _dead_letters(system: LocalSystem) -> dict[str, dict]:
    """The dead-letter queue's messages by their original SQS id (left there, visible again)."""
    return {m["original_id"]: m for m in system.peek_dlq()}


def test_the_access_queue_reaches_the_receiver_which_dead_letters_as_its_role(system):
    tags = {t["Key"]: t["Value"] for t in system.ddb.list_tags_of_resource(ResourceArn=system.ddb.describe_table(
        TableName=system.stack.table_name)["Table"]["TableArn"])["Tags"]}
    assert tags["audit:access-queue-arn"] == system.stack.access_queue.arn
    genuine = _access_event(system, "access-local-1", _caller(system)["UserId"])
    system.sqs.send_message(QueueUrl=system.access_queue_url, MessageBody=genuine)
    poison_id = system.sqs.send_message(QueueUrl=system.queue_url, MessageBody="not json")["MessageId"]

    assert system.wait_access_drained(120), system.depth(system.access_queue_url)
    assert system.wait_drained(120), system.depth()

    (item,) = _items(system, "access-local-1")
    assert item["eventSource"] == system.stack.access_queue.arn  # delivered by the access queue's trigger
    letter = _dead_letters(system)[poison_id]
    assert letter["reason"] == "invalid_json"
    # The function sent it with its role's session: the tag names that role.
    role_id, session = letter["Attributes"]["SenderId"].split(":", 1)
    assert (role_id, session) == (tags["audit:receiver-role-id"], system.stack.function.name)


def test_a_forged_access_event_is_refused_and_a_genuine_one_kept(system):
    """Needs the receiver's access checks (issue 25)."""
    me = _caller(system)["UserId"]
    genuine = system.sqs.send_message(QueueUrl=system.access_queue_url,
                                      MessageBody=_access_event(system, "access-local-2", me))["MessageId"]
    forged = system.sqs.send_message(QueueUrl=system.access_queue_url,
                                     MessageBody=_access_event(system, "access-local-3", "AIDAEXAMPLEOTHERUSER"))["MessageId"]
    not_auditctl = system.sqs.send_message(QueueUrl=system.access_queue_url, MessageBody=_access_event(
        system, "access-local-4", me, action="user.login"))["MessageId"]
    reserved = system.sqs.send_message(QueueUrl=system.queue_url,
                                       MessageBody=_access_event(system, "access-local-5", me))["MessageId"]

    assert system.wait_access_drained(120), system.depth(system.access_queue_url)
    assert system.wait_drained(120), system.depth()

    (item,) = _items(system, "access-local-2")
    assert item["senderId"] == me and item["extra"]["callerUserId"] == me
    for key in ("access-local-3", "access-local-4", "access-local-5"):
        assert _items(system, key) == [], key
    letters = _dead_letters(system)
    assert genuine not in letters
    assert {i: letters[i]["reason"] for i in (forged, not_auditctl, reserved)} == {
        forged: "access_event_invalid", not_auditctl: "access_event_invalid", reserved: "reserved_action"}


def test_an_access_event_naming_another_person_as_actor_is_refused(system):
    """A reader sends as herself (callerUserId is her attested SenderId) but names another
    person's role session as `actor`, to frame them in `auditctl query --actor`: refused."""
    me = _caller(system)["UserId"]
    framing = json.loads(_access_event(system, "access-local-6", me))
    framing["actor"] = "arn:aws:sts::123456789012:assumed-role/AuditOperator/alice"
    sent = system.sqs.send_message(QueueUrl=system.access_queue_url, MessageBody=json.dumps(framing))["MessageId"]

    assert system.wait_access_drained(120), system.depth(system.access_queue_url)
    assert _items(system, "access-local-6") == []
    letter = _dead_letters(system)[sent]
    assert letter["reason"] == "access_event_invalid"
    assert "actor is not the ARN of its attested sender" in json.dumps(letter), letter


def test_a_read_with_no_access_queue_is_refused_and_reads_nothing(system, auditctl):
    """A reader who leaves ACCESS_QUEUE_URL unset, so that her read goes unrecorded: every command
    that reads, and the viewer, refuse (exit 2, nothing on stdout, nothing sent); saying so with
    --no-audit-event reads, and says on stderr that the access was not recorded."""
    env = {k: v for k, v in {**os.environ, **system.stack_env()}.items() if k != "ACCESS_QUEUE_URL"}
    system.sqs.send_message(QueueUrl=system.queue_url, MessageBody=json.dumps({
        "messageId": "unrecorded-read-1", "auditTime": AUDIT_TIME, "auditText": "read me",
        "actor": "alice", "action": "user.login"}))
    assert system.wait_drained(120), system.depth()
    assert len(_items(system, "unrecorded-read-1")) == 1
    def access_events() -> list[dict]:
        assert system.wait_access_drained(120), system.depth(system.access_queue_url)
        return [it for it in system.scan_table() if it.get("action", "").startswith("auditctl.")]

    before = access_events()
    window = ["--from", "2026-11-22T00:00:00Z", "--to", "2026-11-22T23:59:59.999Z", "--format", "jsonl"]
    for args in (["query", *window], ["get", "unrecorded-read-1", "--format", "jsonl"], ["dlq", "list"], ["ui"]):
        done = subprocess.run([str(auditctl), *args], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stdout == "", (args, done.stdout)
        assert "access not recorded, so nothing was read: no access queue" in done.stderr, done.stderr
        assert "--no-audit-event" in done.stderr, done.stderr
    assert access_events() == before, "no access event was sent"
    said = subprocess.run([str(auditctl), "query", *window, "--no-audit-event"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert said.returncode == 0, said.stderr
    assert "access not recorded: --no-audit-event" in said.stderr
    assert "unrecorded-read-1" in said.stdout


def _forged_context() -> dict:
    """What a producer makes up: another service as first sender, an old time, another message."""
    return {"failureContext": {"DataType": "String", "StringValue": json.dumps({
        "reason": "throttled", "sqsMessageId": "someone-elses-message", "sentTimestamp": "1700000000000",
        "originalSenderId": "AROAPAYMENTSSERVICE01:payments"})}}


def test_a_producers_failure_context_is_not_taken_and_a_redrive_does_not_vouch_for_it(system):
    """A producer (the local `test` key, AuditProducerPolicy's rights) attaches a failureContext
    naming another service as first sender and an old send time: its valid event is written as its
    own delivery with no other first sender; its invalid one is dead-lettered naming the producer
    itself; redriven as the operator role and failing again, it still names the producer."""
    me = _caller(system)["UserId"]
    valid = system.sqs.send_message(QueueUrl=system.queue_url, MessageBody=json.dumps({"auditText": "paid 10 EUR"}),
                                    MessageAttributes=_forged_context())["MessageId"]
    invalid = system.sqs.send_message(QueueUrl=system.queue_url, MessageBody="not json",
                                      MessageAttributes=_forged_context())["MessageId"]
    assert system.wait_drained(120), system.depth()

    (item,) = _items(system, valid)  # keyed by its own SQS id, not the claimed one
    assert item["sqsMessageId"] == valid
    assert item["senderId"] == me
    assert "originalSenderId" not in item, item
    assert not item["sentAt"].startswith("2023-11-14"), item["sentAt"]
    assert _items(system, "someone-elses-message") == []
    letter = _dead_letters(system)[invalid]
    context = json.loads(letter["MessageAttributes"]["failureContext"]["StringValue"])
    assert (context["sqsMessageId"], context["originalSenderId"], context["senderId"]) == (invalid, me, me), context

    assert system.redrive({"invalid_json"}) >= 1
    assert system.wait_drained(120), system.depth()
    again = _dead_letters(system)[invalid]  # the original identity, kept across the operator's redrive
    context = json.loads(again["MessageAttributes"]["failureContext"]["StringValue"])
    assert context["originalSenderId"] == me, context
    assert context["senderId"].endswith(":operator"), context
