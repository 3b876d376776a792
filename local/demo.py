"""`make demo`: the whole system on this machine, end to end, with no AWS account.

Starts moto_server on 127.0.0.1, creates the table and both queues from template.yaml, runs the
function under `cargo lambda watch`, sends a realistic mix of audit messages through the queue
(valid ones, a producer retry, poison, and later a conflicting payload), drains it with the local
SQS trigger (Lambda's event source mapping, emulated), lets the table throttle for a while so that
some records reach their last receive, and prints what happened: the trail in time order
(`auditctl query`) and by actor (`auditctl query --actor`), the dead-letter queue with each
message's reason (`auditctl dlq list`), a `auditctl dlq redrive --reason throttled` that lands
the throttled ones in the table once, and the access events auditctl recorded of itself on the
same queue (`auditctl query --action auditctl.query`); then the archive: every item archived once
and locked, every period sealed into a signed, chained digest and `auditctl verify --table`
passing; an item changed behind the function's back, caught as a tamper record and by `auditctl
verify` as `item changed`, and one foreign item put in the table (a real item's fields under a new
messageId) reported as `item not attested` (exit 1); last, one event proven (`auditctl prove`), its proof checked
offline with the local witness's cosignature (`auditctl check-proof --public-key --witness-key`),
and refused once one byte of its line is changed. Stops everything it started, also on Ctrl-C.

The valid messages are structured events (actor, action, resource, outcome, some with a
sourceIp) that also carry auditText and extra fields.

    python -m local.demo [--messages N] [--faults] [--serve] [--ui]

With --ui the stack stays up after the demo: it writes .local/stack.env and prints the command
that opens the viewer (`auditctl ui`) on the demo's data, until Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

from local import procs
from local.faultproxy import FaultConfig
from local.harness import POISON_KINDS, LocalSystem, Producer, batch_totals, verify

ROOT = Path(__file__).resolve().parent.parent
DEMO_VISIBILITY_TIMEOUT = 2
DEMO_ARCHIVE_BATCHING_WINDOW = 2  # the archiver's window, a minute in the template
# Who did what, to what (docs/events.md "The native body"): the demo's producers send structured
# events.
ACTORS = ["alice@example.com", "bob@example.com", "arn:aws:iam::123456789012:role/billing-service"]
LOOKUP_ACTOR = ACTORS[0]
ACTIONS = {  # the end of the harness's auditText -> (action, resource kind)
    "user signed in": ("user.login", "user"),
    "invoice approved": ("invoice.approve", "invoice"),
    "role granted": ("role.grant", "role"),
    "record exported": ("record.export", "record"),
    "password reset": ("password.reset", "user"),
}
# Some in a non-canonical text form: the table holds the canonical one (2001:db8::1).
SOURCE_IPS = [None, "203.0.113.7", "198.51.100.23", "2001:DB8::1", "2001:0db8:0000::42"]
# The access events auditctl sends of itself (docs/auditctl.md "Access to the trail is itself
# recorded").
ACCESS_PREFIX = "auditctl."


def out(text: str = "") -> None:
    print(text, flush=True)


def _sigterm(*_):
    raise KeyboardInterrupt


class Ticker:
    """Prints how long a slow step has taken, and the last line of its log, every 20 s."""

    def __init__(self, what: str, log: Path):
        self.what, self.log = what, log
        self.stop = threading.Event()
        self.t0 = time.monotonic()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while not self.stop.wait(20):
            last = ""
            try:
                lines = [ln.strip() for ln in self.log.read_text(errors="replace").splitlines() if ln.strip()]
                last = lines[-1][:90] if lines else ""
            except OSError:
                pass
            out(f"    … {self.what}, {time.monotonic() - self.t0:.0f} s so far   {last}")

    def done(self):
        self.stop.set()
        return time.monotonic() - self.t0


def plain(v):
    """DynamoDB values (numbers as Decimal) back to plain JSON for display."""
    from decimal import Decimal

    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    return v


def structured(items: list[tuple[str, object]], seed: int) -> list[tuple[str, object]]:
    """The valid messages as structured events: actor, action, resource, outcome and (often) a
    sourceIp put in front of each body's own fields, the rest byte for byte (exact numbers kept).
    The same logical message (a producer retry) gets the same fields; poison stays as it is."""
    r = random.Random(seed)
    done: dict[int, str] = {}
    out = []
    for text, what in items:
        if isinstance(what, str) or not text.startswith("{"):
            out.append((text, what))
            continue
        if id(what) not in done:
            action, kind = next((v for k, v in ACTIONS.items() if what.text.endswith(k)), ("badge.scan", "door"))
            fields = {"actor": r.choice(ACTORS), "action": action, "resource": f"{kind}/{r.randrange(1000, 9999)}",
                      "outcome": "failure" if r.random() < 0.15 else "success"}
            ip = r.choice(SOURCE_IPS)
            if ip:
                fields["sourceIp"] = ip
            head = ",".join(json.dumps(k) + ":" + json.dumps(v) for k, v in fields.items())
            done[id(what)] = "{" + head + "," + text[1:]
            what.body = done[id(what)]
        out.append((done[id(what)], what))
    return out


def utc_now() -> str:
    """Now, in the trail's canonical form (milliseconds, Z)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def short(sqs_id: str) -> str:
    return sqs_id[:8]


def clip(text: str, n: int) -> str:
    text = text.replace("\n", "\\n")
    return text if len(text) <= n else text[: n - 1] + "…"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=40, help="valid audit messages to send (default 40)")
    ap.add_argument("--faults", action="store_true",
                    help="put the fault proxy to work (HTTP 500, throttling, latency, dropped connections)")
    ap.add_argument("--serve", action="store_true",
                    help="start the stack and the function, print how to reach them, and wait for Ctrl-C")
    ap.add_argument("--ui", action="store_true",
                    help="after the demo keep the stack up and print the command that opens the viewer on its data")
    ap.add_argument("--work-dir", default=str(ROOT / ".local" / "demo"), help="logs go here")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, _sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C, even if started with INT ignored
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    for f in ("function.log", "trigger.log", "moto.log", "archiver.log", "streams.log"):
        (work / f).unlink(missing_ok=True)

    faults = FaultConfig(error500=0.05, throttle=0.05, latency=0.03, drop_before=0.03, drop_after=0.03,
                         latency_s=(0.3, 1.0), seed=11) if args.faults else None
    system = LocalSystem(work, visibility_timeout=DEMO_VISIBILITY_TIMEOUT, faults=faults, archiver=True,
                         archive_batching_window=DEMO_ARCHIVE_BATCHING_WINDOW)
    st = system.stack
    src, dlq = st.source_queue, st.dead_letter_queue
    out("audit-receiver, locally: SQS -> Lambda -> DynamoDB, all on 127.0.0.1")
    out("")
    out("From template.yaml:")
    out(f"  table        {st.table_name}  (key messageId + auditTime, TTL on {st.table_ttl_attribute})")
    out(f"  queue        {src.name}  (visibility timeout {st.scaled['VisibilityTimeout']['template']} s in the "
        f"template, {src.visibility_timeout} s here so that retries take seconds)")
    out(f"  dead letters {dlq.name}  (after {src.max_receive_count} receives)")
    out(f"  trigger      batches of up to {st.esm.batch_size}, batching window {st.esm.batching_window_s:g} s, "
        f"partial batch responses {'on' if st.esm.report_batch_item_failures else 'off'}")
    out(f"  function     timeout {st.function.timeout_s} s, env "
        + ", ".join(f"{k}={v}" for k, v in st.function.environment.items()))
    out("")
    try:
        out("Starting moto_server, the stack and the function (cargo lambda watch).")
        out("  The first run compiles the function: that takes a few minutes.")
        ticker = Ticker("starting the function", work / "function.log")
        try:
            system.start()
        finally:
            took = ticker.done()
        out(f"  up in {took:.0f} s: AWS endpoint {system.endpoint}, function on {system.function.url}")
        out("")
        if args.serve:
            return serve(system)
        code = run_demo(system, args.messages, faults is not None)
        return browse(system, code) if args.ui else code
    except KeyboardInterrupt:
        out("\nInterrupted: stopping everything that was started.")
        return 130
    finally:
        system.stop()
        procs.stop_all()
        out(f"Stopped moto_server, the function and the trigger. Logs: {os.path.relpath(work, Path.cwd())}/")


def serve(system: LocalSystem) -> int:
    out("The trigger is polling the queue. Send audit messages with, for example:")
    out(f"  AWS_ENDPOINT_URL={system.endpoint} AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test "
        f"AWS_DEFAULT_REGION=us-east-1 \\")
    out(f"    .venv/bin/python -c \"import boto3; boto3.client('sqs').send_message(QueueUrl='{system.queue_url}', "
        f"MessageBody='{{\\\"auditText\\\": \\\"hello\\\"}}')\"")
    out(f"Table {system.stack.table_name} and the queues are on {system.endpoint}. Ctrl-C stops everything.")
    while True:
        time.sleep(3600)


# The viewer on the demo's data: the command `--ui` prints (docs/ui.md).
VIEWER_COMMAND = "set -a; . .local/stack.env; set +a; target/debug/auditctl ui"


def browse(system: LocalSystem, code: int) -> int:
    """Keeps the stack up after the demo for the viewer, until Ctrl-C; returns the demo's code."""
    system.write_stack_env(ROOT / ".local" / "stack.env")
    out("")
    out("The viewer on this trail (the stack stays up until Ctrl-C), in another shell:")
    out(f"  {VIEWER_COMMAND}")
    out("It prints a URL with a one-time token: open it in a browser.")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return code


def run_demo(system: LocalSystem, n_valid: int, with_faults: bool) -> int:
    t0 = time.monotonic()
    auditctl = build_auditctl(system)
    producer = Producer(system, seed=2026, poison_share=0.0, retry_share=0.0, run_id="demo")
    items = structured(producer.make(n_valid), seed=2026)
    # One producer retry: the same body (same producer messageId) sent again as a new message.
    retry = next(((b, e) for b, e in items if not isinstance(e, str) and e.producer_id), None)
    if retry:
        items.insert(len(items) // 2, retry)
        producer.ledger.producer_retries += 1
    # One message of each poison kind.
    for i, kind in enumerate(sorted(POISON_KINDS)):
        items.insert((i * 7) % len(items), (POISON_KINDS[kind][1](producer.r, i), kind))
    producer.send(items)
    valid = len(producer.ledger.valid)
    out(f"Sent {len(items)} messages, in no particular time order: {valid} valid audit messages, 1 producer "
        f"retry (same messageId, new SQS message), {len(POISON_KINDS)} poison messages.")
    if with_faults:
        out("The fault proxy between the function and DynamoDB injects HTTP 500, throttling, latency "
            "spikes and dropped connections.")
    drain(system, "Draining the queue")

    # A conflict: a stored messageId sent again with a different payload.
    producer.send_conflicts(producer.ledger.valid, 1)
    out("Sent 1 more: a stored messageId with a different auditText (a conflict, never overwritten).")
    drain(system, "Draining again")

    # Transient failures: the table throttles every write for a while. The records come back until
    # their last receive (maxReceiveCount), when the function dead-letters them with the reason.
    saved = (system.proxy.config, system.proxy.enabled)
    system.proxy.config, system.proxy.enabled = FaultConfig(throttle=1.0, seed=3), True
    throttled_producer = Producer(system, seed=77, poison_share=0.0, retry_share=0.0, run_id="throttled")
    throttled_producer.send(structured(throttled_producer.make(3), seed=77))
    out(f"Sent 3 more while the table throttles every write: they come back {system.stack.source_queue.max_receive_count}"
        " times, then the function dead-letters them with their reason.")
    drain(system, "Throttled")
    system.proxy.config, system.proxy.enabled = saved
    elapsed = time.monotonic() - t0

    log = system.work_dir / "function.log"
    totals = batch_totals(log)
    items_in_table = system.scan_table()
    out("")
    out("=" * 78)
    out("What happened")
    out("=" * 78)
    out(f"  function invocations      {system.trigger.stats.invocations:>5}   "
        f"(records seen {totals['batch_size']}, retries included)")
    out(f"  items written             {len(items_in_table):>5}   (one per valid audit message)")
    out(f"  duplicates absorbed       {totals['duplicates']:>5}   (the producer retry"
        + (", and writes whose answer was lost" if with_faults else "") + ")")
    out(f"  dead-lettered             {totals['dead_lettered']:>5}   (poison at its first receive, "
        "throttled ones at their last, each with its reason)")
    out(f"  reported failed, retried  {totals['failed']:>5}   (transient failures before the last receive)")
    if with_faults:
        f = system.proxy.stats.as_dict()
        out(f"  faults injected           {f['faults_total']:>5}   {json.dumps(f['faults'])}")
    out("")
    out("The trail in time order (auditctl query, from the byAuditTime index):")
    times = sorted(it["auditTime"] for it in items_in_table)
    access_from = utc_now()  # each auditctl command from here on records its own access first
    run_auditctl(auditctl, system, ["query", "--from", times[0], "--to", times[-1], "--limit", "12"])
    out("")
    out(f"What {LOOKUP_ACTOR} did (auditctl query --actor, from the byActor lookup index):")
    run_auditctl(auditctl, system, ["query", "--actor", LOOKUP_ACTOR, "--from", times[0], "--to", times[-1],
                                    "--limit", "8"])
    out("")
    out("The dead-letter queue, reasons read from each message (auditctl dlq list):")
    run_auditctl(auditctl, system, ["dlq", "list"])
    out("")
    out("The table is back: redrive the throttled ones (auditctl dlq redrive --reason throttled).")
    run_auditctl(auditctl, system, ["dlq", "redrive", "--reason", "throttled"])
    drain(system, "Redriven")
    drain_access(system)
    out("")
    out("Access to the trail is itself recorded: each auditctl command above first sent an audit event of its")
    out("own to the access queue, which the function wrote once its claimed caller matched the sender SQS")
    out("attests (drained above). The demo's queries:")
    run_auditctl(auditctl, system, ["query", "--action", "auditctl.query", "--from", access_from, "--to", utc_now()])
    drain(system, "Recording that access too")
    drain_access(system)
    access_ok = check_access_events(system)
    ledger = producer.ledger
    first_valid = len({e.key for e in ledger.valid})
    ledger.valid += throttled_producer.ledger.valid
    # Written by the redrive's delivery: its sqsMessageId is the redriven message's new id.
    system.redriven_keys |= {e.key for e in throttled_producer.ledger.valid}
    ledger.sent += throttled_producer.ledger.sent
    verdict = verify(system, ledger)
    # The access events are items no producer sent: checked above, not counted as the producers'.
    access_ids = {it["messageId"] for it in system.scan_table() if is_access_event(it)}
    verdict.unexpected_items = [k for k in verdict.unexpected_items if k not in access_ids]
    verdict.items_in_table -= len(access_ids)
    for e in throttled_producer.ledger.valid:
        got = [it for it in system.scan_table() if it["messageId"] == e.key]
        out(f"  {clip(e.key, 40):<40} {len(got)} item, auditTime {got[0]['auditTime'] if got else '-'}")
    out("")
    lost, dup = len(verdict.lost), len(verdict.duplicated)
    ok = verdict.ok and access_ok
    out(f"{'OK' if ok else 'PROBLEM'}: {verdict.valid_expected} valid messages ({first_valid} at first, "
        f"{verdict.valid_expected - first_valid} redriven) -> {verdict.items_in_table} items "
        f"(lost {lost}, duplicated {dup}; the {len(access_ids)} access events apart); {verdict.poison_expected} bad messages -> dead-letter queue "
        f"({verdict.dlq_count} there, each with its reason, {len(verdict.valid_in_dlq)} valid among them). "
        f"{elapsed:.0f} s.")
    if not ok:
        out(json.dumps(verdict.summary()))
    ok = archive_demo(system, auditctl) and ok  # the archive part, below
    out("")
    out("To look at this trail in a browser: make demo DEMO_ARGS=--ui keeps the stack up after the demo and "
        f"prints the command that opens the viewer ({VIEWER_COMMAND}).")
    return 0 if ok else 1


# ==== The archive (docs/archive.md) ===================================================================
# The table's stream -> local stream trigger -> audit-archiver -> the Object Lock bucket; a change
# behind the function's back -> a tamper record and TrailModified; the named queries in DuckDB.
# Kept in one place, called once at the end of run_demo.

def archive_demo(system: LocalSystem, auditctl: Path | None = None) -> bool:
    import io

    from local import sql
    from local.harness import _client, emf_documents, verify_archive

    out("")
    out("=" * 78)
    out("The archive: the table's stream -> audit-archiver -> S3 under Object Lock")
    out("=" * 78)
    bucket = system.stack.archive_bucket.name
    if not system.wait_archived(300):
        from local.harness import log_events

        errors = [e for e in log_events(system.work_dir / "archiver.log") if e.get("level") in ("WARN", "ERROR")]
        out(f"PROBLEM: the archiver did not catch up with the stream ({system.streams.stats.as_dict()}); "
            f"its last complaint: {errors[-1].get('error') or errors[-1].get('message') if errors else '-'}; "
            f"see {system.work_dir}/archiver.log and streams.log")
        return False
    objects = system.archive_objects("trail/")
    out(f"s3://{bucket}/trail/ holds {len(objects)} objects (gzip JSON lines, one item a line), "
        f"{sum(len(o.get('lines', [])) for o in objects)} events:")
    for o in sorted(objects, key=lambda o: o["Key"])[:6]:
        out(f"  {o['Key']}  {o['Size']:>6} bytes  {len(o.get('lines', [])):>3} events")
    if len(objects) > 6:
        out(f"  … and {len(objects) - 6} more")
    archive = verify_archive(system)
    access = sum(1 for it in system.scan_table() if is_access_event(it))
    out(f"{'OK' if archive.ok else 'PROBLEM'}: {archive.items_in_table} items in the table "
        f"({archive.items_in_table - access} the producers', {access} access events of auditctl), each archived "
        f"exactly once as stored (missing {len(archive.missing)}, doubled {len(archive.doubled)}, "
        f"changed {len(archive.changed)}, not in the table {len(archive.unexpected)}).")
    if not archive.ok:
        out(json.dumps(archive.summary()))

    # Locked: nobody deletes or overwrites an archived version.
    s3 = _client("s3", system.endpoint)
    first = sorted(objects, key=lambda o: o["Key"])[0]
    for what, attempt in (
            ("delete that version", lambda: s3.delete_object(Bucket=bucket, Key=first["Key"],
                                                             VersionId=first["VersionId"])),
            ("overwrite it (If-None-Match: *)", lambda: s3.put_object(Bucket=bucket, Key=first["Key"],
                                                                     Body=b"forged", IfNoneMatch="*"))):
        try:
            attempt()
            out(f"  PROBLEM: could {what}")
            archive.overwritten.append(first["Key"])
        except Exception as e:  # noqa: BLE001 - the refusal is the point
            out(f"  try to {what}: refused ({getattr(e, 'response', {}).get('Error', {}).get('Code', e)})")
    head = s3.head_object(Bucket=bucket, Key=first["Key"])
    out(f"  lock: {head.get('ObjectLockMode')} until {head.get('ObjectLockRetainUntilDate'):%Y-%m-%d} "
        f"(ArchiveRetentionDays={system.stack.parameters['ArchiveRetentionDays']})")

    # Proving the trail: the periods sealed, signed and chained; auditctl verify checks it all.
    items = sorted(system.scan_table(), key=lambda it: it["auditTime"])
    verify_args = ["verify", "--from", items[0]["auditTime"], "--to", utc_now(), "--table"]
    proved = auditctl is None or prove(system, auditctl, verify_args, expect_exit=0)

    # Tampering: another client changes a stored item behind the function's back.
    victim = items[0]
    out("")
    out(f"Someone with UpdateItem rewrites an item behind the function's back: {victim['messageId']} "
        f"@ {victim['auditTime']}, auditText -> \"nothing happened\"")
    _client("dynamodb", system.endpoint).update_item(
        TableName=system.stack.table_name,
        Key={"messageId": {"S": victim["messageId"]}, "auditTime": {"S": victim["auditTime"]}},
        UpdateExpression="SET auditText = :t", ExpressionAttributeValues={":t": {"S": "nothing happened"}})
    # A foreign item: a real item's fields (its attestation among them) copied under a new
    # messageId and put straight into the table, as anyone with PutItem could.
    ddb = _client("dynamodb", system.endpoint)
    model = items[1]
    foreign_id = f"foreign-{model['messageId']}"
    real = ddb.get_item(TableName=system.stack.table_name, Key={
        "messageId": {"S": model["messageId"]}, "auditTime": {"S": model["auditTime"]}})["Item"]
    ddb.put_item(TableName=system.stack.table_name, Item={**real, "messageId": {"S": foreign_id}})
    out(f"Someone with PutItem adds an item behind the function's back: {foreign_id} @ {model['auditTime']}, "
        f"every field (its attestation too) copied from {model['messageId']}. The archiver archives it as any "
        f"INSERT; only the receiver's attestation (AuditAttestationKey) tells it apart.")
    tamper: list[dict] = []
    end = time.monotonic() + 60
    while time.monotonic() < end and not tamper:
        system.wait_archived(30)
        tamper = system.archive_objects("tamper/")
        if not tamper:
            time.sleep(0.5)
    for o in tamper:
        out(f"  s3://{bucket}/{o['Key']}  {len(o.get('lines', []))} tamper record(s):")
        for line in o.get("lines", []):
            out(f"    {clip(json.dumps(plain(line), ensure_ascii=False), 300)}")
    docs = emf_documents(system.work_dir / "archiver.log")
    modified = sum(int(d.get("TrailModified", 0)) for d in docs)
    archived = sum(int(d.get("Archived", 0)) for d in docs)
    out(f"  archiver metrics (EMF, namespace AuditArchiver): Archived {archived}, TrailModified {modified}"
        f" -> TrailModifiedAlarm (TrailModified >= 1 in a minute) {'fires' if modified >= 1 else 'stays quiet'}")
    original = next((ln for o in objects for ln in o.get("lines", [])
                     if (ln.get("messageId"), ln.get("auditTime")) == (victim["messageId"], victim["auditTime"])), {})
    out(f"  the archived original still reads: {clip(str(original.get('auditText', '-')), 60)!r}")
    if auditctl is not None:
        out("  and auditctl verify --table, over the same range, finds both: the changed item, and the foreign "
            "one, whose attestation does not cover it:")
        caught = prove(system, auditctl, verify_args, expect_exit=1,
                       expect=[("item changed", victim["messageId"]), ("item not attested", foreign_id)])
        proved = proved and caught

    # SQL over the archive: the template's named queries, here in DuckDB.
    out("")
    out("SQL over the archive (make sql): sql/actions_per_day.sql, the Athena named query, in DuckDB:")
    sql.pull(sql.ARCHIVE_DIR, system.endpoint, bucket)
    header, rows = sql.run("actions", sql.connect(sql.ARCHIVE_DIR),
                           sql.parameters("actions", None, sql.EARLIEST, sql.LATEST, None))
    buf = io.StringIO()
    sql.print_table(header, rows[:10], out=buf)
    for line in buf.getvalue().rstrip().splitlines():
        out(f"  {line}")
    ok = archive.ok and bool(tamper) and modified >= 1 and proved
    out(f"{'OK' if ok else 'PROBLEM'}: every item archived once and locked; every period sealed, signed and "
        f"chained, and auditctl verify passed; the change behind the function's back is in the archive's "
        f"tamper/, counted in TrailModified, and reported by auditctl verify as `item changed`; the item put "
        f"behind the function is reported as `item not attested`.")
    if auditctl is not None:
        ok = proof_demo(system, auditctl, items[len(items) // 2]) and ok
    return ok


# How long the demo waits for the local witness to cosign the checkpoint a proof names: the seal
# schedule runs every few seconds and the witness after each run.
COSIGN_DEADLINE_SECONDS = 120


def proof_demo(system: LocalSystem, auditctl: Path, item: dict) -> bool:
    """One event proven (`auditctl prove`), the proof checked offline with the witness's
    cosignature (`auditctl check-proof`), then refused once one byte of its line is changed."""
    from local.harness import _client

    out("")
    out("=" * 78)
    out("Proof of one event: the transparency log, checked offline, cosigned by a witness")
    out("=" * 78)
    bucket, vkey = system.stack.archive_bucket.name, system.witness_key
    if not vkey:
        out("PROBLEM: the local stack runs no witness (WITNESS_KEY is not set)")
        return False
    name, key_id = vkey.split("+")[0], vkey.split("+")[1]
    out(f"The local witness {name} (key {key_id}) checks each new checkpoint after each seal run and cosigns it "
        f"(its runs: {os.path.relpath(system.work_dir / 'witness.log', Path.cwd())}).")
    work = system.work_dir
    proof_path = work / "proof.json"
    s3 = _client("s3", system.endpoint)
    deadline = time.monotonic() + COSIGN_DEADLINE_SECONDS
    proof: dict = {}
    waited: set[str] = set()
    while True:
        # The proof carries its checkpoint with the cosignatures stored so far: prove again once
        # the witness has cosigned the checkpoint the proof names.
        code, text = run_auditctl(auditctl, system, ["prove", item["messageId"], "--audit-time", item["auditTime"],
                                                      "--witness-key", vkey],
                                  check=False, show=False)
        if code != 0:
            out(f"PROBLEM: auditctl prove {item['messageId']} exited {code}")
            return False
        proof = json.loads(text)
        if f"\u2014 {name} " in proof["checkpoint"]:
            break
        cosignature = f"log/cosignatures/{proof['treeSize']:020}/{key_id}"
        if cosignature in waited:
            out(f"PROBLEM: {cosignature} is stored but the proof's checkpoint does not carry it")
            return False
        waited.add(cosignature)
        while time.monotonic() < deadline and not s3.list_objects_v2(Bucket=bucket, Prefix=cosignature).get("KeyCount"):
            time.sleep(0.5)
        if time.monotonic() >= deadline:
            out(f"PROBLEM: the witness did not cosign the checkpoint of size {proof['treeSize']} within "
                f"{COSIGN_DEADLINE_SECONDS} s; see {work}/witness.log")
            return False
    proof_path.write_text(json.dumps(proof, indent=2) + "\n")
    out(f"  $ auditctl prove {item['messageId']} --audit-time {item['auditTime']} --witness-key \"$WITNESS_KEY\" "
        "> proof.json")
    out(f"    leaf {proof['leafIndex']} of a tree of {proof['treeSize']}, {len(proof['inclusionPath'])} hashes on its "
        f"path, its checkpoint signed by the log and cosigned by the witness")
    # The log's public key, as an auditor keeps it: `auditctl key --pem` (KMS GetPublicKey, as PEM).
    _, key_pem = run_auditctl(auditctl, system, ["key", "--pem"], show=False)
    pem = work / "digest-key.pem"
    pem.write_text(key_pem)
    out("  $ auditctl key --pem > digest-key.pem")
    rel = lambda path: os.path.relpath(path, Path.cwd())  # noqa: E731 - as a reader would type it
    check = ["check-proof", rel(proof_path), "--public-key", rel(pem), "--origin", f"audit-receiver/{bucket}",
             "--witness-key", vkey]
    out("Checked offline (no AWS access), with the log's public key and the witness's:")
    good, _ = run_auditctl(auditctl, system, check, check=False)
    # One byte of the line changed: the leaf no longer leads to the signed root.
    line = proof["line"]
    at = line.find('"auditText":"') + len('"auditText":"') if '"auditText":"' in line else len(line) // 2
    changed = dict(proof, line=line[:at] + ("X" if line[at] != "X" else "Y") + line[at + 1:])
    changed_path = work / "proof-changed.json"
    changed_path.write_text(json.dumps(changed, indent=2) + "\n")
    out(f"One byte of the proof's line changed ({line[at:at + 12]!r} -> {changed['line'][at:at + 12]!r}):")
    bad, _ = run_auditctl(auditctl, system, [check[0], rel(changed_path), *check[2:]], check=False)
    ok = good == 0 and bad == 1
    out(f"{'OK' if ok else 'PROBLEM'}: check-proof {'accepts' if good == 0 else f'exited {good} on'} the proof "
        f"with the witness's cosignature and {'refuses' if bad == 1 else f'exited {bad} on'} the changed one.")
    return ok


def prove(system: LocalSystem, auditctl: Path, args: list[str], expect_exit: int,
          expect: list[tuple[str, str]] | None = None) -> bool:
    """Waits until every period written so far is sealed (the local schedule seals a period 30 s
    after it ends), then runs `auditctl verify`; True when it exits as expected and, if given,
    prints each problem of `expect` (kind, messageId)."""
    out("")
    out(f"Proving the trail: every {system.digest_period} s period gets a digest listing its archive objects "
        f"(version, SHA-256, events), chained to the previous one and signed with the stack's KMS key "
        f"(AuditDigestKey). Waiting for the periods so far to be sealed …")
    if not system.wait_archived(120) or not system.wait_sealed(time.time(), 180):
        out("PROBLEM: the periods were not sealed in time; see schedule.log and archiver.log in "
            f"{system.work_dir}")
        return False
    code, text = run_auditctl(auditctl, system, args, check=False)
    problems = [line.split("  ")[:2] for line in text.splitlines() if "  " in line and not line.startswith(" ")]
    found = expect is None or all(list(e) in problems for e in expect)
    good = code == expect_exit and found
    reports = " and ".join(f"{kind} for {subject}" for kind, subject in expect or [])
    what = "passes (exit 0)" if expect_exit == 0 else f"reports {reports} (exit 1)" if expect else "fails"
    out(f"  {'OK' if good else 'PROBLEM'}: auditctl verify {what if good else f'exited {code}'}")
    return good


def is_access_event(item: dict) -> bool:
    return str(item.get("action", "")).startswith(ACCESS_PREFIX)


def check_access_events(system: LocalSystem) -> bool:
    """The table holds one access event per auditctl command the demo ran (query, query --actor,
    dlq list, dlq redrive, query --action), each naming the caller and what it read: the reads by
    the demo's caller, the redrive by the operator role's session it ran as."""
    events = [it for it in system.scan_table() if is_access_event(it)]
    got = Counter(it["action"] for it in events)
    want = Counter({"auditctl.query": 3, "auditctl.dlq.list": 1, "auditctl.dlq.redrive": 1})
    readers = sorted({it.get("actor", "-") for it in events if it["action"] != "auditctl.dlq.redrive"})
    operators = sorted({it.get("actor", "-") for it in events if it["action"] == "auditctl.dlq.redrive"})
    table, dlq = system.stack.table_name, system.dlq_url
    resources_ok = all(it.get("resource") == (table if it["action"] == "auditctl.query" else dlq) for it in events)
    actors_ok = len(readers) == 1 and len(operators) == 1 and "operator" in operators[0]
    ok = got == want and actors_ok and resources_ok and all(it.get("outcome") == "success" for it in events)
    out(f"  {'OK' if ok else 'PROBLEM'}: {len(events)} access events in the trail "
        f"({', '.join(f'{a} {n}' for a, n in sorted(got.items()))}), the reads by {', '.join(readers)}, "
        f"the redrive by {', '.join(operators)}")
    return ok


def build_auditctl(system: LocalSystem) -> Path:
    """The operator's CLI, built in the same debug build the function uses."""
    env = dict(os.environ, CARGO_TERM_COLOR="never")
    subprocess.run(["cargo", "build", "--quiet", "--bin", "auditctl"], cwd=ROOT, env=env, check=True)
    return ROOT / "target" / "debug" / "auditctl"


def run_auditctl(binary: Path, system: LocalSystem, args: list[str], check: bool = True,
                 show: bool = True) -> tuple[int, str]:
    stack = system.stack_env()
    env = procs.function_env({}, system.endpoint, {
        "TABLE_NAME": system.stack.table_name,
        "AUDIT_QUEUE_URL": system.queue_url,
        "ACCESS_QUEUE_URL": system.access_queue_url,
        "DEAD_LETTER_QUEUE_URL": system.dlq_url,
        **{k: stack[k] for k in ("ARCHIVE_BUCKET", "DIGEST_KEY_ID", "ATTESTATION_KEY_ID", "DIGEST_PERIOD_SECONDS")},
    })
    if args[:2] == ["dlq", "redrive"]:
        # As the operator role: the function takes a redriven failureContext only from it.
        env.update(system.operator_credentials())
    result = subprocess.run([str(binary), *args], env=env, capture_output=True, text=True, timeout=300)
    if show:
        out(f"  $ auditctl {' '.join(args)}")
        for line in (result.stdout + result.stderr).rstrip().splitlines():
            out(f"    {line}")
    elif result.returncode != 0:
        out(f"  $ auditctl {' '.join(args)}: {result.stderr.strip()}")
    if check and result.returncode != 0:
        raise RuntimeError(f"auditctl {' '.join(args)} exited with {result.returncode}")
    return result.returncode, result.stdout


def drain(system: LocalSystem, what: str) -> None:
    shown = [0.0]
    t0 = time.monotonic()

    def progress(depth):
        if time.monotonic() - shown[0] >= 3:
            shown[0] = time.monotonic()
            waiting = depth["ApproximateNumberOfMessages"]
            in_flight = depth["ApproximateNumberOfMessagesNotVisible"]
            dlq = system.depth(system.dlq_url)["ApproximateNumberOfMessages"]
            out(f"  {what} ({time.monotonic() - t0:>3.0f} s): {waiting:>3} waiting, {in_flight:>3} in flight or "
                f"waiting to be retried, {dlq:>2} in the dead-letter queue")

    if not system.wait_drained(600, progress=progress):
        raise RuntimeError(f"the queue did not drain: {system.depth()}")


def drain_access(system: LocalSystem) -> None:
    """Until the access queue (auditctl's records of its own access) is empty and written."""
    if not system.wait_access_drained(120):
        raise RuntimeError(f"the access queue did not drain: {system.depth(system.access_queue_url)}")


if __name__ == "__main__":
    sys.exit(main())
