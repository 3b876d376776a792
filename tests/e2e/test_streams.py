"""The local stream trigger does what Lambda's event source mapping does for a DynamoDB stream.
These tests drive it with a stand-in archiver (test_trigger.py's tiny HTTP function), so that
every answer Lambda can get — partial failures, function errors, malformed answers — can be
produced on purpose, on the table, stream and failure queue created from template.yaml."""

import json
import time

import pytest

from local import procs
from local.harness import _client
from local.stack import DEFAULT_TEMPLATE, create_stack, read_stack
from local.streams import WholeBatchFailure, failed_from, from_stack
from test_trigger import StandIn, wait_until

OK = (200, {"batchItemFailures": []})


@pytest.fixture
def stack(work_dir):
    moto, endpoint = procs.start_moto(work_dir)
    try:
        st = create_stack(read_stack(DEFAULT_TEMPLATE, {"ArchiveRetryAttempts": "2"}), endpoint)
        st.endpoint = endpoint
        yield st
    finally:
        moto.stop()


def put(st, n, start=0):
    ddb = _client("dynamodb", st.endpoint)
    for i in range(start, start + n):
        ddb.put_item(TableName=st.table_name, Item={
            "messageId": {"S": f"m{i:04d}"}, "auditTime": {"S": "2026-11-22T10:00:00.000Z"},
            "auditText": {"S": f"event {i}"}, "expiresAt": {"N": "1"}})


def trigger(st, standin, work_dir, **kw):
    kw.setdefault("batching_window_s", 0)
    kw.setdefault("retry_backoff_s", 0.01)
    return from_stack(st, st.endpoint, standin.url, log_path=str(work_dir / "streams.log"), **kw)


def seqs(records):
    return [r["dynamodb"]["SequenceNumber"] for r in records]


def failure_messages(st):
    sqs = _client("sqs", st.endpoint)
    msgs = sqs.receive_message(QueueUrl=st.archive_failure_queue.url, MaxNumberOfMessages=10,
                               WaitTimeSeconds=0).get("Messages", [])
    return [json.loads(m["Body"]) for m in msgs]


def test_template_stream_event_is_read_with_its_settings(stack):
    esm = stack.stream_esm
    assert stack.archiver.binary == "audit-archiver"
    assert esm.starting_position == "TRIM_HORIZON" and esm.batch_size == 1000
    assert esm.report_batch_item_failures and esm.bisect_batch_on_function_error
    assert esm.maximum_retry_attempts == 2            # the parameter given
    assert stack.archive_failure_queue.logical_id == "AuditArchiveFailureQueue"
    assert stack.stream_arn.startswith(f"arn:aws:dynamodb:us-east-1:123456789012:table/{stack.table_name}/stream/")
    assert stack.archiver.environment["ARCHIVE_BUCKET"] == stack.archive_bucket.name
    s3 = _client("s3", stack.endpoint)
    lock = s3.get_object_lock_configuration(Bucket=stack.archive_bucket.name)["ObjectLockConfiguration"]
    assert lock["Rule"]["DefaultRetention"]["Mode"] == "COMPLIANCE"
    assert lock["Rule"]["DefaultRetention"]["Days"] == int(stack.parameters["ArchiveRetentionDays"])
    assert s3.get_bucket_versioning(Bucket=stack.archive_bucket.name)["Status"] == "Enabled"
    # A locked version cannot be deleted; moto answers GetObjectRetention with a 500, so the
    # lock is read with HeadObject. The bucket policy (only the archiver's role writes, nobody
    # deletes: test_bucket_policy.py) is taken out first, so that Object Lock alone refuses.
    s3.delete_bucket_policy(Bucket=stack.archive_bucket.name)
    put_resp = s3.put_object(Bucket=stack.archive_bucket.name, Key="trail/x.jsonl.gz", Body=b"x")
    head = s3.head_object(Bucket=stack.archive_bucket.name, Key="trail/x.jsonl.gz")
    assert head["ObjectLockMode"] == "COMPLIANCE"
    with pytest.raises(Exception):
        s3.delete_object(Bucket=stack.archive_bucket.name, Key="trail/x.jsonl.gz", VersionId=put_resp["VersionId"])


def test_every_record_reaches_the_function_once_in_order_in_lambdas_shape(stack, work_dir):
    standin = StandIn(lambda ev: OK)
    put(stack, 25)
    t = trigger(stack, standin, work_dir, batch_size=10).start()
    try:
        assert t.wait_caught_up(30)
        ddb = _client("dynamodb", stack.endpoint)
        ddb.update_item(TableName=stack.table_name,
                        Key={"messageId": {"S": "m0003"}, "auditTime": {"S": "2026-11-22T10:00:00.000Z"}},
                        UpdateExpression="SET auditText = :t", ExpressionAttributeValues={":t": {"S": "changed"}})
        wait_until(lambda: len(standin.received()) == 26, 30, "the MODIFY record")
    finally:
        t.stop()
        standin.close()
    got = standin.received()
    assert len({r["eventID"] for r in got}) == 26
    assert seqs(got) == sorted(seqs(got), key=int)
    assert max(len(ev["Records"]) for ev in standin.events) <= 10
    first, modify = got[0], got[-1]
    assert first["eventName"] == "INSERT" and modify["eventName"] == "MODIFY"
    assert {k: first[k] for k in ("eventVersion", "eventSource", "awsRegion", "eventSourceARN")} == {
        "eventVersion": "1.1", "eventSource": "aws:dynamodb", "awsRegion": "us-east-1",
        "eventSourceARN": stack.stream_arn}
    d = first["dynamodb"]
    assert isinstance(d["ApproximateCreationDateTime"], int)
    assert abs(d["ApproximateCreationDateTime"] - time.time()) < 120
    assert d["Keys"] == {"messageId": {"S": "m0000"}, "auditTime": {"S": "2026-11-22T10:00:00.000Z"}}
    assert d["NewImage"]["auditText"] == {"S": "event 0"} and "OldImage" not in d
    assert d["StreamViewType"] == "NEW_AND_OLD_IMAGES" and d["SizeBytes"] > 0
    assert modify["dynamodb"]["OldImage"]["auditText"] == {"S": "event 3"}
    assert modify["dynamodb"]["NewImage"]["auditText"] == {"S": "changed"}
    assert "userIdentity" not in modify


def test_partial_failure_resumes_from_the_lowest_failed_sequence_number(stack, work_dir):
    calls = []

    def behave(ev):
        calls.append(seqs(ev["Records"]))
        if len(calls) == 1:  # the 4th and 7th fail: everything from the 4th comes again
            return 200, {"batchItemFailures": [{"itemIdentifier": ev["Records"][6]["dynamodb"]["SequenceNumber"]},
                                               {"itemIdentifier": ev["Records"][3]["dynamodb"]["SequenceNumber"]}]}
        return OK

    standin = StandIn(behave)
    put(stack, 10)
    t = trigger(stack, standin, work_dir).start()
    try:
        assert t.wait_caught_up(30)
    finally:
        t.stop()
        standin.close()
    assert len(calls) == 2
    assert calls[1] == calls[0][3:]
    assert t.stats.records_done == 10 and t.stats.given_up_batches == 0


def test_function_errors_bisect_and_a_poison_record_is_given_up_to_the_failure_queue(stack, work_dir):
    put(stack, 8)
    poison = None

    def behave(ev):
        nonlocal poison
        ids = [r["dynamodb"]["Keys"]["messageId"]["S"] for r in ev["Records"]]
        if "m0005" in ids:
            poison = next(r["dynamodb"]["SequenceNumber"] for r in ev["Records"]
                          if r["dynamodb"]["Keys"]["messageId"]["S"] == "m0005")
            return 500, b'{"errorType":"Boom","errorMessage":"cannot archive"}'
        return OK

    standin = StandIn(behave)
    t = trigger(stack, standin, work_dir).start()
    try:
        assert t.wait_caught_up(60)
    finally:
        t.stop()
        standin.close()
    sizes = [len(ev["Records"]) for ev in standin.events]
    assert sizes[:4] == [8, 4, 4, 2], sizes       # 8 -> 4 (ok) + 4 -> 2 (ok) + 2 -> 1 ...
    done = [r for ev, size in zip(standin.events, sizes) for r in ev["Records"]]
    assert all(any(r["dynamodb"]["Keys"]["messageId"]["S"] == f"m{i:04d}" for r in done) for i in range(8))
    # The poison record alone: first try plus ArchiveRetryAttempts (2) retries, then given up.
    alone = [ev for ev in standin.events if len(ev["Records"]) == 1 and seqs(ev["Records"]) == [poison]]
    assert len(alone) == 3
    (msg,) = failure_messages(stack)
    info = msg["DDBStreamBatchInfo"]
    assert info["startSequenceNumber"] == info["endSequenceNumber"] == poison
    assert info["batchSize"] == 1 and info["streamArn"] == stack.stream_arn
    assert msg["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert msg["requestContext"]["functionArn"].endswith(":function:" + stack.archiver.name)
    assert msg["responseContext"]["functionError"] == "Unhandled"
    # The records after the poison one were archived after it, in order (the shard waited).
    after = [ev for ev in standin.events if any(r["dynamodb"]["Keys"]["messageId"]["S"] == "m0006"
                                                for r in ev["Records"])]
    assert standin.events.index(after[-1]) > standin.events.index(alone[-1])
    assert t.stats.records_done == 8 and t.stats.given_up_records == 1


def test_malformed_answers_fail_the_whole_batch():
    batch = [{"dynamodb": {"SequenceNumber": s}} for s in ("10", "20", "30")]
    assert failed_from(None, batch) is None
    assert failed_from({"batchItemFailures": []}, batch) is None
    assert failed_from({"batchItemFailures": [{"itemIdentifier": "30"}, {"itemIdentifier": "20"}]}, batch) == 1
    assert failed_from({"batchItemFailures": [{"itemIdentifier": "20"}]}, batch, report_batch_item_failures=False) \
        is None
    for bad in ([{"itemIdentifier": ""}], [{"itemIdentifier": None}], [{"itemId": "20"}],
                [{"itemIdentifier": "25"}], "x"):
        with pytest.raises(WholeBatchFailure):
            failed_from({"batchItemFailures": bad}, batch)


def test_ttl_deletions_carry_dynamodbs_identity_and_other_removes_do_not(stack, work_dir):
    standin = StandIn(lambda ev: OK)
    put(stack, 3)
    t = trigger(stack, standin, work_dir).start()
    try:
        assert t.wait_caught_up(30)
        ddb = _client("dynamodb", stack.endpoint)
        ddb.delete_item(TableName=stack.table_name,
                        Key={"messageId": {"S": "m0000"}, "auditTime": {"S": "2026-11-22T10:00:00.000Z"}})
        assert t.delete_expired(ddb, stack.table_name, stack.table_ttl_attribute) == 2
        wait_until(lambda: len(standin.received()) == 6, 30, "three REMOVE records")
    finally:
        t.stop()
        standin.close()
    removes = [r for r in standin.received() if r["eventName"] == "REMOVE"]
    by_id = {r["dynamodb"]["Keys"]["messageId"]["S"]: r for r in removes}
    assert "userIdentity" not in by_id["m0000"]
    for key in ("m0001", "m0002"):
        assert by_id[key]["userIdentity"] == {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
        assert by_id[key]["dynamodb"]["OldImage"]["auditText"]["S"].startswith("event")
