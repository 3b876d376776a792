//! Owns `auditctl ui` over HTTP against moto (src/ui; docs/ui.md): the
//! binary started as a person starts it, the one-time token and its cookie, searches and their
//! pages, an event's page, exports byte for byte as `auditctl query`, the access events, bad
//! input, and Ctrl-C. Must not know the pages' markup beyond the links and ids they carry.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::dlq::{Queues, queues};
use crate::harness::*;
use crate::lookups::{Event, expected, is, structured_events, write_events};
use crate::support::*;

/// The three days of `structured_events`.
const RANGE: &str = "from=2026-11-22T00:00:00Z&to=2026-11-24T23:59:59.999Z";

/// A running `auditctl ui`, killed on drop.
pub(crate) struct Ui {
    child: Child,
    pub(crate) address: String,
    /// The run's secret, `/<secret>`: every path the tests give is under it.
    secret: String,
    token_path: String,
    stdout: BufReader<std::process::ChildStdout>,
    /// Its stdin, where a line asks for a fresh link.
    stdin: std::process::ChildStdin,
}

impl Ui {
    /// Starts `auditctl ui` against moto with `env`, on a free port, and reads the URL it prints.
    pub(crate) fn start(moto: &Moto, env: &[(&str, &str)]) -> Self {
        Self::start_at(&moto.endpoint, env)
    }

    /// As `start`, with requests to `endpoint`.
    pub(crate) fn start_at(endpoint: &str, env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_auditctl"));
        for name in [
            "AWS_PROFILE",
            "TABLE_NAME",
            "AUDIT_QUEUE_URL",
            "ACCESS_QUEUE_URL",
            "DEAD_LETTER_QUEUE_URL",
        ] {
            command.env_remove(name);
        }
        command
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("AWS_ENDPOINT_URL", endpoint)
            .arg("ui")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (name, value) in env {
            command.env(name, value);
        }
        // With no access queue it reads unrecorded on purpose: without one it would not start.
        if !env.iter().any(|(name, _)| *name == "ACCESS_QUEUE_URL") {
            command.arg("--no-audit-event");
        }
        let mut child = command.spawn().expect("auditctl ui starts");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let stdin = child.stdin.take().unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let url = line
            .trim()
            .strip_prefix("auditctl ui: open http://")
            .unwrap_or_else(|| panic!("the URL first: {line:?}"))
            .to_owned();
        let (address, path) = url.split_once('/').unwrap();
        assert!(address.starts_with("127.0.0.1:"), "loopback only: {url}");
        let (secret, token) = path.split_once("/?").unwrap();
        Self {
            child,
            address: address.to_owned(),
            secret: format!("/{secret}"),
            token_path: format!("/?{token}"),
            stdout,
            stdin,
        }
    }

    /// Presses Enter where `auditctl ui` runs: the fresh link it prints becomes the one `open`
    /// opens.
    pub(crate) fn fresh_link(&mut self) {
        use std::io::Write;
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "a fresh link"
            );
            if let Some(url) = line.trim().strip_prefix("auditctl ui: open http://") {
                let url = url.split_whitespace().next().unwrap();
                let path = &url[url.find('/').unwrap()..];
                let (secret, token) = path.split_once("/?").unwrap();
                assert_eq!(secret, self.secret, "the same run's secret");
                self.token_path = format!("/?{token}");
                return;
            }
        }
    }

    /// Opens the printed URL: the cookie the viewer sets.
    pub(crate) async fn open(&self) -> String {
        let answer = self.get(&self.token_path, None).await;
        assert_eq!(answer.status, 303, "{}", answer.text());
        let home = format!("{}/", self.secret);
        assert_eq!(
            answer.header("location"),
            Some(home.as_str()),
            "the token is dropped"
        );
        let cookie = answer.header("set-cookie").unwrap();
        assert!(cookie.contains("HttpOnly"), "{cookie}");
        cookie.split(';').next().unwrap().to_owned()
    }

    /// One GET of `path` under the run's secret, on a connection of its own.
    pub(crate) async fn get(&self, path: &str, cookie: Option<&str>) -> Answer {
        let path = format!("{}{path}", self.secret);
        self.send("GET", &path, cookie, None, "").await
    }

    /// One GET of `path` as it is, without the run's secret.
    pub(crate) async fn get_bare(&self, path: &str, cookie: Option<&str>) -> Answer {
        self.send("GET", path, cookie, None, "").await
    }

    /// One POST of a form, from `origin`.
    pub(crate) async fn post(
        &self,
        path: &str,
        cookie: &str,
        origin: Option<&str>,
        form: &str,
    ) -> Answer {
        let path = format!("{}{path}", self.secret);
        self.send("POST", &path, Some(cookie), origin, form).await
    }

    async fn send(
        &self,
        method: &str,
        path: &str,
        cookie: Option<&str>,
        origin: Option<&str>,
        body: &str,
    ) -> Answer {
        let mut stream = tokio::net::TcpStream::connect(&self.address).await.unwrap();
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n",
            self.address,
            body.len()
        );
        if method == "POST" {
            head.push_str("Content-Type: application/x-www-form-urlencoded\r\n");
        }
        if let Some(cookie) = cookie {
            head.push_str(&format!("Cookie: {cookie}\r\n"));
        }
        if let Some(origin) = origin {
            head.push_str(&format!("Origin: {origin}\r\n"));
        }
        head.push_str("\r\n");
        head.push_str(body);
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await.unwrap();
        Answer::parse(&response)
    }
}

impl Drop for Ui {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP answer: status, headers, body (chunks joined).
pub(crate) struct Answer {
    pub(crate) status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn parse(response: &[u8]) -> Self {
        let end = response.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let head = String::from_utf8_lossy(&response[..end]).into_owned();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        let headers: Vec<(String, String)> = head
            .lines()
            .skip(1)
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let mut body = response[end..].to_vec();
        if headers
            .iter()
            .any(|(n, v)| n == "transfer-encoding" && v == "chunked")
        {
            let mut rest = &body[..];
            let mut joined = Vec::new();
            loop {
                let line_end = rest.windows(2).position(|w| w == b"\r\n").unwrap();
                let size = usize::from_str_radix(
                    std::str::from_utf8(&rest[..line_end]).unwrap().trim(),
                    16,
                )
                .unwrap();
                rest = &rest[line_end + 2..];
                if size == 0 {
                    break;
                }
                joined.extend_from_slice(&rest[..size]);
                rest = &rest[size + 2..];
            }
            body = joined;
        }
        Self {
            status,
            headers,
            body,
        }
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.body
    }

    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// The messageIds of the rows of a page or fragment, in order (from their event links).
fn row_ids(html: &str) -> Vec<String> {
    html.split("<a href=\"event?id=")
        .skip(1)
        .map(|rest| {
            let encoded = &rest[..rest.find('"').unwrap()];
            let decoded = encoded.replace("&amp;", "&");
            form_urlencoded::parse(format!("id={decoded}").as_bytes())
                .next()
                .unwrap()
                .1
                .into_owned()
        })
        .collect()
}

/// The link to the next page's rows, if any.
fn next_rows(html: &str) -> Option<String> {
    let start = html.find("data-rows=\"")? + "data-rows=\"".len();
    let end = start + html[start..].find('"')?;
    Some(format!("/{}", html[start..end].replace("&amp;", "&")))
}

/// Every row of a search: its page, then each further page, as the page's script loads them.
async fn all_rows(ui: &Ui, cookie: &str, query: &str) -> (Vec<String>, usize) {
    let page = ui.get(&format!("/?{query}"), Some(cookie)).await;
    assert_eq!(page.status, 200, "{}", page.text());
    let mut html = page.text();
    let mut ids = row_ids(&html);
    let mut pages = 1;
    while let Some(next) = next_rows(&html) {
        let more = ui.get(&next, Some(cookie)).await;
        assert_eq!(more.status, 200, "{}", more.text());
        html = more.text();
        ids.extend(row_ids(&html));
        pages += 1;
    }
    assert!(html.contains("id=\"end\""), "the last page says so");
    (ids, pages)
}

/// The ids of `keys`, newest first.
fn newest_first(keys: Vec<(String, String)>) -> Vec<String> {
    keys.into_iter().rev().map(|(_, id)| id).collect()
}

async fn stack(moto: &Moto) -> (Vec<Event>, Queues) {
    let events = structured_events();
    write_events(moto, &events).await;
    (events, queues(moto).await)
}

#[tokio::test]
async fn the_printed_token_opens_once_and_then_a_cookie_is_needed() {
    let moto = Moto::start();
    let (_, q) = stack(&moto).await;
    let ui = Ui::start(&moto, &q.env());
    assert_eq!(ui.get("/", None).await.status, 401, "no token, no cookie");
    assert_eq!(ui.get("/?token=guess", None).await.status, 403);
    let cookie = ui.open().await;
    let again = ui.get(&ui.token_path, None).await;
    assert_eq!(again.status, 403, "the token works once");
    assert!(again.text().contains("expired"), "{}", again.text());
    // The cookie alone, without the run's secret in the path (what a server at another port of
    // 127.0.0.1 receives from the browser): refused.
    for path in ["/", "/event?id=e-23-05", "/export.csv"] {
        let bare = ui.get_bare(path, Some(&cookie)).await;
        assert_eq!(bare.status, 404, "{path}: {}", bare.text());
        assert!(bare.text().contains("lacks the run's secret"), "{path}");
    }
    let page = ui.get("/", Some(&cookie)).await;
    assert_eq!(page.status, 200, "{}", page.text());
    assert!(
        page.text().contains("Last hour"),
        "it opens on the last hour"
    );
    let css = ui.get("/assets/viewer.css", Some(&cookie)).await;
    assert_eq!(css.status, 200);
    assert_eq!(css.header("content-type"), Some("text/css; charset=utf-8"));
    let csp = page.header("content-security-policy").unwrap();
    assert!(
        csp.contains("default-src 'none'"),
        "nothing from elsewhere: {csp}"
    );
}

#[tokio::test]
async fn enter_prints_a_fresh_link_that_opens_once_more_and_every_link_before_it_no_longer_does() {
    let moto = Moto::start();
    let (_, q) = stack(&moto).await;
    let mut ui = Ui::start(&moto, &q.env());
    let first = ui.open().await;
    let used = ui.token_path.clone();
    ui.fresh_link();
    let unused = ui.token_path.clone();
    ui.fresh_link();
    assert!(used != unused && unused != ui.token_path);
    let second = ui.open().await;
    for cookie in [&first, &second] {
        let page = ui.get("/", Some(cookie)).await;
        assert_eq!(
            page.status,
            200,
            "each browser keeps its session: {}",
            page.text()
        );
    }
    for path in [&used, &unused, &ui.token_path] {
        let again = ui.get(path, None).await;
        assert_eq!(again.status, 403, "{path}");
        assert!(
            again.text().contains("expired")
                && again
                    .text()
                    .contains("press Enter in the terminal where auditctl ui runs"),
            "{}",
            again.text()
        );
    }
}

#[tokio::test]
async fn a_search_shows_every_event_of_the_range_newest_first_page_by_page_and_records_each_read() {
    let moto = Moto::start();
    let (events, q) = stack(&moto).await;
    let ui = Ui::start(&moto, &q.env());
    let cookie = ui.open().await;
    let (ids, pages) = all_rows(&ui, &cookie, RANGE).await;
    assert_eq!(ids, newest_first(expected(&events, |_| true)));
    assert_eq!(pages, 2, "{} rows in pages of 50", ids.len());
    // One access event per read: the search and its further page.
    let bodies = q.access_events().await;
    assert_eq!(bodies.len(), pages, "{bodies:?}");
    let arguments: Vec<Value> = bodies
        .iter()
        .map(|b| crate::access::assert_access_event(b, "auditctl.ui.search", TABLE))
        .collect();
    for a in &arguments {
        assert_eq!(a["from"], "2026-11-22T00:00:00.000Z");
        assert_eq!(a["to"], "2026-11-24T23:59:59.999Z");
    }
    let paged = arguments.iter().filter(|a| a["cursor"].is_string()).count();
    assert_eq!(
        paged, 1,
        "the further page names where it began: {arguments:?}"
    );
}

#[tokio::test]
async fn a_search_by_actor_reads_its_lookup_and_a_click_on_a_resource_searches_by_it() {
    let moto = Moto::start();
    let (events, q) = stack(&moto).await;
    let ui = Ui::start(&moto, &q.env());
    let cookie = ui.open().await;
    let (ids, _) = all_rows(
        &ui,
        &cookie,
        &format!("{RANGE}&actor=alice&outcome=failure"),
    )
    .await;
    assert_eq!(
        ids,
        newest_first(expected(&events, |e| is(&e.actor, "alice")
            && e.outcome == Some("failure")))
    );
    assert!(!ids.is_empty());
    let page = ui
        .get(&format!("/?{RANGE}&actor=alice"), Some(&cookie))
        .await
        .text();
    assert!(page.contains("(index byActor)"), "the lookup index is read");
    // The resource of a row is a link to the search by it over the same range.
    let link = "./?from=2026-11-22T00%3A00%3A00Z&amp;to=2026-11-24T23%3A59%3A59.999Z&amp;resource=invoice%2F1";
    assert!(page.contains(&format!("<a href=\"{link}\"")), "{page}");
    let (ids, _) = all_rows(&ui, &cookie, &link.replace("&amp;", "&")[3..]).await;
    assert_eq!(
        ids,
        newest_first(expected(&events, |e| is(&e.resource, "invoice/1")))
    );
}

#[tokio::test]
async fn an_export_is_the_same_bytes_as_auditctl_query_and_is_recorded() {
    let moto = Moto::start();
    let (_, q) = stack(&moto).await;
    let ui = Ui::start(&moto, &q.env());
    let cookie = ui.open().await;
    for (search, flags) in [
        (RANGE.to_owned(), vec![]),
        (
            format!("{RANGE}&actor=alice&source_ip=2001:DB8::1"),
            vec!["--actor", "alice", "--source-ip", "2001:DB8::1"],
        ),
    ] {
        for format in ["csv", "jsonl"] {
            let export = ui
                .get(&format!("/export.{format}?{search}"), Some(&cookie))
                .await;
            assert_eq!(export.status, 200, "{}", export.text());
            let bodies = q.access_events().await;
            assert_eq!(bodies.len(), 1, "{bodies:?}");
            let arguments =
                crate::access::assert_access_event(&bodies[0], "auditctl.ui.export", TABLE);
            assert_eq!(arguments["format"], format);
            let printed = ok(auditctl(
                &moto.endpoint,
                &[
                    &[
                        "query",
                        "--from",
                        "2026-11-22T00:00:00Z",
                        "--to",
                        "2026-11-24T23:59:59.999Z",
                        "--desc",
                        "--format",
                        format,
                        "--no-audit-event",
                    ][..],
                    &flags[..],
                ]
                .concat(),
                &[],
            ));
            assert!(printed.lines().count() > 3, "{printed}");
            assert_eq!(export.text(), printed, "{format} of {search}");
        }
    }
}

#[tokio::test]
async fn access_events_are_hidden_unless_asked_for_and_query_no_access_leaves_them_out() {
    let moto = Moto::start();
    let (events, q) = stack(&moto).await;
    let ui = Ui::start(&moto, &q.env());
    let cookie = ui.open().await;
    // The viewer's own read, written by the function as the stack writes it.
    let search = "from=2026-11-24T00:00:00Z";
    assert_eq!(
        ui.get(&format!("/?{search}"), Some(&cookie)).await.status,
        200
    );
    let taken = q.take().await;
    assert_eq!(taken.len(), 1, "{taken:?}");
    crate::access::write_through_function(&moto, &q, &taken).await;
    let access_id: Value = serde_json::from_str(taken[0].body().unwrap()).unwrap();
    let access_id = access_id["messageId"].as_str().unwrap().to_owned();
    let people = newest_first(expected(&events, |e| e.time.starts_with("2026-11-24")));

    let page = ui.get(&format!("/?{search}"), Some(&cookie)).await;
    let html = page.text();
    assert_eq!(row_ids(&html), people, "people's events only");
    assert!(
        html.contains("<strong>1 access event(s) hidden</strong>")
            && html.contains("Show access events</a>")
            && html.contains("name=\"access\" value=\"1\""),
        "{html}"
    );
    let chart = ui.get(&format!("/chart?{search}"), Some(&cookie)).await;
    assert!(
        chart
            .text()
            .contains("1 access event(s) (auditctl's own reads) not counted"),
        "{}",
        chart.text()
    );
    let shown = ui.get(&format!("/?{search}&access=1"), Some(&cookie)).await;
    let shown = row_ids(&shown.text());
    assert_eq!(shown[0], access_id, "the newest: the viewer's read");
    assert_eq!(shown[1..], people[..]);

    let query = |flag: &[&str]| {
        let args = [
            &["query", "--from", "2026-11-24T00:00:00Z", "--desc"][..],
            &["--format", "jsonl", "--no-audit-event"],
            flag,
        ]
        .concat();
        let rows = jsonl(&ok(auditctl(&moto.endpoint, &args, &[])));
        rows.iter()
            .map(|r| r["messageId"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(query(&["--no-access"]), people);
    assert_eq!(query(&[]), shown, "its default stays: every event");
    assert_eq!(query(&["--no-access", "--limit", "2"]), people[..2]);
}

#[tokio::test]
async fn an_events_page_shows_every_field_in_full_and_is_recorded() {
    let moto = Moto::start();
    let (_, q) = stack(&moto).await;
    let ui = Ui::start(&moto, &q.env());
    let cookie = ui.open().await;
    let page = ui.get("/event?id=e-23-05", Some(&cookie)).await;
    assert_eq!(page.status, 200, "{}", page.text());
    let bodies = q.access_events().await;
    assert_eq!(bodies.len(), 1, "{bodies:?}");
    let arguments = crate::access::assert_access_event(&bodies[0], "auditctl.ui.view", TABLE);
    assert_eq!(arguments["messageId"], "e-23-05");
    let html = page.text();
    for field in [
        "<dt>messageId</dt>",
        "<dt>actor</dt>",
        "<dt>sqsMessageId</dt>",
        "<dt>receivedAt</dt>",
        "<dt>extra</dt>",
        "sqs-e-23-05",
    ] {
        assert!(html.contains(field), "{field} in {html}");
    }
    // extra pretty-printed, its number with every digit.
    assert!(
        html.contains(&format!("&quot;amount&quot;: {BIG}")),
        "{html}"
    );
}

#[tokio::test]
async fn with_the_attestation_key_an_item_put_behind_the_function_says_not_attested() {
    let moto = Moto::start();
    // The events are written straight into the table, as anyone with PutItem could.
    let (_, q) = stack(&moto).await;
    let key = create_key(&kms(&moto)).await;
    let mut env = q.env().to_vec();
    env.push(("ATTESTATION_KEY_ID", key.as_str()));
    let ui = Ui::start(&moto, &env);
    let cookie = ui.open().await;
    let page = ui.get("/event?id=e-23-05", Some(&cookie)).await;
    assert_eq!(page.status, 200, "{}", page.text());
    let html = page.text();
    assert!(
        html.contains("role=\"alert\"><strong>NOT ATTESTED: it has no attestation</strong>"),
        "{html}"
    );
    // Without the key the page makes no such claim either way.
    let plain = Ui::start(&moto, &q.env());
    let cookie = plain.open().await;
    let html = plain.get("/event?id=e-23-05", Some(&cookie)).await.text();
    assert!(!html.contains("ATTESTED"), "{html}");
}

#[tokio::test]
async fn bad_input_is_a_4xx_with_the_reason_on_the_page_and_reads_nothing() {
    let moto = Moto::start();
    let (_, q) = stack(&moto).await;
    let ui = Ui::start(&moto, &q.env());
    let cookie = ui.open().await;
    for (path, status, says) in [
        (
            "/?from=yesterday&to=2026-11-24T00:00:00Z",
            400,
            "--from 'yesterday': add an offset",
        ),
        ("/?colour=red", 400, "unknown filter 'colour'"),
        ("/?outcome=ok", 400, "outcome 'ok': one of success"),
        ("/rows?cursor=x", 400, "is not where a page ended"),
        ("/export.csv?range=2w", 400, "range '2w'"),
        ("/event?messageId=x", 400, "takes one parameter, id"),
        ("/nowhere", 404, "no page at /nowhere"),
    ] {
        let answer = ui.get(path, Some(&cookie)).await;
        assert_eq!(answer.status, status, "{path}: {}", answer.text());
        assert!(answer.text().contains(says), "{path}: {}", answer.text());
        assert!(!answer.text().contains("<tbody"), "{path}: no rows");
    }
    assert!(
        q.access_events().await.is_empty(),
        "nothing read, nothing recorded"
    );
}

#[tokio::test]
async fn when_the_access_event_cannot_be_sent_the_page_says_why_and_shows_no_rows() {
    let moto = Moto::start();
    let (_, q) = stack(&moto).await;
    // An access queue that is not the one the table names.
    let ui = Ui::start(
        &moto,
        &[
            ("ACCESS_QUEUE_URL", q.source.as_str()),
            ("DEAD_LETTER_QUEUE_URL", &q.dlq),
        ],
    );
    let cookie = ui.open().await;
    for path in [
        format!("/?{RANGE}"),
        "/event?id=e-23-05".to_owned(),
        format!("/export.csv?{RANGE}"),
    ] {
        let answer = ui.get(&path, Some(&cookie)).await;
        assert_eq!(answer.status, 502, "{path}");
        let html = answer.text();
        assert!(
            html.contains("access not recorded, so nothing was read"),
            "{path}: {html}"
        );
        assert!(
            !html.contains("<tbody") && !html.contains("<dt>"),
            "{path}: no data: {html}"
        );
    }
}

#[tokio::test]
async fn ctrl_c_stops_the_viewer() {
    let moto = Moto::start();
    let (_, q) = stack(&moto).await;
    let mut ui = Ui::start(&moto, &q.env());
    let pid = nix::unistd::Pid::from_raw(i32::try_from(ui.child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let status = ui.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut ui.stdout, &mut rest).unwrap();
    assert!(rest.contains("auditctl ui: stopped"), "{rest}");
    assert!(
        tokio::net::TcpStream::connect(&ui.address).await.is_err(),
        "no longer listening"
    );
}

impl Queues {
    /// Every message of the access queue, received and deleted, as JSON bodies.
    pub(crate) async fn access_events(&self) -> Vec<Value> {
        let mut taken = Vec::new();
        loop {
            let batch = self
                .sqs
                .receive_message()
                .queue_url(&self.access)
                .max_number_of_messages(10)
                .send()
                .await
                .unwrap()
                .messages
                .unwrap_or_default();
            if batch.is_empty() {
                return taken;
            }
            for m in batch {
                self.sqs
                    .delete_message()
                    .queue_url(&self.access)
                    .receipt_handle(m.receipt_handle().unwrap())
                    .send()
                    .await
                    .unwrap();
                taken.push(serde_json::from_str(m.body().unwrap()).unwrap());
            }
        }
    }
}

#[tokio::test]
async fn the_chart_counts_the_searchs_events_per_hour_by_outcome_in_words_too() {
    let moto = Moto::start();
    let (events, q) = stack(&moto).await;
    let ui = Ui::start(&moto, &q.env());
    let cookie = ui.open().await;
    let page = ui
        .get(&format!("/?{RANGE}&actor=alice"), Some(&cookie))
        .await
        .text();
    let src = "chart?from=2026-11-22T00%3A00%3A00.000Z&amp;to=2026-11-24T23%3A59%3A59.999Z&amp;actor=alice";
    assert!(page.contains(&format!("data-src=\"{src}\"")), "{page}");
    q.access_events().await;
    let chart = ui
        .get(&format!("/{}", src.replace("&amp;", "&")), Some(&cookie))
        .await;
    assert_eq!(chart.status, 200, "{}", chart.text());
    let html = chart.text();
    let alice: Vec<&Event> = events.iter().filter(|e| is(&e.actor, "alice")).collect();
    let of = |o: Option<&str>| alice.iter().filter(|e| e.outcome == o).count();
    assert!(
        html.contains(&format!("({} events)", alice.len())),
        "{html}"
    );
    for (name, n) in [
        ("success", of(Some("success"))),
        ("failure", of(Some("failure"))),
        ("none", of(None)),
    ] {
        assert!(
            html.contains(&format!("{name}: {n}</li>")),
            "{name} {n}: {html}"
        );
    }
    // The four equal-time deletes of 2026-11-23 12:00 and a success at 12:15 are one bar,
    // said in words.
    assert!(
        html.contains("<title>2026-11-23T12:00 UTC: 1 success, 4 failure</title>"),
        "{html}"
    );
    let bodies = q.access_events().await;
    assert_eq!(bodies.len(), 1);
    let arguments = crate::access::assert_access_event(&bodies[0], "auditctl.ui.search", TABLE);
    assert_eq!(arguments["chart"], true);
}

#[tokio::test]
async fn health_names_the_newest_sealed_period_and_tamper_records_and_an_events_page_its_periods_digest()
 {
    let moto = Moto::start();
    let (_, q) = stack(&moto).await;
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&audit_testkit::endpoint::sdk_config(&moto.endpoint))
            .force_path_style(true)
            .build(),
    );
    s3.create_bucket().bucket("archive").send().await.unwrap();
    // The period of e-23-05 (2026-11-23T10:15:00.500Z) is sealed; the next hour's is the newest.
    let today = chrono::Utc::now().format("%Y-%m-%d");
    let tamper = format!("tamper/dt={today}/hour=09/p1-a0.jsonl.gz");
    for key in [
        "digest/dt=2026-11-23/hour=10/p1795428000.json",
        "digest/dt=2026-11-23/hour=11/p1795431600.json",
        tamper.as_str(),
    ] {
        s3.put_object()
            .bucket("archive")
            .key(key)
            .body(b"{}".to_vec().into())
            .send()
            .await
            .unwrap();
    }
    let mut env = q.env().to_vec();
    env.push(("ARCHIVE_BUCKET", "archive"));
    let ui = Ui::start(&moto, &env);
    let cookie = ui.open().await;
    let health = ui.get("/health", Some(&cookie)).await;
    assert_eq!(health.status, 200, "{}", health.text());
    let html = health.text();
    assert!(
        html.contains("<dt>Newest sealed period</dt><dd><time datetime=\"2026-11-23T11:00:00Z\""),
        "{html}"
    );
    assert!(
        html.contains("<strong>behind</strong>"),
        "a day without a seal: {html}"
    );
    assert!(
        html.contains("<strong>1 tamper record object(s)</strong>") && html.contains(&tamper),
        "{html}"
    );
    let bodies = q.access_events().await;
    let arguments = crate::access::assert_access_event(&bodies[0], "auditctl.ui.view", "archive");
    assert_eq!(arguments["page"], "health");
    // An event's period is that of its receivedAt (where the archiver writes it): received a
    // second after its auditTime, as the table holds it.
    let client = moto.client();
    for item in scan(&client, TABLE).await {
        let Some(aws_sdk_dynamodb::types::AttributeValue::S(time)) = item.get("auditTime") else {
            continue;
        };
        let mut item = item.clone();
        let received =
            chrono::DateTime::parse_from_rfc3339(time).unwrap() + chrono::Duration::seconds(1);
        item.insert(
            "receivedAt".into(),
            aws_sdk_dynamodb::types::AttributeValue::S(
                received
                    .to_utc()
                    .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            ),
        );
        client
            .put_item()
            .table_name(TABLE)
            .set_item(Some(item))
            .send()
            .await
            .unwrap();
    }
    let sealed = ui.get("/event?id=e-23-05", Some(&cookie)).await.text();
    assert!(
        sealed.contains("Sealed: its period 2026-11-23T10:00:00Z – 2026-11-23T11:00:00Z has its signed digest digest/dt=2026-11-23/hour=10/p1795428000.json"),
        "{sealed}"
    );
    assert!(
        sealed
            .contains("auditctl verify --from 2026-11-23T10:00:00Z --to 2026-11-23T10:59:59.999Z"),
        "{sealed}"
    );
    let missing = ui.get("/event?id=e-22-05", Some(&cookie)).await.text();
    assert!(
        missing.contains("No digest: its period 2026-11-22T10:00:00Z"),
        "{missing}"
    );
}

#[tokio::test]
async fn pages_of_a_busy_hour_read_each_shard_on_demand_and_lose_no_event() {
    let moto = Moto::start();
    // 400 events in one hour, three at each instant: about 12 in each of the 32 shards, more than
    // a shard's first page (8) on a time search, so shards are read on as pages go.
    let events: Vec<Event> = (0..400u32)
        .map(|i| Event {
            id: format!("busy-{i:03}"),
            time: format!("2026-11-22T10:{:02}:{:02}.000Z", (i / 3) / 60, (i / 3) % 60),
            ..Event::default()
        })
        .collect();
    write_events(&moto, &events).await;
    let q = queues(&moto).await;
    let ui = Ui::start(&moto, &q.env());
    let cookie = ui.open().await;
    let (ids, pages) = all_rows(
        &ui,
        &cookie,
        "from=2026-11-22T10:00:00Z&to=2026-11-22T10:59:59.999Z",
    )
    .await;
    assert_eq!(pages, 8, "400 rows in pages of 50");
    assert_eq!(ids, newest_first(expected(&events, |_| true)));
}
