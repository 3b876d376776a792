"""Counting every AWS request each program of the local stack makes (`make cost-measure`).

Each program (the receiver, the SQS poller that stands for Lambda's event source mapping, the
archiver, the sealing runs, the stream poller, the witness, auditctl, the producer) is given an
endpoint of its own: a proxy in front of moto_server (or of the fault proxy) that forwards every
request unchanged and counts it by program, service and API:

* the service is the SigV4 credential scope's (``Credential=<key>/<date>/<region>/<service>/``);
* the API is the ``X-Amz-Target``'s operation (DynamoDB, DynamoDB Streams, SQS's JSON protocol,
  KMS), or the form's ``Action`` (SQS's query protocol, STS), or for S3 the method and the
  request's shape: ``GetObject``, ``HeadObject``, ``PutObject``, ``ListObjectsV2``,
  ``ListObjectVersions``, ``PutObjectRetention`` …, with the key's first path segment (``trail/``,
  ``state/`` …) so that what a request is for can be told apart.

Bytes sent are counted with each key (DynamoDB's write units follow the item's size).

    with Meter("http://127.0.0.1:5000") as meter:
        url = meter.endpoint("receiver")   # give the program this AWS_ENDPOINT_URL
        ...
        meter.counts()  # {"receiver": {"dynamodb PutItem": {"requests": 3, "bytes": 1234}}}
"""

from __future__ import annotations

import re
import threading
import urllib.parse
from collections import defaultdict

from local.faultproxy import FaultProxy

_SCOPE = re.compile(r"Credential=[^/,\s]+/\d{8}/[^/]+/([^/]+)/aws4_request")

# S3 sub-resources (query parameters) that name the API, checked in this order.
_S3_SUBRESOURCES = (
    ("versions", {"GET": "ListObjectVersions"}),
    ("list-type", {"GET": "ListObjectsV2"}),
    ("retention", {"GET": "GetObjectRetention", "PUT": "PutObjectRetention"}),
    ("legal-hold", {"GET": "GetObjectLegalHold", "PUT": "PutObjectLegalHold"}),
    ("tagging", {"GET": "GetObjectTagging", "PUT": "PutObjectTagging", "DELETE": "DeleteObjectTagging"}),
    ("object-lock", {"GET": "GetObjectLockConfiguration", "PUT": "PutObjectLockConfiguration"}),
    ("attributes", {"GET": "GetObjectAttributes"}),
    ("delete", {"POST": "DeleteObjects"}),
    ("uploads", {"POST": "CreateMultipartUpload", "GET": "ListMultipartUploads"}),
    ("uploadId", {"PUT": "UploadPart", "POST": "CompleteMultipartUpload", "DELETE": "AbortMultipartUpload"}),
)
_S3_OBJECT = {"GET": "GetObject", "HEAD": "HeadObject", "PUT": "PutObject", "DELETE": "DeleteObject"}
_S3_BUCKET = {"GET": "ListObjects", "HEAD": "HeadBucket", "PUT": "CreateBucket", "DELETE": "DeleteBucket"}


def service_of(headers) -> str:
    m = _SCOPE.search(headers.get("Authorization") or "")
    return m.group(1) if m else "unsigned"


def _s3_api(method: str, path: str, headers) -> str:
    split = urllib.parse.urlsplit(path)
    query = urllib.parse.parse_qs(split.query, keep_blank_values=True)
    parts = urllib.parse.unquote(split.path).lstrip("/").split("/", 1)
    key = parts[1] if len(parts) > 1 else ""
    shape = key.split("/", 1)[0] + "/" if "/" in key else ""
    if not key and "prefix" in query:
        prefix = query["prefix"][0]
        shape = prefix.split("/", 1)[0] + "/" if "/" in prefix else prefix
    for name, apis in _S3_SUBRESOURCES:
        if name in query and method in apis:
            api = apis[method]
            break
    else:
        if key:
            api = "CopyObject" if method == "PUT" and headers.get("x-amz-copy-source") else _S3_OBJECT.get(method, method)
        else:
            api = _S3_BUCKET.get(method, method)
    return f"{api} {shape}".rstrip()


def classify(method: str, path: str, headers, body: bytes, answer: bytes | None = None) -> str:
    """``"<service> <API>[ <key shape>]"`` for one request; an SQS receive that returned no
    message is ``"sqs ReceiveMessage empty"`` (polling, apart from the receives that carry events)."""
    service = service_of(headers)
    target = headers.get("X-Amz-Target")
    if target:
        api = f"{service} {target.rsplit('.', 1)[-1]}"
        if api == "sqs ReceiveMessage" and answer is not None and b'"Messages"' not in answer:
            api += " empty"
        return api
    if service == "s3":
        return f"s3 {_s3_api(method, path, headers)}"
    form = urllib.parse.parse_qs(body.decode("utf-8", "replace")) if body else {}
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query)
    action = (form.get("Action") or query.get("Action") or [None])[0]
    api = f"{service} {action or method}"
    if api == "sqs ReceiveMessage" and answer is not None and b"<Message>" not in answer:
        api += " empty"
    return api


class Meter:
    """One counting proxy per program, all counted in one table."""

    def __init__(self, upstream: str | None = None):
        self.upstream = upstream
        self._proxies: dict[str, FaultProxy] = {}
        self._counts: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
        self._lock = threading.Lock()

    def endpoint(self, program: str, upstream: str | None = None) -> str:
        """The endpoint to give ``program`` (one proxy per program, forwarding to ``upstream``)."""
        if program not in self._proxies:
            proxy = FaultProxy(upstream or self.upstream or "")
            proxy.enabled = False
            proxy.on_any = lambda method, path, headers, body, _status, answer, p=program: self.count(
                p, method, path, headers, body, answer)
            self._proxies[program] = proxy.start()
        return self._proxies[program].url

    def count(self, program: str, method: str, path: str, headers, body: bytes, answer: bytes | None = None) -> None:
        key = classify(method, path, headers, body, answer)
        with self._lock:
            cell = self._counts[program][key]
            cell[0] += 1
            cell[1] += len(body)

    def counts(self, reset: bool = False) -> dict[str, dict[str, dict[str, int]]]:
        """The counts so far by program and API; with ``reset``, counting starts again from zero."""
        with self._lock:
            out = {p: {k: {"requests": v[0], "bytes": v[1]} for k, v in sorted(c.items())}
                   for p, c in sorted(self._counts.items())}
            if reset:
                self._counts.clear()
        return out

    def stop(self) -> None:
        for proxy in self._proxies.values():
            proxy.stop()
        self._proxies.clear()

    def __enter__(self) -> "Meter":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
