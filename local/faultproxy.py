"""A fault-injecting HTTP proxy between the function and the local DynamoDB (moto_server).

The function is started with AWS_ENDPOINT_URL=<this proxy>; every request is forwarded to the
upstream endpoint, except that a request whose ``X-Amz-Target`` is one of the targeted
operations (default: ``DynamoDB_20120810.PutItem``) may, with the configured probabilities, get:

* ``error500``     — HTTP 500 ``InternalServerError``, not forwarded;
* ``throttle``     — HTTP 400 ``ProvisionedThroughputExceededException`` (or ``ThrottlingException``),
                     not forwarded;
* ``latency``      — a latency spike: held for ``latency_s`` seconds (uniform in the range),
                     then forwarded (the write may land after the caller gave up on it);
* ``drop_before``  — the connection is reset after the request was read, before it reaches
                     the store (nothing written);
* ``drop_after``   — the request is forwarded, the store writes and answers, and the connection
                     is reset instead of answering (the write happened, the answer is lost).

Counts of requests and of every fault injected are kept in ``stats``. The random generator
is seeded, so a run is repeatable for a given seed and request order.

    python -m local.faultproxy --upstream http://127.0.0.1:5000 --port 5001 --error500 0.05 ...
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import socket
import struct
import sys
import threading
import time
import urllib.parse
from collections import Counter
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FAULTS = ("error500", "throttle", "latency", "drop_before", "drop_after")
_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "trailer"}


@dataclass
class FaultConfig:
    error500: float = 0.0
    throttle: float = 0.0
    latency: float = 0.0
    drop_before: float = 0.0
    drop_after: float = 0.0
    latency_s: tuple[float, float] = (0.5, 2.0)
    targets: tuple[str, ...] = ("DynamoDB_20120810.PutItem",)
    seed: int = 1

    def total(self) -> float:
        return sum(getattr(self, f) for f in FAULTS)


@dataclass
class ProxyStats:
    requests: Counter = field(default_factory=Counter)  # by X-Amz-Target (or path)
    targeted: int = 0
    faults: Counter = field(default_factory=Counter)
    upstream_errors: int = 0

    def as_dict(self) -> dict:
        return {"requests": dict(self.requests), "targeted": self.targeted, "faults": dict(self.faults),
                "faults_total": sum(self.faults.values()), "upstream_errors": self.upstream_errors}


class FaultProxy:
    def __init__(self, upstream: str, config: FaultConfig | None = None, port: int = 0):
        u = urllib.parse.urlsplit(upstream)
        self.upstream_host, self.upstream_port = u.hostname, u.port or 80
        self.config = config or FaultConfig()
        self.stats = ProxyStats()
        self.enabled = True
        self.on_request = None  # hook(target) called for each targeted request, before faults
        # hook(method, path, headers, body, status, answer) for every request answered by the
        # upstream (local/meter.py)
        self.on_any = None
        self._rng = random.Random(self.config.seed)
        self._lock = threading.Lock()
        self._local = threading.local()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # no 40 ms delayed-ACK stall between header and body

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                proxy._handle(self)

            do_GET = do_PUT = do_DELETE = do_HEAD = do_POST

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.server.handle_error = lambda *a: None  # a peer going away is not news
        self.server.request_queue_size = 128
        self.port = self.server.server_address[1]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "FaultProxy":
        self._thread = threading.Thread(target=self.server.serve_forever, name="faultproxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # --------------------------------------------------------------------------------------
    def _choose(self) -> str | None:
        c = self.config
        with self._lock:
            r = self._rng.random()
            spike = self._rng.uniform(*c.latency_s)
        acc = 0.0
        for f in FAULTS:
            acc += getattr(c, f)
            if r < acc:
                return f"latency:{spike}" if f == "latency" else f
        return None

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        body = self._read_body(h)
        target = h.headers.get("X-Amz-Target") or h.path
        fault = None
        with self._lock:
            self.stats.requests[target] += 1
        if target in self.config.targets:
            with self._lock:
                self.stats.targeted += 1
            if self.on_request:
                self.on_request(target)
            if self.enabled:
                fault = self._choose()
        kind = fault.split(":")[0] if fault else None
        if kind:
            with self._lock:
                self.stats.faults[kind] += 1
        if kind == "error500":
            return self._reply(h, 500, {"__type": "com.amazonaws.dynamodb.v20120810#InternalServerError",
                                        "message": "Internal server error (injected)"})
        if kind == "throttle":
            with self._lock:
                ptee = self._rng.random() < 0.7
            t = ("com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException" if ptee
                 else "com.amazon.coral.availability#ThrottlingException")
            return self._reply(h, 400, {"__type": t, "message": "Rate of requests exceeds the allowed throughput (injected)"})
        if kind == "drop_before":
            return self._reset(h)
        if kind == "latency":
            time.sleep(float(fault.split(":")[1]))
        try:
            status, headers, data = self._forward(h, body)
        except Exception:  # noqa: BLE001 - upstream unreachable: answer like a broken gateway
            with self._lock:
                self.stats.upstream_errors += 1
            return self._reset(h)
        if self.on_any:
            self.on_any(h.command, h.path, h.headers, body, status, data)
        if kind == "drop_after":
            return self._reset(h)
        h.send_response_only(status)
        for k, v in headers:
            if k.lower() not in _HOP and k.lower() not in ("content-length", "server", "date"):
                h.send_header(k, v)
        # A HEAD's answer has no body and the length of the one a GET would have (S3's HeadObject).
        length = dict((k.lower(), v) for k, v in headers).get("content-length") if h.command == "HEAD" else None
        h.send_header("Content-Length", length or str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    @staticmethod
    def _read_body(h: BaseHTTPRequestHandler) -> bytes:
        if h.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                line = h.rfile.readline()
                n = int(line.split(b";")[0].strip(), 16)
                if n == 0:
                    while h.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return out
                out += h.rfile.read(n)
                h.rfile.readline()
        n = int(h.headers.get("Content-Length") or 0)
        return h.rfile.read(n) if n else b""

    def _forward(self, h: BaseHTTPRequestHandler, body: bytes):
        headers = {k: v for k, v in h.headers.items() if k.lower() not in _HOP and k.lower() != "host"}
        headers["Host"] = f"{self.upstream_host}:{self.upstream_port}"
        headers["Content-Length"] = str(len(body))
        for attempt in (1, 2):
            conn = getattr(self._local, "conn", None)
            if conn is None:
                conn = http.client.HTTPConnection(self.upstream_host, self.upstream_port, timeout=60)
                self._local.conn = conn
            try:
                conn.request(h.command, h.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                return resp.status, resp.getheaders(), data
            except (http.client.HTTPException, OSError):
                conn.close()
                self._local.conn = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    @staticmethod
    def _reply(h: BaseHTTPRequestHandler, status: int, doc: dict) -> None:
        data = json.dumps(doc).encode()
        h.send_response_only(status)
        h.send_header("Content-Type", "application/x-amz-json-1.0")
        h.send_header("x-amzn-RequestId", f"injected-{time.monotonic_ns()}")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    @staticmethod
    def _reset(h: BaseHTTPRequestHandler) -> None:
        """Close with RST: the client sees a connection reset / closed before an answer."""
        h.close_connection = True
        try:
            h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            h.connection.close()
        except OSError:
            pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--port", type=int, default=0)
    for f in FAULTS:
        ap.add_argument(f"--{f.replace('_', '-')}", type=float, default=0.0, metavar="P")
    ap.add_argument("--latency-s", type=float, nargs=2, default=(0.5, 2.0))
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    cfg = FaultConfig(**{f: getattr(a, f) for f in FAULTS}, latency_s=tuple(a.latency_s), seed=a.seed)
    p = FaultProxy(a.upstream, cfg, a.port).start()
    print(f"fault proxy on {p.url} -> {a.upstream}: {asdict(cfg)}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        p.stop()
        print(json.dumps(p.stats.as_dict()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
