"""The archiver's writes against someone who can write to the archive bucket, and against writes
that land late (issue 24, findings 1 and 3), on the local stack: moto's server with the stack from
template.yaml, the real audit-archiver under `cargo lambda watch` (as its role, through the fault
proxy so that one S3 request can be held), and the stream's real records, delivered to it in
Lambda's shape as Lambda would (a retry, a bisected half after its first half was given up).

What a user sees is read back from the bucket: the trail is every archive object whose metadata
names a marker that lists its key with the SHA-256 of its bytes, and that no void marker names
(what the sealer lists); every event must be in it exactly once. The archiver's EMF documents and
ERROR lines say `ArchiveConflict` where someone else's bytes were found."""

import gzip
import hashlib
import json
import time
import urllib.parse
from datetime import datetime, timezone

import pytest
from botocore.exceptions import ClientError

from local import procs
from local.faultproxy import FaultConfig, FaultProxy
from local.harness import LOCAL_DIGEST_PERIOD_SECONDS, _client, emf_documents, log_events
from local.stack import DEFAULT_TEMPLATE, create_stack, read_stack
from local.streams import lambda_record

AUDIT_TIME = "2026-11-22T10:00:00.000Z"
# A write held past its marker's writeBy (5 s slack + 15 s time-out + 10 s grace after the marker).
LATE_S = 40.0


class OneHeldPut:
    """The fault proxy's targets: the next object PUT under trail/ (once armed), and nothing else."""

    def __init__(self):
        self.armed = False
        self.held: list[str] = []

    def __contains__(self, target: str) -> bool:
        if self.armed and "/trail/" in target and "x-id=PutObject" in target:
            self.armed = False
            self.held.append(target)
            return True
        return False


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    work_dir = tmp_path_factory.mktemp("insider")
    moto, endpoint = procs.start_moto(work_dir)
    proxy = archiver = None
    try:
        st = create_stack(read_stack(DEFAULT_TEMPLATE, digest_period=LOCAL_DIGEST_PERIOD_SECONDS), endpoint)
        st.endpoint = endpoint
        st.targets = OneHeldPut()
        proxy = FaultProxy(endpoint, FaultConfig(latency=1.0, latency_s=(LATE_S, LATE_S), targets=st.targets))
        proxy.start()
        spec = st.archiver
        env = procs.function_env(spec.environment, proxy.url, spec.credentials)
        archiver = procs.Function(env, work_dir / "archiver.log", timeout_s=spec.timeout_s,
                                  binary=spec.binary, mode="watch", concurrency=2)
        archiver.start(1800)
        st.function = archiver
        st.log = work_dir / "archiver.log"
        st.s3 = _client("s3", endpoint)
        st.bucket = st.archive_bucket.name
        # The insider here is one the bucket policy no longer stops (it refuses every object
        # write but the archiver's: test_bucket_policy.py): someone who could change the policy
        # took it out first. What the archiver reads must still not be trusted on sight.
        st.s3.delete_bucket_policy(Bucket=st.bucket)
        yield st
    finally:
        for step in (lambda: archiver and archiver.stop(), lambda: proxy and proxy.stop(), moto.stop):
            try:
                step()
            except Exception:  # noqa: BLE001 - stop the rest regardless
                pass


def put_items(st, prefix: str, n: int) -> list[str]:
    ddb = _client("dynamodb", st.endpoint)
    ids = [f"{prefix}-{i}" for i in range(n)]
    for mid in ids:
        ddb.put_item(TableName=st.table_name, Item={
            "messageId": {"S": mid}, "auditTime": {"S": AUDIT_TIME},
            "auditText": {"S": f"user alice read invoice 4711 ({mid})"}, "actor": {"S": "alice"}})
    return ids


def modify_item(st, mid: str) -> None:
    _client("dynamodb", st.endpoint).update_item(
        TableName=st.table_name, Key={"messageId": {"S": mid}, "auditTime": {"S": AUDIT_TIME}},
        UpdateExpression="SET auditText = :t", ExpressionAttributeValues={":t": {"S": "nothing happened"}})


def stream_records(st, prefix: str) -> list[dict]:
    """The stream's records of the items named `prefix-…`, in Lambda's shape, in stream order."""
    streams = _client("dynamodbstreams", st.endpoint)
    shards = streams.describe_stream(StreamArn=st.stream_arn)["StreamDescription"]["Shards"]
    out = []
    for shard in shards:
        it = streams.get_shard_iterator(StreamArn=st.stream_arn, ShardId=shard["ShardId"],
                                        ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while it:
            page = streams.get_records(ShardIterator=it, Limit=1000)
            got = page.get("Records", [])
            out += [r for r in got if r["dynamodb"]["Keys"]["messageId"]["S"].startswith(prefix + "-")]
            it = page.get("NextShardIterator") if got else None
    out.sort(key=lambda r: int(r["dynamodb"]["SequenceNumber"]))
    return [lambda_record(r, st.stream_arn) for r in out]


def invoke(st, records: list[dict]) -> list[str]:
    """The sequence numbers the archiver reports failed."""
    answer = procs.invoke(st.function.url, {"Records": records}, timeout=150)
    return [f["itemIdentifier"] for f in (answer or {}).get("batchItemFailures", [])]


def seqs(records: list[dict]) -> list[str]:
    return [r["dynamodb"]["SequenceNumber"] for r in records]


def marker_key(record: dict, attempt: int) -> str:
    return f"state/{int(record['dynamodb']['SequenceNumber']):040d}-{record['eventID']}/a{attempt}.json"


def keys(st, prefix: str) -> list[str]:
    out, kw = [], {"Bucket": st.bucket, "Prefix": prefix}
    while True:
        page = st.s3.list_objects_v2(**kw)
        out += [o["Key"] for o in page.get("Contents", [])]
        if not page.get("IsTruncated"):
            return out
        kw["ContinuationToken"] = page["NextContinuationToken"]


def exists(st, key: str) -> bool:
    try:
        st.s3.head_object(Bucket=st.bucket, Key=key)
        return True
    except ClientError as e:
        if e.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound"):
            return False
        raise


def oldest(st, key: str) -> dict:
    versions = st.s3.list_object_versions(Bucket=st.bucket, Prefix=key)["Versions"]
    first = [v for v in versions if v["Key"] == key][-1]
    return st.s3.get_object(Bucket=st.bucket, Key=key, VersionId=first["VersionId"])


def trail(st, kind: str, prefix: str) -> list[str]:
    """The messageIds (`prefix-…`) of every line of `kind` (trail/ or tamper/) objects that count:
    the marker the object names lists it with its SHA-256, and no void marker names it."""
    ids = []
    for key in keys(st, kind):
        obj = oldest(st, key)
        body = obj["Body"].read()
        named = obj.get("Metadata", {}).get("marker")
        if not named or exists(st, f"state/void/{key}.json"):
            continue
        try:
            marker = json.loads(oldest(st, named)["Body"].read())
        except (ClientError, ValueError):
            continue
        sha = hashlib.sha256(body).hexdigest()
        if marker.get("version", 0) < 2 or not any(
                o["key"] == key and o.get("sha256", "").lower() == sha for o in marker.get("objects", [])):
            continue
        for line in gzip.decompress(body).decode().splitlines():
            doc = json.loads(line)
            mid = doc.get("messageId") or doc.get("keys", {}).get("messageId", "")
            if str(mid).startswith(prefix + "-"):
                ids.append(mid)
    return sorted(ids)


def metric_sum(st, name: str, since: int) -> int:
    return sum(int(d.get(name, 0)) for d in emf_documents(st.log)[since:] if "BatchSize" in d)


def conflict_keys(st) -> set[str]:
    return {str(e.get("key")) for e in log_events(st.log)
            if str(e.get("message", "")).startswith("archive conflict")}


def object_key(kind: str, at: float, seq: str, attempt: int) -> str:
    period = int(at) // LOCAL_DIGEST_PERIOD_SECONDS * LOCAL_DIGEST_PERIOD_SECONDS
    t = datetime.fromtimestamp(period, timezone.utc)
    return (f"{kind}/dt={t:%Y-%m-%d}/hour={t:%H}/p{period}-{int(seq):040d}-a{attempt}.jsonl.gz")


def plant(st, key: str, body: bytes, metadata: dict | None = None) -> None:
    """A put with the test's own credentials, the bucket policy taken out (the fixture)."""
    st.s3.put_object(Bucket=st.bucket, Key=key, Body=body, Metadata=metadata or {},
                     ChecksumAlgorithm="SHA256")


def test_a_planted_marker_and_a_squatted_name_never_skip_or_drop_an_event(stack):
    st = stack
    ids = put_items(st, "plant", 6)
    modify_item(st, "plant-1")
    records = stream_records(st, "plant")
    assert len(records) == 7 and records[-1]["eventName"] == "MODIFY"
    # A marker planted at the run's first attempt, listing a planted object whose SHA-256 it
    # names (and which names it back), claiming every record: INSERTs and the MODIFY.
    planted = "trail/dt=2026-11-22/hour=09/p1795338000-" + f"{int(seqs(records)[0]):040d}" + "-a0.jsonl.gz"
    body = gzip.compress(b"{}\n" * 7)
    marker = marker_key(records[0], 0)
    plant(st, planted, body, {"marker": marker})
    plant(st, marker, json.dumps({
        "version": 2, "run": [[r["dynamodb"]["SequenceNumber"], r["eventID"]] for r in records],
        "objects": [{"key": planted, "events": list(range(7)), "sha256": hashlib.sha256(body).hexdigest()}],
        "writeBy": 0}).encode())
    # And the names attempt 1 would write the trail object under, for the next minute.
    now = time.time()
    squatted = {object_key("trail", now + i * LOCAL_DIGEST_PERIOD_SECONDS, seqs(records)[0], 1) for i in range(5)}
    for key in squatted:
        plant(st, key, gzip.compress(b'{"messageId":"plant-0","auditText":"forged"}\n'))

    since = len(emf_documents(st.log))
    failed = invoke(st, records)
    assert failed == seqs(records), "the squatted name fails the records; none is marked archived"
    assert invoke(st, records) == [], "the retry archives them under the next attempt number"

    assert trail(st, "trail/", "plant") == sorted(ids), "every INSERT once, nothing forged"
    assert trail(st, "tamper/", "plant") == ["plant-1"], "the MODIFY once"
    assert metric_sum(st, "TrailModified", since) == 1, "the planted marker did not hide it"
    assert metric_sum(st, "AlreadyArchived", since) == 1, "only the tamper object written by the first try"
    assert metric_sum(st, "ArchiveConflict", since) >= 2
    found = conflict_keys(st)
    assert planted in found, "the planted object is named"
    assert squatted & found, "the squatted name is named"


def test_a_write_that_lands_after_its_writeby_is_void_and_every_event_counts_once(stack):
    st = stack
    ids = put_items(st, "late", 5)
    records = stream_records(st, "late")
    # The first try's object PUT is held by the proxy past the marker's writeBy: the archiver gives
    # up on it after 15 s, and S3 gets it after LATE_S.
    st.targets.armed = True
    started = time.monotonic()
    assert invoke(st, records) == seqs(records)
    assert st.targets.held, "the PUT was held"
    late = urllib.parse.unquote(st.targets.held[0].split("?")[0].split("/", 2)[2])
    # Lambda retries: the archiver waits for the marker's writeBy, finds the object missing, makes
    # it void and archives the events anew.
    assert invoke(st, records) == []
    assert exists(st, f"state/void/{late}.json"), "void before the events were written again"
    void = json.loads(st.s3.get_object(Bucket=st.bucket, Key=f"state/void/{late}.json")["Body"].read())
    assert void["version"] == 1 and void["by"] == marker_key(records[0], 1)
    # The held write lands.
    while not exists(st, late):
        assert time.monotonic() - started < LATE_S + 60, "the held write never landed"
        time.sleep(0.5)
    raw = [k for k in keys(st, "trail/") if f"{int(seqs(records)[0]):040d}" in k]
    assert len(raw) == 2, "both objects exist: the late one holds the same events"
    assert trail(st, "trail/", "late") == sorted(ids), "each event counts once"


def test_the_second_half_after_a_first_half_given_up_finds_what_the_first_attempt_wrote(stack):
    st = stack
    ids = put_items(st, "half", 10)
    records = stream_records(st, "half")
    # The first attempt archives everything; Lambda never sees its answer and bisects. The first
    # half is given up (whatever happened to it); Lambda goes on at the record after it.
    invoke(st, records)
    written = keys(st, "trail/")
    since = len(emf_documents(st.log))
    assert invoke(st, records[5:]) == []
    assert keys(st, "trail/") == written, "nothing written again"
    assert metric_sum(st, "AlreadyArchived", since) == 5
    assert trail(st, "trail/", "half") == sorted(ids), "each event once"
    carried = json.loads(st.s3.get_object(Bucket=st.bucket, Key=marker_key(records[5], 0))["Body"].read())
    assert carried["version"] == 2 and all(o["sha256"] for o in carried["objects"])
