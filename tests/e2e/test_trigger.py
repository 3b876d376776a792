"""The local SQS trigger does what Lambda's event source mapping does. These tests drive it
with a stand-in function (a tiny HTTP server in this process), so that every answer Lambda can
get — partial failures, errors, malformed answers, unknown ids — can be produced on purpose."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from local import procs
from local.harness import _client
from local.stack import DEFAULT_TEMPLATE, create_stack, read_stack
from local.trigger import Trigger, WholeBatchFailure, failed_ids, queue_depth, wait_drained


class StandIn:
    """An HTTP function: `behave(event) -> (status, body)`; records every event it got."""

    def __init__(self, behave):
        self.events: list[dict] = []
        self.behave = behave
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self):
                ev = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.events.append(ev)
                status, body = outer.behave(ev)
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/2015-03-31/functions/f/invocations"

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def received(self) -> list[dict]:
        return [r for ev in self.events for r in ev["Records"]]


def wait_until(condition, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def local_queue(work_dir):
    moto, endpoint = procs.start_moto(work_dir)
    try:
        yield endpoint
    finally:
        moto.stop()


def make_stack(endpoint, params=None, vt=1):
    return create_stack(read_stack(DEFAULT_TEMPLATE, params, visibility_timeout=vt), endpoint)


def send(endpoint, url, bodies, **kw):
    sqs = _client("sqs", endpoint)
    ids = []
    for i in range(0, len(bodies), 10):
        resp = sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(j), "MessageBody": b, **kw} for j, b in enumerate(bodies[i:i + 10])])
        ids += [e["MessageId"] for e in sorted(resp["Successful"], key=lambda e: int(e["Id"]))]
    return ids


def dlq_ids(endpoint, stack):
    sqs = _client("sqs", endpoint)
    out = set()
    for _ in range(5):
        for m in sqs.receive_message(QueueUrl=stack.dead_letter_queue.url, MaxNumberOfMessages=10,
                                     VisibilityTimeout=300).get("Messages", []):
            out.add(m["MessageId"])
    return out


def run(endpoint, stack, fn, pollers=1, timeout=60):
    src = stack.source_queue
    t = Trigger(endpoint, src.url, src.arn, fn.url, batch_size=stack.esm.batch_size,
                batching_window_s=stack.esm.batching_window_s, pollers=pollers, invoke_timeout_s=10)
    with t:
        assert wait_drained(t, endpoint, src.url, timeout), "queue did not drain"
    return t


def test_failed_ids_follows_lambdas_rules():
    ids = {"a", "b"}
    for ok in (None, {}, {"batchItemFailures": []}, {"batchItemFailures": None}, ""):
        assert failed_ids(ok, ids) == set()
    assert failed_ids({"batchItemFailures": [{"itemIdentifier": "a"}]}, ids) == {"a"}
    for bad in ([], "text", 3, {"batchItemFailures": {}}, {"batchItemFailures": [{"itemIdentifier": ""}]},
                {"batchItemFailures": [{"itemIdentifier": None}]}, {"batchItemFailures": [{"id": "a"}]},
                {"batchItemFailures": [{"itemIdentifier": "zzz"}]}, {"batchItemFailures": ["a"]}):
        with pytest.raises(WholeBatchFailure):
            failed_ids(bad, ids)
    # Without ReportBatchItemFailures any answer of a successful invoke deletes the batch.
    assert failed_ids({"batchItemFailures": [{"itemIdentifier": "a"}]}, ids, False) == set()


def test_event_shape_partial_failures_and_redrive(local_queue):
    endpoint = local_queue
    stack = make_stack(endpoint)
    fn = StandIn(lambda ev: (200, {"batchItemFailures": [
        {"itemIdentifier": r["messageId"]} for r in ev["Records"] if "poison" in r["body"]]}))
    try:
        bodies = [json.dumps({"auditText": "poison" if i % 7 == 0 else f"ok {i}"}) for i in range(40)]
        ids = send(endpoint, stack.source_queue.url, bodies,
                   MessageAttributes={"source": {"DataType": "String", "StringValue": "tests"},
                                      "blob": {"DataType": "Binary", "BinaryValue": b"\x00\xff"}})
        t = run(endpoint, stack, fn)
        poison = {ids[i] for i in range(40) if i % 7 == 0}
        rec = fn.received()[0]
        assert set(rec) >= {"messageId", "receiptHandle", "body", "attributes", "messageAttributes", "md5OfBody",
                            "md5OfMessageAttributes", "eventSource", "eventSourceARN", "awsRegion"}
        assert rec["eventSource"] == "aws:sqs" and rec["eventSourceARN"] == stack.source_queue.arn
        assert rec["awsRegion"] == "us-east-1"
        assert set(rec["attributes"]) == {"ApproximateReceiveCount", "SentTimestamp", "SenderId",
                                          "ApproximateFirstReceiveTimestamp"}
        assert rec["messageAttributes"]["source"] == {"stringValue": "tests", "stringListValues": [],
                                                      "binaryListValues": [], "dataType": "String"}
        assert rec["messageAttributes"]["blob"]["binaryValue"] == "AP8="
        assert all(len(ev["Records"]) <= stack.esm.batch_size for ev in fn.events)
        counts = {}
        for r in fn.received():
            counts.setdefault(r["messageId"], []).append(int(r["attributes"]["ApproximateReceiveCount"]))
        max_receive = stack.source_queue.max_receive_count
        for mid in ids:
            if mid in poison:   # delivered maxReceiveCount times, counting up, then dead-lettered
                assert counts[mid] == list(range(1, max_receive + 1))
            else:               # delivered once, deleted
                assert counts[mid] == [1]
        assert dlq_ids(endpoint, stack) == poison
        assert t.stats.batch_failures == {}
    finally:
        fn.close()


@pytest.mark.parametrize("answer,cause", [
    ((500, {"errorType": "Boom", "errorMessage": "function error"}), "invocation_error"),
    ((200, b"{not json"), "invocation_error"),
    ((200, []), "malformed_response"),
    ((200, {"batchItemFailures": [{"itemIdentifier": "not-in-this-batch"}]}), "unknown_item_identifier"),
    ((200, {"batchItemFailures": [{"itemIdentifier": ""}]}), "bad_item_identifier"),
    ((200, {"batchItemFailures": [{"itemIdentifier": None}]}), "bad_item_identifier"),
])
def test_a_bad_answer_fails_the_whole_batch(local_queue, answer, cause):
    """The first delivery of every message gets the bad answer: nothing may be deleted, so every
    message comes back (receive count 2) and is then deleted by a good answer."""
    endpoint = local_queue
    stack = make_stack(endpoint)

    def behave(ev):
        if all(r["attributes"]["ApproximateReceiveCount"] == "1" for r in ev["Records"]):
            return answer
        return 200, {"batchItemFailures": []}

    fn = StandIn(behave)
    try:
        ids = send(endpoint, stack.source_queue.url, [json.dumps({"auditText": f"m{i}"}) for i in range(12)])
        t = run(endpoint, stack, fn)
        seen = {}
        for r in fn.received():
            seen.setdefault(r["messageId"], set()).add(r["attributes"]["ApproximateReceiveCount"])
        assert all("2" in seen[m] for m in ids), "a message of a failed batch was deleted"
        assert t.stats.batch_failures[cause] >= 1
        assert not dlq_ids(endpoint, stack)
    finally:
        fn.close()


def test_batch_size_and_batching_window_from_the_template(local_queue):
    endpoint = local_queue
    stack = make_stack(endpoint, {"BatchSize": "25", "BatchingWindow": "5"}, vt=30)
    assert (stack.esm.batch_size, stack.esm.batching_window_s) == (25, 5.0)
    fn = StandIn(lambda ev: (200, {"batchItemFailures": []}))
    try:
        sqs_url = stack.source_queue.url
        src = stack.source_queue
        t = Trigger(endpoint, src.url, src.arn, fn.url, batch_size=25, batching_window_s=5.0, pollers=1)
        with t:
            send(endpoint, sqs_url, [json.dumps({"auditText": f"a{i}"}) for i in range(3)])
            # The trigger holds the first three (received, in flight) and waits out its window:
            # four more sent now are gathered into the same batch.
            wait_until(lambda: queue_depth(endpoint, sqs_url)["ApproximateNumberOfMessagesNotVisible"] == 3,
                       10, "the trigger to receive the first three messages")
            send(endpoint, sqs_url, [json.dumps({"auditText": f"b{i}"}) for i in range(4)])
            assert wait_drained(t, endpoint, sqs_url, 30)
            first = len(fn.events)
            send(endpoint, sqs_url, [json.dumps({"auditText": f"c{i}"}) for i in range(60)])
            assert wait_drained(t, endpoint, sqs_url, 30)
        assert [len(ev["Records"]) for ev in fn.events[:first]] == [7]
        sizes = [len(ev["Records"]) for ev in fn.events[first:]]
        assert sum(sizes) == 60 and max(sizes) == 25
    finally:
        fn.close()


def test_fifo_records_carry_group_and_sequence_and_keep_group_order(local_queue):
    endpoint = local_queue
    sqs = _client("sqs", endpoint)
    dlq_url = sqs.create_queue(QueueName="audit-dlq.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    url = sqs.create_queue(QueueName="audit.fifo", Attributes={
        "FifoQueue": "true", "VisibilityTimeout": "1",
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 5})})["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    for i in range(12):
        sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"auditText": f"{'AB'[i % 2]}{i}"}),
                         MessageGroupId="AB"[i % 2], MessageDeduplicationId=f"d{i}")
    fn = StandIn(lambda ev: (200, {"batchItemFailures": []}))
    try:
        t = Trigger(endpoint, url, arn, fn.url, batch_size=10, pollers=1, invoke_timeout_s=10)
        with t:
            assert wait_drained(t, endpoint, url, 30)
        recs = fn.received()
        assert len(recs) == 12
        for r in recs:
            assert {"MessageGroupId", "MessageDeduplicationId", "SequenceNumber"} <= set(r["attributes"])
            assert r["eventSourceARN"].endswith(".fifo")
        for group in "AB":
            texts = [json.loads(r["body"])["auditText"] for r in recs if r["attributes"]["MessageGroupId"] == group]
            assert texts == sorted(texts, key=lambda s: int(s[1:])), texts
    finally:
        fn.close()
