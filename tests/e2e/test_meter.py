"""The request meter of `make cost-measure` (local/meter.py): a known sequence of requests, sent by
boto3 through the meter to moto_server, gives the known counts by program, service and API."""

import boto3

from local import procs
from local.meter import Meter


def _client(service, endpoint):
    return boto3.client(service, endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="test",
                        aws_secret_access_key="test")


def test_a_known_sequence_of_requests_gives_the_known_counts(work_dir):
    moto, endpoint = procs.start_moto(work_dir)
    try:
        with Meter(endpoint) as meter:
            # Two programs, each with its own endpoint.
            sqs = _client("sqs", meter.endpoint("producer"))
            url = sqs.create_queue(QueueName="q")["QueueUrl"]
            for i in range(3):
                sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
            sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "x"}])
            poller = _client("sqs", meter.endpoint("poller"))
            assert len(poller.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]) == 4
            assert "Messages" not in poller.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
            ddb = _client("dynamodb", meter.endpoint("receiver"))
            ddb.create_table(TableName="t", BillingMode="PAY_PER_REQUEST",
                             AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
                             KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}])
            for i in range(2):
                ddb.put_item(TableName="t", Item={"k": {"S": f"{i}"}})
            s3 = _client("s3", meter.endpoint("archiver"))
            s3.create_bucket(Bucket="bkt")
            s3.put_object(Bucket="bkt", Key="trail/2026/x.gz", Body=b"12345")
            s3.put_object(Bucket="bkt", Key="state/m.json", Body=b"{}")
            s3.get_object(Bucket="bkt", Key="trail/2026/x.gz")
            # Through the meter a HEAD still tells the object's length.
            assert s3.head_object(Bucket="bkt", Key="state/m.json")["ContentLength"] == 2
            s3.list_objects_v2(Bucket="bkt", Prefix="state/")
            s3.list_object_versions(Bucket="bkt", Prefix="digests/")
            kms = _client("kms", meter.endpoint("archiver"))
            key = kms.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")["KeyMetadata"]["KeyId"]
            kms.sign(KeyId=key, Message=b"m", SigningAlgorithm="ECDSA_SHA_256")
            _client("sts", meter.endpoint("archiver")).get_caller_identity()

            counts = meter.counts(reset=True)
            assert meter.counts() == {}
    finally:
        moto.stop()

    requests = {p: {k: v["requests"] for k, v in c.items()} for p, c in counts.items()}
    assert requests == {
        "producer": {"sqs CreateQueue": 1, "sqs SendMessage": 3, "sqs SendMessageBatch": 1},
        # A receive that returned nothing is polling, apart from those that carry messages.
        "poller": {"sqs ReceiveMessage": 1, "sqs ReceiveMessage empty": 1},
        "receiver": {"dynamodb CreateTable": 1, "dynamodb PutItem": 2},
        "archiver": {"s3 CreateBucket": 1, "s3 PutObject trail/": 1, "s3 PutObject state/": 1,
                     "s3 GetObject trail/": 1, "s3 HeadObject state/": 1, "s3 ListObjectsV2 state/": 1,
                     "s3 ListObjectVersions digests/": 1, "kms CreateKey": 1, "kms Sign": 1,
                     "sts GetCallerIdentity": 1},
    }
    # The bytes sent are counted with each request: the object's 5 bytes with its PUT.
    assert counts["archiver"]["s3 PutObject trail/"]["bytes"] == 5
