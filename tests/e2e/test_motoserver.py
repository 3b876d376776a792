"""local/motoserver.py patches private moto methods: on the pinned moto every patch applies, and
on a moto that lacks one it refuses to start, naming what is missing, instead of running
unpatched (racy, slow) in silence."""

import subprocess
import sys
from pathlib import Path

import moto.dynamodb.models as ddb_models
import moto.s3.models as s3_models
import moto.s3.responses as s3_responses
import moto.sqs.models as sqs_models
import moto.sqs.responses as sqs_responses
import moto.sts.models as sts_models
import pytest

from local import motoserver

ROOT = Path(__file__).resolve().parents[2]


def test_patch_applies_on_the_pinned_moto():
    # In a child process: patch() changes moto's classes for good, and this process keeps them.
    check = (
        "import moto, moto.sqs.models as s, moto.dynamodb.models as d\n"
        "from local import motoserver\n"
        "motoserver.patch()\n"
        "assert all(hasattr(getattr(s.SQSBackend, n), '__wrapped__') for n in motoserver.SQS_LOCKED)\n"
        "assert all(hasattr(getattr(d.DynamoDBBackend, n), '__wrapped__') for n in motoserver.DDB_LOCKED)\n"
        "assert s.SQSBackend.receive_message.__wrapped__ is not None\n"
        "import moto.sqs.responses as r\n"
        "assert all(hasattr(getattr(r.SQSResponse, n), '__wrapped__') for n in motoserver.SQS_SENDING_REQUESTS)\n"
        "import moto.s3.responses as s3r, moto.s3.models as s3m\n"
        "assert hasattr(s3r.S3Response.key_response, '__wrapped__')\n"
        "assert hasattr(s3r.S3Response.bucket_response, '__wrapped__')\n"
        "assert s3m.FakeBucket.get_permission.__module__ == 'local.motoserver'\n"
        "print(moto.__version__)\n"
    )
    done = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert motoserver.PINNED_MOTO.endswith("==" + done.stdout.strip())


@pytest.mark.parametrize("owner, name", [
    (sqs_models.SQSBackend, "delete_message"),
    (sqs_models.SQSBackend, "receive_message"),
    (sqs_models.SQSBackend, "is_message_valid_based_on_retention_period"),
    (sqs_models.Queue, "wait_for_messages"),
    (sqs_models, "unix_time_millis"),
    (ddb_models.DynamoDBBackend, "put_item"),
    # The sender of a message (SenderId) from the request's credentials.
    (sqs_responses.SQSResponse, "send_message"),
    (sqs_responses.SQSResponse, "send_message_batch"),
    (sts_models.STSBackend, "get_caller_identity"),
    (sts_models, "sts_backends"),
    (sqs_models, "Message"),
    # Bucket policies evaluated with the request's principal, conditions and IAM action.
    (s3_responses.S3Response, "key_response"),
    (s3_responses.S3Response, "bucket_response"),
    (s3_models.FakeBucket, "get_permission"),
    (sts_models.STSBackend, "get_assumed_role_from_access_key"),
])
def test_patch_refuses_a_moto_without_a_patched_method(monkeypatch, owner, name):
    monkeypatch.delattr(owner, name)
    before = sqs_models.SQSBackend.send_message
    with pytest.raises(motoserver.MotoPatchError) as raised:
        motoserver.patch()
    message = str(raised.value)
    assert name in message and motoserver.PINNED_MOTO in message
    # Checked before anything is patched: nothing was half applied.
    assert sqs_models.SQSBackend.send_message is before
    assert not any(hasattr(getattr(sqs_responses.SQSResponse, n, None), "__wrapped__")
                   for n in motoserver.SQS_SENDING_REQUESTS)


def test_patch_refuses_a_receive_message_with_other_arguments(monkeypatch):
    monkeypatch.setattr(sqs_models.SQSBackend, "receive_message",
                        lambda self, queue_name, max_number_of_messages, wait_time: [])
    with pytest.raises(motoserver.MotoPatchError, match="receive_message takes"):
        motoserver.patch()


def test_patch_refuses_a_message_without_a_sender(monkeypatch):
    # moto keeps the sender in each Message's sender_id; a moto that names it otherwise would
    # have the patch stamp an attribute nobody reads.
    original = sqs_models.Message.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        del self.sender_id

    monkeypatch.setattr(sqs_models.Message, "__init__", init)
    with pytest.raises(motoserver.MotoPatchError, match="sender_id"):
        motoserver.patch()
