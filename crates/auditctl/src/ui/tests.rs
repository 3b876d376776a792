//! The viewer's handlers without a browser or a network: requests built in memory, an access
//! log twin that records or refuses, and a reader that fails at once if anything reads.

use std::sync::{Arc, Mutex};

use http::header::{COOKIE, HOST, LOCATION, SET_COOKIE};
use serde_json::Map;

use super::*;
use crate::access::{AccessError, AccessEvent, Caller};
use crate::stack::StackTags;

const QUEUE_URL: &str = "https://sqs.us-east-1.amazonaws.com/123456789012/AuditAccessQueue";
const QUEUE_ARN: &str = "arn:aws:sqs:us-east-1:123456789012:AuditAccessQueue";

/// The access log: the stack's queue, and a send that succeeds (kept) or is refused.
#[derive(Clone)]
struct Twin {
    sent: Arc<Mutex<Vec<AccessEvent>>>,
    refuse: bool,
    /// Times the table's tags were read (the access queue checked).
    checks: Arc<std::sync::atomic::AtomicUsize>,
}

impl AccessLog for Twin {
    async fn caller(&self) -> Result<Caller, AccessError> {
        Ok(Caller {
            arn: "arn:aws:iam::123456789012:user/alice".into(),
            user_id: "AIDAEXAMPLE".into(),
        })
    }
    fn queue_url(&self) -> &str {
        QUEUE_URL
    }
    fn queue_arn(&self) -> Result<String, AccessError> {
        Ok(QUEUE_ARN.into())
    }
    async fn stack_tags(&self, _table: &str) -> Result<StackTags, AccessError> {
        self.checks
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(StackTags {
            access_queue_arn: Some(QUEUE_ARN.into()),
            receiver_role_id: None,
        })
    }
    async fn send(&self, event: &AccessEvent) -> Result<(), AccessError> {
        if self.refuse {
            return Err(AccessError::Denied {
                url: QUEUE_URL.into(),
                detail: "AccessDenied: not authorized to perform sqs:SendMessage".into(),
            });
        }
        self.sent.lock().unwrap().push(event.clone());
        Ok(())
    }
}

/// A reader whose every request fails at once (no region, no endpoint); its stats count what
/// was asked of it.
fn reader() -> Reader {
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
        .build();
    Reader::new(
        aws_sdk_dynamodb::Client::from_conf(config),
        "AuditMessages",
        "nowhere",
    )
}

const HOST_PORT: &str = "127.0.0.1:4321";

fn viewer(refuse: bool) -> (Viewer<Twin>, Arc<Mutex<Vec<AccessEvent>>>) {
    let sent = Arc::new(Mutex::new(Vec::new()));
    let twin = Twin {
        sent: sent.clone(),
        refuse,
        checks: Arc::default(),
    };
    let session = Session::new(HOST_PORT.parse().unwrap()).unwrap();
    let viewer = Viewer::new(
        reader(),
        "AuditMessages".into(),
        "nowhere".into(),
        Recorder::new(Some(twin), false, Map::new()),
        session,
    );
    (viewer, sent)
}

fn request(method: Method, uri: &str, cookie: Option<&str>) -> Request<Bytes> {
    let mut builder = Request::builder()
        .method(method)
        .uri(uri)
        .header(HOST, HOST_PORT);
    if let Some(cookie) = cookie {
        builder = builder.header(COOKIE, cookie);
    }
    builder.body(Bytes::new()).unwrap()
}

async fn body(response: Response<Body>) -> String {
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// Opens the viewer's URL: the cookie it sets.
async fn open(viewer: &Viewer<Twin>) -> String {
    let url = viewer.url();
    let path = &url[url.find("/?").unwrap()..];
    let response = viewer.respond(request(Method::GET, path, None)).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(response.headers()[LOCATION], "/");
    let cookie = response.headers()[SET_COOKIE].to_str().unwrap();
    cookie.split(';').next().unwrap().to_owned()
}

#[tokio::test]
async fn without_the_token_or_its_cookie_nothing_is_served_and_the_token_works_once() {
    let (viewer, sent) = viewer(false);
    for path in [
        "/",
        "/rows",
        "/event?id=x",
        "/export.csv",
        "/assets/viewer.js",
    ] {
        let response = viewer.respond(request(Method::GET, path, None)).await;
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{path}");
        assert!(
            body(response)
                .await
                .contains("open the URL that auditctl ui printed")
        );
    }
    let cookie = open(&viewer).await;
    let url = viewer.url();
    let again = viewer
        .respond(request(Method::GET, &url[url.find("/?").unwrap()..], None))
        .await;
    assert_eq!(again.status(), StatusCode::FORBIDDEN);
    assert!(body(again).await.contains("token has expired"));
    let js = viewer
        .respond(request(Method::GET, "/assets/viewer.js", Some(&cookie)))
        .await;
    assert_eq!(js.status(), StatusCode::OK);
    assert_eq!(body(js).await, JS);
    assert!(sent.lock().unwrap().is_empty(), "no search yet");
}

#[tokio::test]
async fn bad_input_is_a_400_naming_the_fix_and_neither_records_nor_reads() {
    let (viewer, sent) = viewer(false);
    let cookie = open(&viewer).await;
    for (path, says) in [
        (
            "/?from=2026-11-22T10:00:00&to=nonsense",
            "--to &#39;nonsense&#39;",
        ),
        (
            "/?from=2026-11-23T00:00:00Z&to=2026-11-22T00:00:00Z",
            "is after --to",
        ),
        ("/?actr=alice", "unknown filter &#39;actr&#39;"),
        ("/?by=colour&actor=a", "by &#39;colour&#39;"),
        ("/?source_ip=999.1.1.1", "source_ip &#39;999.1.1.1&#39;"),
        (
            "/rows?cursor=2026-11-22T10:00:00Z",
            "is not where a page ended",
        ),
        ("/export.jsonl?colour=red", "unknown filter"),
        ("/event", "needs id"),
    ] {
        let response = viewer
            .respond(request(Method::GET, path, Some(&cookie)))
            .await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{path}");
        let html = body(response).await;
        assert!(html.contains(says), "{path}: {html}");
        assert_eq!(viewer.reader.stats.requests(), 0, "{path}: nothing read");
    }
    // The form shows what was sent, to correct it.
    let html = body(
        viewer
            .respond(request(
                Method::GET,
                "/?actor=al%3Cice&range=2w",
                Some(&cookie),
            ))
            .await,
    )
    .await;
    assert!(html.contains(r#"name="actor" value="al&lt;ice""#), "{html}");
    assert!(sent.lock().unwrap().is_empty());
    let post = viewer
        .respond(request(Method::POST, "/", Some(&cookie)))
        .await;
    assert_eq!(post.status(), StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn a_read_whose_access_event_cannot_be_sent_shows_the_error_and_no_data() {
    let (viewer, sent) = viewer(true);
    let cookie = open(&viewer).await;
    for path in [
        "/?range=24h&actor=alice",
        "/rows?cursor=2026-11-22T10:00:00.000Z%7Cm-1",
        "/event?id=m-1",
        "/export.csv?range=7d",
    ] {
        let response = viewer
            .respond(request(Method::GET, path, Some(&cookie)))
            .await;
        assert_eq!(response.status(), StatusCode::BAD_GATEWAY, "{path}");
        let html = body(response).await;
        assert!(
            html.contains("access not recorded, so nothing was read: not allowed to send"),
            "{path}: {html}"
        );
        assert_eq!(viewer.reader.stats.requests(), 0, "{path}: nothing read");
        assert!(!html.contains("<tbody"), "{path}");
    }
    assert!(sent.lock().unwrap().is_empty());
}

#[tokio::test]
async fn each_read_records_its_access_event_first_with_what_it_asked_for() {
    let (viewer, sent) = viewer(false);
    let cookie = open(&viewer).await;
    // The reader fails (nowhere): the access event was sent before it was asked.
    let response = viewer
        .respond(request(
            Method::GET,
            "/?from=2026-11-22T10:00&to=2026-11-22T11:00&actor=alice&outcome=failure",
            Some(&cookie),
        ))
        .await;
    assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
    let html = body(response).await;
    assert!(
        html.contains("Retry"),
        "a failed AWS call offers a retry: {html}"
    );
    viewer
        .respond(request(Method::GET, "/event?id=m%201", Some(&cookie)))
        .await;
    viewer
        .respond(request(
            Method::GET,
            "/export.jsonl?range=24h",
            Some(&cookie),
        ))
        .await;
    let Recorder::Send { log, .. } = &viewer.access else {
        panic!("a recorder that sends");
    };
    assert_eq!(
        log.checks.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the access queue is checked once, each access sent"
    );
    let sent = sent.lock().unwrap();
    let bodies: Vec<Value> = sent
        .iter()
        .map(|e| serde_json::from_str(&e.body).unwrap())
        .collect();
    let actions: Vec<&str> = bodies
        .iter()
        .map(|b| b["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "auditctl.ui.search",
            "auditctl.ui.view",
            "auditctl.ui.export"
        ]
    );
    let search = &bodies[0]["arguments"];
    assert_eq!(search["actor"], "alice");
    assert_eq!(search["outcome"], "failure");
    assert_eq!(search["from"], "2026-11-22T10:00:00.000Z");
    assert_eq!(bodies[1]["arguments"]["messageId"], "m 1");
    assert_eq!(bodies[2]["arguments"]["format"], "jsonl");
    assert!(bodies.iter().all(|b| b["resource"] == "AuditMessages"));
}
