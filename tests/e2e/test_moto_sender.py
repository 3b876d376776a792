"""The local moto server (local/motoserver.py) gives each SQS message the sender SQS would attest:
its SenderId is the UserId that sts:GetCallerIdentity answers for the credentials that sent it
(an IAM user's id, an assumed role's "<RoleId>:<session>", the fixed id moto answers for the local
stack's `test` key), where plain moto gives every message one constant. The function compares an
access event's claimed caller with it (docs/events.md "Access events: the access queue")."""

import json

import pytest

from local import procs

REGION = "us-east-1"
# What moto 5.2.5 gives every message, whoever sends it (moto/sqs/models.py DEFAULT_SENDER_ID).
MOTO_CONSTANT = "AIDAIT2UOQQY3AUEKVGXU"
DEFAULT = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}


@pytest.fixture
def endpoint(work_dir):
    proc, url = procs.start_moto(work_dir)
    yield url
    proc.stop()


def _client(endpoint: str, service: str, creds: dict | None = None):
    import boto3

    return boto3.client(service, endpoint_url=endpoint, region_name=REGION, **(creds or DEFAULT))


def _user(endpoint: str, name: str) -> tuple[dict, str]:
    """An IAM user's credentials and its user id."""
    iam = _client(endpoint, "iam")
    user_id = iam.create_user(UserName=name)["User"]["UserId"]
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return {"aws_access_key_id": key["AccessKeyId"], "aws_secret_access_key": key["SecretAccessKey"]}, user_id


def _role_session(endpoint: str, name: str, session: str) -> tuple[dict, str]:
    """An assumed role's credentials and its role id."""
    trust = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}]}
    role = _client(endpoint, "iam").create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]
    c = _client(endpoint, "sts").assume_role(RoleArn=role["Arn"], RoleSessionName=session)["Credentials"]
    return {"aws_access_key_id": c["AccessKeyId"], "aws_secret_access_key": c["SecretAccessKey"],
            "aws_session_token": c["SessionToken"]}, role["RoleId"]


def _caller(endpoint: str, creds: dict | None) -> str:
    return _client(endpoint, "sts", creds).get_caller_identity()["UserId"]


def _senders(endpoint: str, url: str, expected: int) -> dict[str, str]:
    """Body -> SenderId of the queue's messages (each received once)."""
    sqs = _client(endpoint, "sqs")
    got: dict[str, str] = {}
    for _ in range(10):  # what is visible comes at once; the bound only stops a broken run
        if len(got) >= expected:
            break
        for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600,
                                     MessageSystemAttributeNames=["SenderId"]).get("Messages", []):
            got[m["Body"]] = m["Attributes"]["SenderId"]
    assert len(got) == expected, got
    return got


def test_each_message_is_sent_by_the_caller_that_get_caller_identity_names(endpoint):
    url = _client(endpoint, "sqs").create_queue(QueueName="senders")["QueueUrl"]
    user, user_id = _user(endpoint, "producer")
    role, role_id = _role_session(endpoint, "receiver-role", "audit-receiver")

    _client(endpoint, "sqs", user).send_message(QueueUrl=url, MessageBody="by the user")
    _client(endpoint, "sqs", role).send_message(QueueUrl=url, MessageBody="by the role")
    _client(endpoint, "sqs").send_message(QueueUrl=url, MessageBody="by the test key")
    _client(endpoint, "sqs", user).send_message_batch(QueueUrl=url, Entries=[
        {"Id": "1", "MessageBody": "by the user, batched 1"}, {"Id": "2", "MessageBody": "by the user, batched 2"}])

    senders = _senders(endpoint, url, 5)
    assert senders == {
        "by the user": _caller(endpoint, user),
        "by the role": _caller(endpoint, role),
        "by the test key": _caller(endpoint, None),
        "by the user, batched 1": _caller(endpoint, user),
        "by the user, batched 2": _caller(endpoint, user),
    }
    # As SQS attests them: an IAM user's id (moto's are not AIDA...), a role session's
    # "<RoleId>:<session name>".
    assert senders["by the user"] == user_id
    assert senders["by the role"] == f"{role_id}:audit-receiver"
    # The local stack's key is no IAM user: moto's GetCallerIdentity answers a fixed id for it.
    assert senders["by the test key"] == "AKIAIOSFODNN7EXAMPLE"
    assert MOTO_CONSTANT not in senders.values()


def test_a_message_moved_to_the_dead_letter_queue_keeps_its_sender(endpoint):
    sqs = _client(endpoint, "sqs")
    dlq = sqs.create_queue(QueueName="senders-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    url = sqs.create_queue(QueueName="senders-src", Attributes={
        "VisibilityTimeout": "0", "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1})
    })["QueueUrl"]
    user, user_id = _user(endpoint, "producer")
    _client(endpoint, "sqs", user).send_message(QueueUrl=url, MessageBody="poison")

    # Received once (visibility 0: back at once), then moved by SQS on the next receive.
    assert len(sqs.receive_message(QueueUrl=url).get("Messages", [])) == 1
    assert sqs.receive_message(QueueUrl=url).get("Messages", []) == []
    assert _senders(endpoint, dlq, 1) == {"poison": user_id}
