"""`auditctl ui` against whoever can write to the table, write under `log/cosignatures/`, or run
another server on 127.0.0.1 (docs/ui.md "What the viewer proves, and whom it answers"), on the
template's stack on moto, over HTTP as a browser speaks it:

- an archived, sealed event whose table item's `actor` is changed with UpdateItem: its page shows
  the archived line's actor and says NOT PROVEN, naming `actor`;
- a junk cosignature planted under `log/cosignatures/` naming the witness whose key the viewer
  was given: neither the event's page nor the health page counts it, both label it unverified;
- the session cookie replayed without the run's secret in the path (what a server at another
  port of 127.0.0.1 receives from the browser) is refused; verify, dead-letter bodies and a
  redrive asked for with a GET, or POSTed from another or no Origin, run nothing."""

import base64
import http.client
import json
import subprocess
import urllib.parse
from datetime import datetime, timezone

import pytest

import test_ui_browser
from iam_support import Account, binary, seal, sealable_object, sealable_start
from test_iam_auditctl import _bucket
from test_ui_browser import _canonical

WITNESS = "witness.test/ui"


class Viewer(test_ui_browser.Viewer):
    """`auditctl ui` with `args`, as the administrator; its printed URL split into address and
    the run's secret; opened (the cookie it sets)."""

    def __init__(self, account: Account, args: tuple[str, ...]):
        super().__init__(account, account.admin, "attacks", args)
        url = urllib.parse.urlparse(self.url)
        self.address = url.netloc
        self.secret = url.path.rstrip("/")
        self.origin = f"http://{self.address}"
        status, headers, _ = self.send("GET", f"{url.path}?{url.query}")
        assert status == 303, status
        self.cookie = headers["set-cookie"].split(";")[0]

    def send(self, method: str, path: str, cookie: str | None = None, origin: str | None = None,
             form: str = "") -> tuple[int, dict[str, str], str]:
        """One request as a browser sends it: this viewer's Host, the cookie, the Origin."""
        connection = http.client.HTTPConnection(self.address, timeout=120)
        headers = {"Host": self.address}
        if cookie:
            headers["Cookie"] = cookie
        if origin:
            headers["Origin"] = origin
        if method == "POST":
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        connection.request(method, path, body=form.encode() if method == "POST" else None, headers=headers)
        response = connection.getresponse()
        answer = (response.status, {k.lower(): v for k, v in response.getheaders()}, response.read().decode())
        connection.close()
        return answer

    def page(self, path: str) -> str:
        status, _, html = self.send("GET", self.secret + path, self.cookie)
        assert status == 200, html
        return html


def _words(html: str) -> str:
    return " ".join(html.split())


def _access_actions(account: Account) -> list[str]:
    sqs = account.client("sqs")
    actions = []
    while got := sqs.receive_message(QueueUrl=account.access_queue.url, MaxNumberOfMessages=10,
                                     VisibilityTimeout=600).get("Messages", []):
        actions += [json.loads(m["Body"])["action"] for m in got]
    return actions


@pytest.fixture
def account(work_dir):
    account = Account(work_dir)
    try:
        yield account
    finally:
        account.close()


def test_a_changed_item_is_not_shown_as_proven_and_a_planted_cosignature_is_not_counted(account, work_dir):
    # One event, archived as the receiver wrote it and sealed into the log; the table holds it.
    start = sealable_start()
    event = {"messageId": "ui-attack-1", "auditTime": "2026-11-22T08:00:00.000Z",
             "auditBucket": _bucket("ui-attack-1", "2026-11-22T08:00:00.000Z"), "actor": "alice",
             "action": "invoice.delete", "auditText": "alice deleted invoice 1",
             "receivedAt": _canonical(datetime.fromtimestamp(start + 60, timezone.utc))}
    sealable_object(account, start, event)
    sealed = seal(account)
    assert sealed["failure"] is None and sealed["sealed"], sealed
    ddb = account.client("dynamodb")
    ddb.put_item(TableName=account.table_name, Item={k: {"S": v} for k, v in event.items()})

    # The witness's key, given to the viewer; a junk line naming it planted where its
    # cosignature of the log's checkpoint goes.
    made = subprocess.run([str(binary("auditctl", work_dir)), "witness", "--init", "--key", str(work_dir / "witness"),
                           "--name", WITNESS], capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    vkey = made.stdout.strip()
    key_id = vkey.split("+")[1]
    s3 = account.client("s3")
    bucket = account.stack.archive_bucket.name
    checkpoints = s3.list_objects_v2(Bucket=bucket, Prefix="log/checkpoints/")["Contents"]
    size = int(checkpoints[-1]["Key"].rsplit("/", 1)[1])
    junk = base64.b64encode(bytes.fromhex(key_id) + (1_795_000_000).to_bytes(8, "big") + b"\x5a" * 64).decode()
    with account.bucket_policy_lifted():
        s3.put_object(Bucket=bucket, Key=f"log/cosignatures/{size:020}/{key_id}",
                      Body=f"\u2014 {WITNESS} {junk}\n".encode())

    ui = Viewer(account, ("--witness-key", vkey))
    try:
        page = _words(ui.page("/event?id=ui-attack-1"))
        assert "Proven, checked in this page" in page, page
        assert "0 witness cosignature(s) verified with the witness keys given" in page, page
        assert f"unverified, not counted: {WITNESS}" in page, page
        health = _words(ui.page("/health"))
        assert "0 verified with the witness keys given" in health, health
        assert "<strong>1 unverified</strong>" in health and f"<code>{WITNESS}</code>" in health, health

        # The insider changes the item's actor in the table.
        ddb.update_item(TableName=account.table_name,
                        Key={"messageId": {"S": "ui-attack-1"}, "auditTime": {"S": event["auditTime"]}},
                        UpdateExpression="SET actor = :a", ExpressionAttributeValues={":a": {"S": "mallory"}})
        html = ui.page("/event?id=ui-attack-1")
        page = _words(html)
        assert "Proven, checked in this page" not in page, page
        assert "NOT PROVEN: the table's item differs from the archived event in actor." in page, page
        apart = html.index('class="not-proven"')
        assert "mallory" not in html[:apart], "the forged actor is shown only apart, as not proven"
        assert '<dt>actor</dt><dd><span class="wrap">alice</span>' in html[:apart], html
        assert "mallory" in html[apart:]
    finally:
        assert ui.stop() == 0


def test_the_cookie_alone_is_refused_and_costly_actions_need_a_post_from_the_viewers_own_page(account):
    start = sealable_start()
    sealable_object(account, start)
    assert seal(account)["failure"] is None
    ui = Viewer(account, ())
    try:
        _access_actions(account)  # what the opening recorded, if anything
        # The cookie replayed without the run's secret, as a server at another port of 127.0.0.1
        # receives it from the browser: refused, nothing read.
        for path in ("/", "/event?id=iam-earlier-1", "/export.csv?range=24h", "/evidence.zip?range=24h", "/dlq"):
            status, _, html = ui.send("GET", path, ui.cookie)
            assert status == 404 and "lacks the run's secret" in html, (path, status, html)
        # The secret without the cookie: refused too.
        status, _, _ = ui.send("GET", ui.secret + "/", None)
        assert status == 401

        hour = datetime.fromtimestamp(start, timezone.utc).strftime("%Y-%m-%dT%H:00:00Z")
        run = urllib.parse.urlencode({"from": hour, "to": hour.replace(":00:00Z", ":59:59.999Z"), "run": "1"})
        # Verify asked for with a GET (a link, an image): not run.
        status, _, html = ui.send("GET", f"{ui.secret}/health?{run}", ui.cookie)
        assert status == 405 and "Verify ran over" not in html, (status, html)
        # POSTed from another origin, or with none: refused.
        other = "http://127.0.0.1:1"
        for origin in (other, None):
            for path, form in (("/health", run), ("/dlq", "reason=throttled&body=1"),
                               ("/dlq-redrive", "reason=throttled&count=1")):
                status, _, html = ui.send("POST", ui.secret + path, ui.cookie, origin, form)
                assert status == 403 and "Origin is missing or not this viewer's" in html, (path, origin, html)
        status, _, html = ui.send("GET", f"{ui.secret}/dlq?reason=throttled&body=1", ui.cookie)
        assert status == 405, html
        assert _access_actions(account) == [], "nothing ran, nothing was recorded"

        # From the viewer's own page: verify runs.
        status, _, html = ui.send("POST", ui.secret + "/health", ui.cookie, ui.origin, run)
        assert status == 200 and "verified: no problem" in _words(html), html
        assert _access_actions(account) == ["auditctl.ui.verify"]
    finally:
        assert ui.stop() == 0
