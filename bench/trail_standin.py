"""auditctl query at 100,000 items and more, against a DynamoDB stand-in: rows per second, peak
RSS, requests against the minimum.

moto answers each Query on the byAuditTime index by scanning the whole table (about 4 s a Query
at 100,000 items), so bench/trail.py stops at 10,000. This script serves the index itself: a
small HTTP server (stdlib ThreadingHTTPServer on 127.0.0.1, a free port, its own process) that
speaks just enough of the DynamoDB JSON protocol for `auditctl query`:

  DescribeTable  the table's key schema (messageId HASH, auditTime RANGE) and the GSI byAuditTime
                 (auditBucket HASH, auditTime RANGE, Projection ALL, ACTIVE);
  Query          on IndexName byAuditTime, `#b = :b AND #t BETWEEN :from AND :to`: the items of
                 that bucket, synthesised deterministically, honouring the bounds,
                 ScanIndexForward, Limit and ExclusiveStartKey. As DynamoDB does, a page that
                 reaches Limit carries a LastEvaluatedKey (messageId, auditTime, auditBucket of
                 its last item) even when nothing is left, so a shard holding a multiple of the
                 page size costs one extra, empty page.

With --lookup the items also carry the structured fields the function writes (all N of one
actor, `bench-actor`; actions, resources, outcomes and addresses varied; the lookup keys
`<value>#<shard>`, shard = FNV-1a 32 of the messageId mod 4), and it serves a lookup as well:

  DescribeTable  also lists byActor, byAction and byResource (<field>Key HASH, auditTime RANGE,
                 Projection INCLUDE actor, action, resource, outcome, sourceIp);
  Query          on IndexName byActor, `#k = :k AND #t BETWEEN :from AND :to` with :k
                 `bench-actor#<shard>`: the index items (keys and projected fields) of that shard
                 in auditTime order, paged as above (LastEvaluatedKey: messageId, auditTime,
                 actorKey);
  BatchGetItem   at most 100 keys (messageId, auditTime) of the table, no duplicates: the full
                 items (Responses), never UnprocessedKeys.

and each size and page size is then read twice over the same items: `auditctl query` (the time
index) and `auditctl query --actor bench-actor` (the lookup), one table row each. A FilterExpression
is refused (the stand-in does not evaluate one).

It counts requests by operation. Signatures (SigV4) are not checked; there is no network latency
(loopback); items are synthetic. The N items are spread evenly over the UTC days and the 32
shards (`YYYY-MM-DD#NN`) of each day, sorted by auditTime within a shard, every shard of a day on
the same time grid (equal times across shards) and every tenth item repeating the time before it
(equal times within a shard, served in no particular messageId order, as DynamoDB may).

Usage (the script builds nothing):

    cargo build --release --bin auditctl
    python3 bench/trail_standin.py [--sizes 10000,100000] [--page-size 100[,1000]]
    python3 bench/trail_standin.py --lookup --span-days 1,30 --sizes 100000 --page-size 100,1000

For each size and page size it starts a fresh stand-in and runs

    target/release/auditctl query --from D0T00:00:00Z --to D1T23:59:59.999Z --format jsonl
        --page-size P --concurrency 8 --stats --endpoint-url http://127.0.0.1:PORT
        --table AuditMessages

(AWS_REGION=us-east-1, AWS_ACCESS_KEY_ID=test, AWS_SECRET_ACCESS_KEY=test) with stdout piped to a
checker in this process: the row count must equal N, rows must be strictly increasing in
(auditTime, messageId), and each row's auditTime and auditBucket must be the ones served for its
messageId (so the rows are exactly the N items); up to --full-check items every row is also
parsed and compared attribute by attribute. A lookup's rows are checked the same way (they are the
full items, read with BatchGetItem). Peak RSS is auditctl's own (wait4 ru_maxrss); CPU
seconds are given for auditctl, the stand-in and the checker, which share the machine's cores.
Prints one Markdown table row per run. Only Python's standard library is needed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from bisect import bisect_right
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARDS = 32
TABLE = "AuditMessages"
INDEX = "byAuditTime"
DAY_MS = 86_400_000
MASK = (1 << 64) - 1
MIX = 0x9E3779B97F4A7C15  # odd: i -> i * MIX mod 2^64 is a bijection, so messageIds are unique
UNMIX = pow(MIX, -1, 1 << 64)
SOURCE = "arn:aws:sqs:us-east-1:123456789012:AuditQueue"
ACTOR = "bench-actor"
LOOKUP_SHARDS = 4
LOOKUP_INDEXES = {"byActor": "actorKey", "byAction": "actionKey", "byResource": "resourceKey"}
PROJECTED = ("actor", "action", "resource", "outcome", "sourceIp")
BATCH_GET_KEYS = 100


def fnv1a_32(data: bytes) -> int:
    """The function's shard hash (FNV-1a 32: offset basis 2166136261, prime 16777619)."""
    h = 2166136261
    for b in data:
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


# ---------------------------------------------------------------------------------------------
# The data: N items over days x 32 shards, item i <-> messageId "m-<hex(i * MIX)>".


class Data:
    def __init__(self, items: int, days: list[str], structured: bool = False):
        self.items = items
        self.days = days
        self.structured = structured
        cells = len(days) * SHARDS
        # cell c = day * 32 + shard holds counts[c] items, global indexes base[c] .. base[c+1]-1
        self.counts = [items // cells + (1 if c < items % cells else 0) for c in range(cells)]
        self.base = [0]
        for n in self.counts:
            self.base.append(self.base[-1] + n)
        self.cell_of_bucket = {f"{d}#{s:02d}": i * SHARDS + s for i, d in enumerate(days) for s in range(SHARDS)}

    def bucket(self, cell: int) -> str:
        return f"{self.days[cell // SHARDS]}#{cell % SHARDS:02d}"

    def time(self, cell: int, k: int) -> str:
        """auditTime of item k of a cell: non-decreasing in k; every tenth repeats the one before."""
        n = self.counts[cell]
        if k % 10 == 9:
            k -= 1
        ms = k * DAY_MS // n
        return (f"{self.days[cell // SHARDS]}T{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:"
                f"{ms // 1000 % 60:02d}.{ms % 1000:03d}Z")

    @staticmethod
    def message_id(i: int) -> str:
        return f"m-{(i * MIX) & MASK:016x}"

    def locate(self, message_id: str) -> tuple[int, int] | None:
        """(cell, k) of a messageId served, or None."""
        try:
            i = (int(message_id[2:], 16) * UNMIX) & MASK
        except ValueError:
            return None
        if not message_id.startswith("m-") or i >= self.items:
            return None
        cell = bisect_right(self.base, i) - 1
        return cell, i - self.base[cell]

    @staticmethod
    def structured_fields(i: int) -> dict:
        """actor, action, resource, outcome, sourceIp of item i (all of one actor)."""
        return {
            "actor": ACTOR,
            "action": ("invoice.view", "invoice.update", "invoice.delete", "invoice.export")[i % 4],
            "resource": f"invoice/{i % 997}",
            "outcome": ("success", "failure", "unknown")[i % 3],
            "sourceIp": f"192.0.2.{i % 250}",
        }

    def lookup_shard(self, i: int) -> int:
        return fnv1a_32(self.message_id(i).encode()) % LOOKUP_SHARDS

    def fields(self, cell: int, k: int) -> dict:
        """The attributes the function writes, as plain values (numbers as their digits)."""
        i = self.base[cell] + k
        t = self.time(cell, k)
        structured = {}
        if self.structured:
            structured = self.structured_fields(i)
            shard = self.lookup_shard(i)
            structured.update({f"{name}Key": f"{structured[name]}#{shard}" for name in ("actor", "action", "resource")})
        return structured | {
            "messageId": self.message_id(i),
            "auditTime": t,
            "auditBucket": self.bucket(cell),
            "auditText": f"user u{i % 1000:03d} did action {i:08d} on resource r{i % 97:02d} of t{i % 7}",
            "sqsMessageId": f"sqs-{i:012d}",
            "sentAt": t,
            "receivedAt": t,
            "eventSource": SOURCE,
            "receiveCount": str(1 + i % 3),
            "extra": {"amount": f"{i % 10000}.50", "actor": f"u{i % 1000:03d}"},
        }

    # The wire form, by string formatting (json.dumps per item would make the stand-in the
    # bottleneck): none of the values needs escaping.
    WIRE = ('{"messageId":{"S":"%s"},"auditTime":{"S":"%s"},"auditBucket":{"S":"%s"},'
            '"auditText":{"S":"%s"},"sqsMessageId":{"S":"%s"},"sentAt":{"S":"%s"},'
            '"receivedAt":{"S":"%s"},"eventSource":{"S":"%s"},"receiveCount":{"N":"%s"},'
            '"extra":{"M":{"amount":{"N":"%s"},"actor":{"S":"%s"}}}}')

    STRUCTURED = (',"actor":{"S":"%s"},"action":{"S":"%s"},"resource":{"S":"%s"},"outcome":{"S":"%s"},'
                  '"sourceIp":{"S":"%s"},"actorKey":{"S":"%s"},"actionKey":{"S":"%s"},"resourceKey":{"S":"%s"}')

    def wire(self, cell: int, k: int) -> str:
        f = self.fields(cell, k)
        text = self.WIRE % (f["messageId"], f["auditTime"], f["auditBucket"], f["auditText"],
                            f["sqsMessageId"], f["sentAt"], f["receivedAt"], f["eventSource"],
                            f["receiveCount"], f["extra"]["amount"], f["extra"]["actor"])
        if not self.structured:
            return text
        return text[:-1] + self.STRUCTURED % (f["actor"], f["action"], f["resource"], f["outcome"], f["sourceIp"],
                                              f["actorKey"], f["actionKey"], f["resourceKey"]) + "}"

    def index_wire(self, i: int, time: str) -> str:
        """Item i as byActor holds it: the keys and the projected fields."""
        f = self.structured_fields(i)
        return ('{"messageId":{"S":"%s"},"auditTime":{"S":"%s"},"actorKey":{"S":"%s#%d"}'
                % (self.message_id(i), time, ACTOR, self.lookup_shard(i))
                + "".join(',"%s":{"S":"%s"}' % (name, f[name]) for name in PROJECTED) + "}")

    def first_at_or_after(self, cell: int, t: str) -> int:
        lo, hi = 0, self.counts[cell]
        while lo < hi:
            mid = (lo + hi) // 2
            if self.time(cell, mid) < t:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def first_after(self, cell: int, t: str) -> int:
        lo, hi = 0, self.counts[cell]
        while lo < hi:
            mid = (lo + hi) // 2
            if self.time(cell, mid) <= t:
                lo = mid + 1
            else:
                hi = mid
        return lo


class LookupShards:
    """byActor: for each of the 4 shards of `bench-actor`, its items' (auditTime, i) in time order
    (equal times in the order of i, which is not messageId order), and where each item is."""

    def __init__(self, data: Data):
        self.shards: list[list[tuple[str, int]]] = [[] for _ in range(LOOKUP_SHARDS)]
        for cell in range(len(data.counts)):
            for k in range(data.counts[cell]):
                i = data.base[cell] + k
                self.shards[data.lookup_shard(i)].append((data.time(cell, k), i))
        for shard in self.shards:
            shard.sort()
        self.position = {i: (s, p) for s, shard in enumerate(self.shards) for p, (_, i) in enumerate(shard)}


def minimum_lookup_requests(data: Data, page_size: int) -> int:
    """One DescribeTable, per shard of the actor n // P + 1 Queries, ceil(N / 100) BatchGetItem."""
    counts = [0] * LOOKUP_SHARDS
    for i in range(data.items):
        counts[data.lookup_shard(i)] += 1
    return 1 + sum(n // page_size + 1 for n in counts) + -(-data.items // BATCH_GET_KEYS)


def minimum_requests(data: Data, page_size: int) -> tuple[int, int]:
    """(minimum, empty pages in it): one DescribeTable, then per shard of each day n // P + 1
    Queries (a full last page still carries a LastEvaluatedKey: one empty page more when n is a
    multiple of P, one Query for an empty shard)."""
    queries = sum(n // page_size + 1 for n in data.counts)
    empty = sum(1 for n in data.counts if n % page_size == 0 and n > 0)
    return 1 + queries, empty


# ---------------------------------------------------------------------------------------------
# The stand-in server (run as `trail_standin.py serve ...`, in its own process).

CONDITION = re.compile(r"^\s*(#?\w+)\s*=\s*(:\w+)\s+AND\s+(#?\w+)\s+BETWEEN\s+(:\w+)\s+AND\s+(:\w+)\s*$", re.I)


class ClientError(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def _keeps_every_lookup_item(body: dict) -> bool:
    """A lookup's filter on its own value (`#f_actor = :f_actor`, `bench-actor`), which every item
    of the byActor index here passes: the one FilterExpression the stand-in takes."""
    names = body.get("ExpressionAttributeNames", {})
    values = body.get("ExpressionAttributeValues", {})
    return (body.get("IndexName") == "byActor" and body.get("FilterExpression") == "#f_actor = :f_actor"
            and names.get("#f_actor") == "actor" and values.get(":f_actor", {}).get("S") == ACTOR)


def serve(data: Data) -> None:
    counts: dict[str, int] = {}
    lock = threading.Lock()

    def describe_table(body: dict) -> str:
        if body.get("TableName") != TABLE:
            raise ClientError("ResourceNotFoundException", f"Requested resource not found: Table: {body.get('TableName')} not found")
        key = lambda h, r: [{"AttributeName": h, "KeyType": "HASH"}, {"AttributeName": r, "KeyType": "RANGE"}]  # noqa: E731
        return json.dumps({"Table": {
            "TableName": TABLE,
            "TableArn": f"arn:aws:dynamodb:us-east-1:123456789012:table/{TABLE}",
            "TableStatus": "ACTIVE",
            "CreationDateTime": 1795000000.0,
            "ItemCount": data.items,
            "AttributeDefinitions": [{"AttributeName": a, "AttributeType": "S"}
                                     for a in ("messageId", "auditTime", "auditBucket")],
            "KeySchema": key("messageId", "auditTime"),
            "BillingModeSummary": {"BillingMode": "PAY_PER_REQUEST"},
            "GlobalSecondaryIndexes": [{
                "IndexName": INDEX,
                "IndexArn": f"arn:aws:dynamodb:us-east-1:123456789012:table/{TABLE}/index/{INDEX}",
                "KeySchema": key("auditBucket", "auditTime"),
                "Projection": {"ProjectionType": "ALL"},
                "IndexStatus": "ACTIVE",
                "ItemCount": data.items,
            }] + [{
                "IndexName": name,
                "IndexArn": f"arn:aws:dynamodb:us-east-1:123456789012:table/{TABLE}/index/{name}",
                "KeySchema": key(attribute, "auditTime"),
                "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": list(PROJECTED)},
                "IndexStatus": "ACTIVE",
                "ItemCount": data.items if name == "byActor" else 0,
            } for name, attribute in LOOKUP_INDEXES.items() if data.structured],
        }})

    lookup = LookupShards(data) if data.structured else None

    def query(body: dict) -> str:
        if body.get("TableName") != TABLE:
            raise ClientError("ResourceNotFoundException", "Requested resource not found")
        if "FilterExpression" in body and not _keeps_every_lookup_item(body):
            raise ClientError("ValidationException", "the stand-in does not evaluate a FilterExpression")
        if body.get("IndexName") == "byActor" and lookup is not None:
            return query_lookup(body)
        if body.get("IndexName") != INDEX:
            raise ClientError("ValidationException", f"the stand-in serves only IndexName {INDEX} (and byActor with --lookup)")
        m = CONDITION.match(body.get("KeyConditionExpression", ""))
        if not m:
            raise ClientError("ValidationException", "the stand-in understands only `#b = :b AND #t BETWEEN :from AND :to`")
        names = body.get("ExpressionAttributeNames", {})
        values = body.get("ExpressionAttributeValues", {})
        name = lambda n: names.get(n, n)  # noqa: E731
        value = lambda v: values[v]["S"]  # noqa: E731
        if (name(m[1]), name(m[3])) != ("auditBucket", "auditTime"):
            raise ClientError("ValidationException", "Query key condition not supported")
        bucket, low, high = value(m[2]), value(m[4]), value(m[5])
        limit = int(body.get("Limit", 1 << 30))
        forward = body.get("ScanIndexForward", True)
        cell = data.cell_of_bucket.get(bucket)
        if cell is None or low > high:
            return '{"Count":0,"ScannedCount":0,"Items":[]}'
        first, end = data.first_at_or_after(cell, low), data.first_after(cell, high)  # [first, end)
        start = body.get("ExclusiveStartKey")
        if start:
            where = data.locate(start.get("messageId", {}).get("S", ""))
            if where is None or where[0] != cell or start.get("auditBucket", {}).get("S") != bucket \
                    or start.get("auditTime", {}).get("S") != data.time(*where):
                raise ClientError("ValidationException", "The provided starting key is invalid")
            k = where[1]
            first, end = (max(first, k + 1), end) if forward else (first, min(end, k))
        ks = range(first, min(end, first + limit)) if forward else range(end - 1, max(first, end - limit) - 1, -1)
        page = ",".join(data.wire(cell, k) for k in ks)
        out = f'{{"Count":{len(ks)},"ScannedCount":{len(ks)},"Items":[{page}]'
        if len(ks) == limit:  # DynamoDB: Limit reached -> LastEvaluatedKey, even if none is left
            last = ks[-1]
            i = data.base[cell] + last
            out += (f',"LastEvaluatedKey":{{"messageId":{{"S":"{data.message_id(i)}"}},'
                    f'"auditTime":{{"S":"{data.time(cell, last)}"}},"auditBucket":{{"S":"{bucket}"}}}}')
        return out + "}"

    def query_lookup(body: dict) -> str:
        m = CONDITION.match(body.get("KeyConditionExpression", ""))
        if not m:
            raise ClientError("ValidationException", "the stand-in understands only `#k = :k AND #t BETWEEN :from AND :to`")
        names = body.get("ExpressionAttributeNames", {})
        values = body.get("ExpressionAttributeValues", {})
        name = lambda n: names.get(n, n)  # noqa: E731
        value = lambda v: values[v]["S"]  # noqa: E731
        if (name(m[1]), name(m[3])) != ("actorKey", "auditTime"):
            raise ClientError("ValidationException", "Query key condition not supported")
        key, low, high = value(m[2]), value(m[4]), value(m[5])
        limit = int(body.get("Limit", 1 << 30))
        forward = body.get("ScanIndexForward", True)
        actor, _, shard = key.rpartition("#")
        if actor != ACTOR or shard not in {str(s) for s in range(LOOKUP_SHARDS)} or low > high:
            return '{"Count":0,"ScannedCount":0,"Items":[]}'
        rows = lookup.shards[int(shard)]
        first = bisect_right(rows, (low, -1))  # the first with time >= low
        end = bisect_right(rows, (high, 1 << 62))  # past the last with time <= high
        start = body.get("ExclusiveStartKey")
        if start:
            where = data.locate(start.get("messageId", {}).get("S", ""))
            at = lookup.position.get(where and data.base[where[0]] + where[1])
            if at is None or at[0] != int(shard) or start.get("actorKey", {}).get("S") != key \
                    or start.get("auditTime", {}).get("S") != rows[at[1]][0]:
                raise ClientError("ValidationException", "The provided starting key is invalid")
            first, end = (max(first, at[1] + 1), end) if forward else (first, min(end, at[1]))
        ps = range(first, min(end, first + limit)) if forward else range(end - 1, max(first, end - limit) - 1, -1)
        page = ",".join(data.index_wire(rows[p][1], rows[p][0]) for p in ps)
        out = f'{{"Count":{len(ps)},"ScannedCount":{len(ps)},"Items":[{page}]'
        if len(ps) == limit:
            t, i = rows[ps[-1]]
            out += (f',"LastEvaluatedKey":{{"messageId":{{"S":"{data.message_id(i)}"}},'
                    f'"auditTime":{{"S":"{t}"}},"actorKey":{{"S":"{key}"}}}}')
        return out + "}"

    def batch_get_item(body: dict) -> str:
        tables = body.get("RequestItems", {})
        if list(tables) != [TABLE]:
            raise ClientError("ResourceNotFoundException", "Requested resource not found")
        keys = tables[TABLE].get("Keys", [])
        if not 0 < len(keys) <= BATCH_GET_KEYS:
            raise ClientError("ValidationException", f"Too many items requested for the BatchGetItem call ({len(keys)})")
        seen, items = set(), []
        for k in keys:
            message_id, time = k["messageId"]["S"], k["auditTime"]["S"]
            if message_id in seen:
                raise ClientError("ValidationException", "Provided list of item keys contains duplicates")
            seen.add(message_id)
            where = data.locate(message_id)
            if where is not None and data.time(*where) == time:
                items.append(data.wire(*where))
        return f'{{"Responses":{{"{TABLE}":[{",".join(items)}]}},"UnprocessedKeys":{{}}}}'

    operations = {"DescribeTable": describe_table, "Query": query, "BatchGetItem": batch_get_item}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as with DynamoDB
        # Headers and body are two writes: without TCP_NODELAY, Nagle's algorithm holds the body
        # back until the client's delayed ACK (40 ms a response).
        disable_nagle_algorithm = True

        def log_message(self, *args) -> None:
            pass

        def reply(self, status: int, text: str, content_type: str = "application/x-amz-json-1.0") -> None:
            payload = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("x-amzn-RequestId", "standin")
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:
            if self.path == "/__stats":
                with lock:
                    self.reply(200, json.dumps(counts), "application/json")
            else:
                self.reply(404, "{}", "application/json")

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            target = self.headers.get("X-Amz-Target", "")
            operation = target.removeprefix("DynamoDB_20120810.")
            with lock:
                counts[operation] = counts.get(operation, 0) + 1
            try:
                handler = operations.get(operation)
                if handler is None:
                    raise ClientError("UnknownOperationException", f"the stand-in does not serve {target}")
                self.reply(200, handler(json.loads(body)))
            except ClientError as e:
                with lock:
                    counts["errors"] = counts.get("errors", 0) + 1
                self.reply(400, json.dumps({"__type": f"com.amazonaws.dynamodb.v20120810#{e.kind}", "message": str(e)}))
            except Exception as e:  # a bug of the stand-in: a 500 the run will report
                with lock:
                    counts["errors"] = counts.get("errors", 0) + 1
                self.reply(500, json.dumps({"__type": "com.amazonaws.dynamodb.v20120810#InternalServerError", "message": repr(e)}))

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 64

    server = Server(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


# ---------------------------------------------------------------------------------------------
# The bench.


class StandIn:
    """The stand-in in a process of its own (its own session, ended with killpg)."""

    def __init__(self, items: int, days: list[str], structured: bool = False):
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "serve", "--items", str(items), "--days", ",".join(days)]
            + (["--structured"] if structured else []),
            stdout=subprocess.PIPE, start_new_session=True)
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"the stand-in did not start (exit {self.proc.wait()})")
        self.port = int(line)
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def counts(self) -> dict[str, int]:
        with urllib.request.urlopen(f"{self.endpoint}/__stats", timeout=30) as r:
            return json.loads(r.read())

    def cpu(self) -> float:
        """Its CPU seconds so far (from /proc; Linux)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> float:
        """Ends the stand-in; its CPU seconds."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _, _, usage = os.wait4(self.proc.pid, 0)
        self.proc.returncode = -9
        self.proc.stdout.close()
        return usage.ru_utime + usage.ru_stime


def check_rows(stream, data: Data, full: bool) -> dict:
    """Reads auditctl's jsonl: count, strict (auditTime, messageId) order, each row one of the
    items served (auditTime and auditBucket as served for its messageId); with `full`, every
    attribute compared."""
    rows = 0
    previous = ("", "")
    error = None
    for line in stream:
        rows += 1
        if error:
            continue  # keep reading: auditctl must not see a broken pipe
        try:
            if full:
                row = json.loads(line, parse_float=str, parse_int=str)
                key = (row["auditTime"], row["messageId"])
                where = data.locate(key[1])
                if where is None or row != data.fields(*where):
                    error = f"row {rows}: not an item served: {line[:300]!r}"
            else:
                a = line.index(b'"auditTime":"') + 13
                m = line.index(b'"messageId":"') + 13
                b = line.index(b'"auditBucket":"') + 15
                key = (line[a:a + 24].decode(), line[m:m + 18].decode())
                where = data.locate(key[1])
                if where is None or key[0] != data.time(*where) \
                        or line[b:b + 13].decode() != data.bucket(where[0]):
                    error = f"row {rows}: not an item served: {line[:300]!r}"
            if not error and key <= previous:
                error = f"row {rows}: {key} not after {previous}"
            previous = key
        except (ValueError, KeyError) as e:
            error = f"row {rows}: unreadable ({e}): {line[:300]!r}"
    return {"rows": rows, "error": error}


def run(binary: Path, size: int, page_size: int, days: list[str], concurrency: int, full_check: int,
        lookup: bool = False, structured: bool = False, standin: "StandIn | None" = None) -> dict:
    """One auditctl query (with `lookup`, --actor bench-actor) over the stand-in's items. A
    stand-in given is reused (and left running: its counts are read as a difference)."""
    data = Data(size, days, structured)
    own = standin is None
    if own:
        standin = StandIn(size, days, structured)
    before = {} if own else standin.counts()
    standin_cpu_before = 0.0 if own else standin.cpu()
    try:
        env = dict(os.environ, AWS_REGION="us-east-1", AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test")
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "TABLE_NAME"):
            env.pop(name, None)
        args = [str(binary), "query", "--from", f"{days[0]}T00:00:00Z", "--to", f"{days[-1]}T23:59:59.999Z",
                "--format", "jsonl", "--page-size", str(page_size), "--concurrency", str(concurrency),
                "--stats", "--endpoint-url", standin.endpoint, "--table", TABLE, "--no-audit-event"]
        if lookup:
            args += ["--actor", ACTOR]
        cpu_before = os.times()
        started = time.monotonic()
        proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=1 << 20)
        stderr: list[bytes] = []
        reader = threading.Thread(target=lambda: stderr.append(proc.stderr.read()))
        reader.start()
        checked = check_rows(proc.stdout, data, full=size <= full_check)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - started
        cpu_after = os.times()
        proc.returncode = os.waitstatus_to_exitcode(status)
        reader.join()
        proc.stdout.close()
        proc.stderr.close()
        stats = stderr[0].decode().strip()
        after = standin.counts()
        counts = {k: v - before.get(k, 0) for k, v in after.items()}
    finally:
        standin_cpu = standin.stop() if own else standin.cpu() - standin_cpu_before
    if proc.returncode != 0:
        raise SystemExit(f"auditctl failed ({proc.returncode}): {stats}; stand-in counts {counts}")
    if checked["error"] or checked["rows"] != size or counts.get("errors"):
        raise SystemExit(f"wrong output at {size} items, page size {page_size}: {checked}; "
                         f"stand-in counts {counts}; auditctl: {stats}")
    # "<rows> rows, <requests> requests, <read> items read, <s> s, <r> rows/s"
    parts = stats.splitlines()[-1].split(", ")
    minimum, empty = minimum_requests(data, page_size)
    if lookup:
        minimum, empty = minimum_lookup_requests(data, page_size), 0
    return {
        "size": size, "page_size": page_size, "days": len(days), "wall": wall,
        "rows_s_wall": size / wall, "rows_s_stats": float(parts[4].split()[0]),
        "rss_mib": usage.ru_maxrss / 1024, "auditctl_cpu": usage.ru_utime + usage.ru_stime,
        "standin_cpu": standin_cpu,
        "checker_cpu": (cpu_after.user - cpu_before.user) + (cpu_after.system - cpu_before.system),
        "describe": counts.get("DescribeTable", 0), "queries": counts.get("Query", 0),
        "batch_gets": counts.get("BatchGetItem", 0), "lookup": lookup,
        "auditctl_requests": int(parts[1].split()[0]), "minimum": minimum, "empty": empty,
        "check": "every attribute" if size <= full_check else "count, order, key per id",
        "stats": stats,
    }


HEADER = ("| items | page size | rows/s (wall) | rows/s (`--stats`) | wall | peak RSS | "
          "requests (1 DescribeTable + Queries) | minimum | CPU s: auditctl / stand-in / checker | checked |\n"
          "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")


def markdown_row(r: dict) -> str:
    requests = r["describe"] + r["queries"]
    return (f"| {r['size']:,} | {r['page_size']:,} | {r['rows_s_wall']:,.0f} | {r['rows_s_stats']:,.0f} | "
            f"{r['wall']:.2f} s | {r['rss_mib']:.1f} MiB | {requests:,} | {r['minimum']:,} | "
            f"{r['auditctl_cpu']:.2f} / {r['standin_cpu']:.2f} / {r['checker_cpu']:.2f} | {r['check']} |")


LOOKUP_HEADER = ("| query | days | items | page size | rows/s (wall) | rows/s (`--stats`) | wall | peak RSS | "
                 "requests: DescribeTable + Query + BatchGetItem | minimum | CPU s: auditctl / stand-in / checker | checked |\n"
                 "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")


def lookup_row(r: dict) -> str:
    requests = r["describe"] + r["queries"] + r["batch_gets"]
    what = f"lookup `--actor {ACTOR}`" if r["lookup"] else "time query"
    return (f"| {what} | {r['days']} | {r['size']:,} | {r['page_size']:,} | {r['rows_s_wall']:,.0f} | "
            f"{r['rows_s_stats']:,.0f} | {r['wall']:.2f} s | {r['rss_mib']:.1f} MiB | "
            f"{requests:,}: {r['describe']} + {r['queries']:,} + {r['batch_gets']:,} | {r['minimum']:,} | "
            f"{r['auditctl_cpu']:.2f} / {r['standin_cpu']:.2f} / {r['checker_cpu']:.2f} | {r['check']} |")


def days_from(first: str, span: int) -> list[str]:
    import datetime
    start = datetime.date.fromisoformat(first)
    return [(start + datetime.timedelta(days=d)).isoformat() for d in range(span)]


def main_lookup(args, binary: Path, sizes: list[int], pages: list[int]) -> int:
    spans = [int(d) for d in args.span_days.split(",")]
    print(f"auditctl query (release) against the stand-in, items with the structured fields, all of one "
          f"actor; the time query and the lookup read the same items; --format jsonl piped to the checker, "
          f"--concurrency {args.concurrency}; {platform.machine()}, {os.cpu_count()} cores shared by auditctl, "
          f"the stand-in and the checker.\n", flush=True)
    print(LOOKUP_HEADER, flush=True)
    for span in spans:
        days = days_from(args.first_day, span)
        for size in sizes:
            standin = StandIn(size, days, structured=True)
            try:
                for page_size in pages:
                    for lookup in (False, True):
                        r = run(binary, size, page_size, days, args.concurrency, args.full_check,
                                lookup=lookup, structured=True, standin=standin)
                        requests = r["describe"] + r["queries"] + r["batch_gets"]
                        if r["auditctl_requests"] != requests:
                            print(f"<!-- auditctl counted {r['auditctl_requests']} requests, the stand-in "
                                  f"{requests} (SDK retries?) -->", flush=True)
                        print(lookup_row(r), flush=True)
                        print(f"# {span} days, {size} items, page size {page_size}, "
                              f"{'lookup' if lookup else 'time'}: {r['stats']}", file=sys.stderr, flush=True)
            finally:
                standin.stop()
    print(f"\nCommand: `python3 bench/trail_standin.py --lookup --span-days {args.span_days} --sizes {args.sizes} "
          f"--page-size {args.page_size}`.")
    return 0


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        sp = argparse.ArgumentParser(prog="trail_standin.py serve")
        sp.add_argument("--items", type=int, required=True)
        sp.add_argument("--days", required=True)
        sp.add_argument("--structured", action="store_true")
        a = sp.parse_args(sys.argv[2:])
        serve(Data(a.items, a.days.split(","), a.structured))
        return 0

    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Build auditctl first: cargo build --release --bin auditctl (at the workspace root).")
    ap.add_argument("--sizes", default="10000,100000", help="items in the range, comma-separated (default 10000,100000)")
    ap.add_argument("--page-size", default="100", help="--page-size of auditctl, comma-separated (default 100)")
    ap.add_argument("--concurrency", type=int, default=8, help="--concurrency of auditctl (default 8)")
    ap.add_argument("--days", default="2026-11-22,2026-11-23", help="the UTC days of the range (default two)")
    ap.add_argument("--full-check", type=int, default=10000,
                    help="compare every attribute of every row up to this many items (default 10000)")
    ap.add_argument("--binary", default=str(ROOT / "target/release/auditctl"))
    ap.add_argument("--lookup", action="store_true",
                    help="items of one actor with the structured fields; a time query and a lookup over them")
    ap.add_argument("--span-days", default="1,30",
                    help="with --lookup: the ranges, in UTC days from --first-day, comma-separated (default 1,30)")
    ap.add_argument("--first-day", default="2026-11-01", help="with --lookup: the first day (default 2026-11-01)")
    args = ap.parse_args()
    binary = Path(args.binary)
    if not binary.exists():
        raise SystemExit(f"{binary} missing: run `cargo build --release --bin auditctl` first")
    days = args.days.split(",")
    sizes = [int(s) for s in args.sizes.split(",")]
    pages = [int(p) for p in args.page_size.split(",")]
    if args.lookup:
        return main_lookup(args, binary, sizes, pages)

    print(f"auditctl query (release) against the stand-in, {len(days)} UTC days, --format jsonl piped to "
          f"the checker, --concurrency {args.concurrency}; {platform.machine()}, {os.cpu_count()} cores "
          f"shared by auditctl, the stand-in and the checker.\n", flush=True)
    print(HEADER, flush=True)
    for size in sizes:
        for page_size in pages:
            r = run(binary, size, page_size, days, args.concurrency, args.full_check)
            if r["auditctl_requests"] != r["describe"] + r["queries"]:
                print(f"<!-- auditctl counted {r['auditctl_requests']} requests, the stand-in "
                      f"{r['describe'] + r['queries']} (SDK retries?) -->", flush=True)
            if r["empty"]:
                print(f"<!-- the minimum includes {r['empty']} empty last pages (shards holding a "
                      f"multiple of {page_size} items) -->", flush=True)
            print(markdown_row(r), flush=True)
            print(f"# {size} items, page size {page_size}: {r['stats']}", file=sys.stderr, flush=True)
    print(f"\nCommand: `python3 bench/trail_standin.py --sizes {args.sizes} --page-size {args.page_size}"
          f"{'' if args.concurrency == 8 else f' --concurrency {args.concurrency}'}`.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
