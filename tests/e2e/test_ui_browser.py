"""`auditctl ui` in a real headless Chromium (Debian's package, `make chromium`) against the
template's stack on moto with its access control on (iam_support.Account): an operator holding
exactly AuditOperatorPolicy and a reader holding exactly AuditReaderPolicy each run the viewer as
a person does, and the browser opens the printed URL, searches by actor, follows a click on a
resource, moves through the rows with the keyboard, opens an event, exports (the bytes of `auditctl query`), lists the dead-letter queue and
redrives one reason after its confirmation, verifies the periods in view from the health page; the reader is refused the dead-letter queue with the
reason; a request without the token is refused; bad input is shown. Screenshots at 1280x800 and
at a phone's 390 px are kept in the test's work directory (.local/e2e/<test>/screens)."""

import json
import os
import signal
import subprocess
import urllib.parse
from datetime import datetime, timedelta, timezone

import pytest

import browser
from iam_support import Account, binary, clean_aws_env, managed_policy, seal, sealable_object, sealable_start
from test_iam_auditctl import _bucket, _lookup_key

pytestmark = pytest.mark.skipif(browser.available() is None,
                                reason="no chromium: `make chromium` installs Debian's package")

LONG_TEXT = "alice deleted invoice 1 " + "because the customer asked for it, twice; " * 20 + "END-OF-TEXT"


def _canonical(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def _events(now: datetime) -> list[dict]:
    rows = [("ui-1", "alice", "invoice.delete", "invoice/1", "failure"),
            ("ui-2", "bob", "user.login", "account/bob", "success"),
            ("ui-3", "alice", "invoice.view", "invoice/1", "success"),
            ("ui-4", "mallory", "invoice.view", "invoice/2", "unknown"),
            ("ui-5", "alice", "user.login", "account/alice", "success"),
            ("ui-6", "bob", "invoice.delete", "invoice/2", "failure")]
    return [{"id": i, "time": _canonical(now - timedelta(minutes=5 * n + 1)), "actor": a, "action": x,
             "resource": r, "outcome": o} for n, (i, a, x, r, o) in enumerate(rows)]


def _seed(account: Account, events: list[dict]) -> None:
    ddb = account.client("dynamodb")
    for e in events:
        item = {"messageId": {"S": e["id"]}, "auditTime": {"S": e["time"]},
                "auditBucket": {"S": _bucket(e["id"], e["time"])},
                "auditText": {"S": LONG_TEXT if e["id"] == "ui-1" else f"{e['actor']} did {e['action']}"},
                "outcome": {"S": e["outcome"]}, "sourceIp": {"S": "192.0.2.10"},
                "senderId": {"S": "AIDAEXAMPLEPRODUCER"}, "sqsMessageId": {"S": "sqs-" + e["id"]},
                "receivedAt": {"S": e["time"]}, "eventSource": {"S": account.queue.arn},
                "extra": {"M": {"amount": {"N": "12345678901234567890.5"},
                                "lines": {"L": [{"S": "first"}, {"S": "second"}]}}}}
        for field in ("actor", "action", "resource"):
            item[field] = {"S": e[field]}
            item[field + "Key"] = {"S": _lookup_key(e[field], e["id"])}
        ddb.put_item(TableName=account.table_name, Item=item)
    sqs = account.client("sqs")
    for n, reason in enumerate(["throttled", "throttled", "conflict"]):
        context = {"reason": reason, "detail": f"{reason} in the test", "sqsMessageId": f"sqs-letter-{n}",
                   "sentTimestamp": "1795777200000", "receiveCount": 5, "failedAt": "2026-11-22T11:00:05.000Z",
                   "eventSourceArn": account.queue.arn}
        sqs.send_message(QueueUrl=account.dlq.url,
                         MessageBody=json.dumps({"messageId": f"letter-{n}", "auditText": f"letter body {n}"}),
                         MessageAttributes={
                             "failureReason": {"DataType": "String", "StringValue": reason},
                             "failureContext": {"DataType": "String", "StringValue": json.dumps(context)}})


def _user(account: Account, policy: str):
    doc = managed_policy(account.template, policy)
    return account.user(policy.lower(), managed={account.template.physical_name(policy): doc})


def _env(account: Account, creds) -> dict[str, str]:
    env = clean_aws_env(account.work_dir, creds, account.endpoint)
    env.update({"TABLE_NAME": account.table_name, "AUDIT_QUEUE_URL": account.queue.url,
                "ACCESS_QUEUE_URL": account.access_queue.url, "DEAD_LETTER_QUEUE_URL": account.dlq.url,
                "ARCHIVE_BUCKET": account.stack.archive_bucket.name, "DIGEST_KEY_ID": account.stack.digest_key.arn,
                "DIGEST_PERIOD_SECONDS": account.stack.archiver.environment["DIGEST_PERIOD_SECONDS"]})
    return env


class Viewer:
    """`auditctl ui` as a person runs it; stopped with Ctrl-C (SIGINT to its process group)."""

    def __init__(self, account: Account, creds, name: str, args: tuple[str, ...] = ()):
        self.log = open(account.work_dir / f"ui-{name}.log", "ab")
        self.proc = subprocess.Popen([str(binary("auditctl", account.work_dir)), "ui", *args], env=_env(account, creds),
                                     stdout=subprocess.PIPE, stderr=self.log, stdin=subprocess.DEVNULL,
                                     start_new_session=True, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("auditctl ui: open http://127.0.0.1:"), line
        self.url = line.split("open ", 1)[1].strip()
        self.origin = self.url.split("/?", 1)[0]

    def stop(self) -> int:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
        code = self.proc.wait(timeout=15)
        self.log.close()
        return code


@pytest.fixture
def setup(work_dir):
    account = Account(work_dir)
    shots = work_dir / "screens"
    shots.mkdir()
    opened = []
    try:
        events = _events(datetime.now(timezone.utc))
        _seed(account, events)
        operator = _user(account, "AuditOperatorPolicy")
        reader = _user(account, "AuditReaderPolicy")
        account.enforce()
        ui = Viewer(account, operator, "operator")
        opened.append(ui)
        reader_ui = Viewer(account, reader, "reader")
        opened.append(reader_ui)
        chrome = browser.Browser(work_dir)
        opened.append(chrome)
        yield account, events, ui, reader_ui, chrome, shots, operator
    finally:
        for thing in reversed(opened):
            try:
                thing.close() if isinstance(thing, browser.Browser) else thing.stop()
            except Exception:  # noqa: BLE001 - stop the rest regardless
                pass
        account.close()


def _ids(chrome) -> list[str]:
    return chrome.evaluate("[...document.querySelectorAll('#rows a.open')].map(a => "
                           "new URL(a.href).searchParams.get('id'))")


def _column(chrome, n: int) -> list[str]:
    return chrome.evaluate(f"[...document.querySelectorAll('#rows tr')].map(r => r.cells[{n}].innerText.trim())")


def test_a_person_searches_opens_exports_and_redrives_in_a_browser_and_a_reader_is_refused(setup):
    account, events, ui, reader_ui, chrome, shots, operator = setup
    newest_first = [e["id"] for e in sorted(events, key=lambda e: e["time"], reverse=True)]

    # No token: refused.
    chrome.navigate(ui.origin + "/")
    assert chrome.status() == 401
    assert "open the URL that auditctl ui printed" in chrome.text()

    # The printed URL: it opens on the last hour, newest first; the token left the address for an
    # HttpOnly cookie that the page's script cannot read.
    chrome.navigate(ui.url)
    assert chrome.evaluate("location.search") == ""
    assert chrome.evaluate("document.cookie") == ""
    assert _ids(chrome) == newest_first
    chrome.wait_for("!!document.querySelector('#chart figure')")
    assert "failure: 2" in chrome.text() and "success: 3" in chrome.text()
    chrome.screenshot(shots / "search-1280.png", 1280)
    chrome.screenshot(shots / "search-390.png", 390)

    # The keyboard: j moves to the next row, Enter opens it; each time says its local offset on
    # hover (the browser runs in UTC here).
    chrome.key("j")
    assert chrome.evaluate("document.activeElement.matches('#rows tr.current:first-child')")
    assert "local time (UTC+00:00)" in chrome.evaluate("document.querySelector('#rows time').title")
    chrome.key("Enter", load=True)
    secret = urllib.parse.urlparse(ui.origin).path  # every address begins with the run's secret
    assert chrome.evaluate("location.pathname + location.search") == secret + "/event?id=" + newest_first[0]
    chrome.navigate(ui.origin + "/")

    # Search by actor through the form; the filter is in the URL.
    chrome.evaluate("document.querySelector('input[name=actor]').value = 'alice'")
    chrome.click_and_load("form.search button[type=submit]")
    assert urllib.parse.parse_qs(urllib.parse.urlparse(chrome.evaluate("location.href")).query)["actor"] == ["alice"]
    assert _ids(chrome) == [i for i in newest_first if next(e for e in events if e["id"] == i)["actor"] == "alice"]
    assert set(_column(chrome, 1)) == {"alice"}

    # A click on a resource searches by it.
    chrome.click_and_load("#rows a[href*='resource=invoice%2F1']")
    assert set(_column(chrome, 3)) == {"invoice/1"}
    assert sorted(_ids(chrome)) == ["ui-1", "ui-3"]

    # An event's page: every field, extra pretty-printed, the long text whole, the proof status.
    chrome.navigate(ui.origin + "/event?id=ui-1")
    text = chrome.text()
    for shown in ("senderId", "AIDAEXAMPLEPRODUCER", "sqsMessageId", "sqs-ui-1", "receivedAt",
                  '"amount": 12345678901234567890.5', "END-OF-TEXT", "Proof"):
        assert shown in text, shown
    assert "is not sealed yet; the archiver seals it by" in text or "No digest" in text, text
    chrome.screenshot(shots / "event-1280.png", 1280)
    chrome.screenshot(shots / "event-390.png", 390)

    # Export: the same bytes as auditctl query over the range the page resolved.
    chrome.navigate(ui.origin + "/?range=24h")
    href = chrome.evaluate("document.querySelector('.export a').getAttribute('href')")
    fixed = urllib.parse.parse_qs(urllib.parse.urlparse(href).query)
    for fmt in ("csv", "jsonl"):  # compared as bytes: CSV lines end in CRLF
        got = chrome.evaluate(f"fetch({json.dumps(href.replace('export.csv', 'export.' + fmt))}).then(r => r.text())")
        env = _env(account, operator)
        expected = subprocess.run([str(binary("auditctl", account.work_dir)), "query", "--from", fixed["from"][0],
                                   "--to", fixed["to"][0], "--desc", "--format", fmt, "--no-audit-event"],
                                  env=env, capture_output=True, timeout=60, check=True).stdout.decode()
        assert got == expected and len(expected.splitlines()) >= len(events), (fmt, got, expected)

    # Bad input: a clear message and a 4xx.
    chrome.navigate(ui.origin + "/?from=yesterday&to=2026-11-24T00:00:00Z")
    assert chrome.status() == 400
    assert "--from 'yesterday': add an offset" in chrome.text()
    chrome.screenshot(shots / "bad-input-1280.png", 1280)
    chrome.navigate(ui.origin + "/?colour=red")
    assert chrome.status() == 400 and "unknown filter 'colour'" in chrome.text()

    # The dead-letter queue by reason, then a redrive of one reason after its confirmation.
    chrome.navigate(ui.origin + "/dlq")
    assert chrome.status() == 200
    reasons = chrome.evaluate("[...document.querySelectorAll('#reasons tbody tr')].map(r => "
                              "[r.cells[0].innerText, r.cells[1].innerText])")
    assert reasons == [["conflict", "1"], ["throttled", "2"]], reasons
    assert "letter body" not in chrome.text(), "bodies only on request"
    chrome.screenshot(shots / "dlq-1280.png", 1280)
    chrome.click_and_load("a.button[href='dlq-confirm?reason=throttled']")
    assert "2 message(s) of reason throttled will move" in chrome.text()
    chrome.click_and_load("form.confirm button[type=submit]")
    assert "Moved 2 message(s)" in chrome.text(), chrome.text()
    moved = account.client("sqs").get_queue_attributes(QueueUrl=account.queue.url,
                                                      AttributeNames=["ApproximateNumberOfMessages"])
    assert moved["Attributes"]["ApproximateNumberOfMessages"] == "2"

    # Health: verify the periods in view, from the search's link, with the keyboard, over an hour
    # audit-archiver sealed (one object): what was checked, and no problem.
    # The archived line is the item as the receiver wrote it (received in the sealed hour).
    start = sealable_start()
    received = datetime.fromtimestamp(start + 60, timezone.utc)
    proven = {"messageId": "iam-earlier-1", "auditTime": "2026-11-22T08:00:00.000Z",
              "auditBucket": _bucket("iam-earlier-1", "2026-11-22T08:00:00.000Z"),
              "auditText": "carol signed out", "receivedAt": _canonical(received)}
    sealable_object(account, start, proven)
    sealed = seal(account)
    assert sealed["failure"] is None and sealed["sealed"], sealed
    chrome.navigate(ui.origin + "/?range=24h")
    chrome.click_and_load("a[href^='health?from=']")
    assert chrome.status() == 200 and "Transparency log" in chrome.text()
    chrome.evaluate("document.querySelector('form.verify button[name=run]').focus()")
    chrome.key("Enter", load=True)
    assert chrome.status() == 200, chrome.text()
    outcome = " ".join(chrome.text().split())
    assert "verified: no problem" in outcome, outcome
    assert "objects 1 checked (1 trail, 0 tamper)" in outcome, outcome
    assert "auditctl verify --from" in outcome
    chrome.screenshot(shots / "health-verify-1280.png", 1280)
    chrome.screenshot(shots / "health-verify-390.png", 390)

    # The sealed hour's event, as the table holds it (received in that hour): its page proves it,
    # checked in the page against the checkpoint audit-archiver signed; an event of an hour not
    # sealed yet has no proof yet.
    account.client("dynamodb").put_item(TableName=account.table_name,
                                        Item={name: {"S": value} for name, value in proven.items()})
    chrome.navigate(ui.origin + "/event?id=iam-earlier-1")
    verdict = " ".join(chrome.text().split())
    assert chrome.status() == 200, verdict
    assert "Proven, checked in this page" in verdict and "of the transparency log's tree" in verdict, verdict
    chrome.screenshot(shots / "event-proven-1280.png", 1280)
    chrome.navigate(ui.origin + "/event?id=ui-1")
    assert "No proof yet" in " ".join(chrome.text().split())

    # The reader: the dead-letter queue and its redrive are refused, with the reason.
    chrome.navigate(reader_ui.url)
    assert _ids(chrome) == newest_first, "a reader reads the trail"
    chrome.navigate(reader_ui.origin + "/dlq")
    assert chrome.status() == 403
    assert "need AuditOperatorPolicy" in chrome.text(), chrome.text()
    chrome.screenshot(shots / "reader-dlq-1280.png", 1280)
    refused = chrome.evaluate("fetch('dlq-redrive', {method: 'POST', body: new URLSearchParams("
                              "{reason: 'conflict', count: '1'})}).then(async r => [r.status, await r.text()])")
    assert refused[0] == 403 and "need AuditOperatorPolicy" in refused[1], refused
    depth = account.client("sqs").get_queue_attributes(QueueUrl=account.dlq.url,
                                                      AttributeNames=["ApproximateNumberOfMessages"])
    assert depth["Attributes"]["ApproximateNumberOfMessages"] == "1", "the conflict stays"

    # Every read and the redrive were recorded under the operator's or the reader's ARN.
    sqs = account.client("sqs")
    actions = []
    while True:
        got = sqs.receive_message(QueueUrl=account.access_queue.url, MaxNumberOfMessages=10,
                                  VisibilityTimeout=600).get("Messages", [])
        if not got:
            break
        actions += [json.loads(m["Body"])["action"] for m in got]
    for action in ("auditctl.ui.search", "auditctl.ui.view", "auditctl.ui.export", "auditctl.ui.redrive",
                   "auditctl.ui.verify"):
        assert action in actions, (action, actions)

    # Ctrl-C stops both cleanly.
    assert ui.stop() == 0
    assert reader_ui.stop() == 0
