//! The viewer's handlers without a browser or a network: requests built in memory, an access
//! log twin that records or refuses, and a reader that fails at once if anything reads.

use std::sync::{Arc, Mutex};

use http::header::{COOKIE, HOST, LOCATION, SET_COOKIE};
use serde_json::Map;

use super::*;
use audit_trail::access::{AccessError, AccessEvent, Caller};
use audit_trail::stack::StackTags;

const QUEUE_URL: &str = "https://sqs.us-east-1.amazonaws.com/123456789012/AuditAccessQueue";
const QUEUE_ARN: &str = "arn:aws:sqs:us-east-1:123456789012:AuditAccessQueue";

/// The access log: the stack's queue, and a send that succeeds (kept) or is refused.
#[derive(Clone)]
struct Twin {
    sent: Arc<Mutex<Vec<AccessEvent>>>,
    refuse: bool,
    /// Refuses once this many were sent (a queue that stops taking events).
    takes: Option<usize>,
    /// Times the table's tags were read (the access queue checked).
    checks: Arc<std::sync::atomic::AtomicUsize>,
    /// The table's hot window its tags name (`audit:retention-days`).
    retention_days: Option<u32>,
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
            retention_days: self.retention_days,
        })
    }
    async fn send(&self, event: &AccessEvent) -> Result<(), AccessError> {
        if self.refuse
            || self
                .takes
                .is_some_and(|n| self.sent.lock().unwrap().len() >= n)
        {
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
    viewer_taking(refuse, None)
}

/// The bodies of the access events sent, in order.
fn actions(sent: &Arc<Mutex<Vec<AccessEvent>>>) -> Vec<Value> {
    sent.lock()
        .unwrap()
        .iter()
        .map(|e| serde_json::from_str(&e.body).unwrap())
        .collect()
}

/// Each access event's action and outcome.
fn outcomes(bodies: &[Value]) -> Vec<(&str, &str)> {
    bodies
        .iter()
        .map(|b| {
            (
                b["action"].as_str().unwrap(),
                b["outcome"].as_str().unwrap(),
            )
        })
        .collect()
}

/// A viewer whose access log refuses (`refuse`), or takes `takes` events and then refuses.
fn viewer_taking(
    refuse: bool,
    takes: Option<usize>,
) -> (Viewer<Twin>, Arc<Mutex<Vec<AccessEvent>>>) {
    let sent = Arc::new(Mutex::new(Vec::new()));
    let twin = Twin {
        sent: sent.clone(),
        refuse,
        takes,
        checks: Arc::default(),
        retention_days: None,
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
    request_with(method, uri, cookie, None, "")
}

/// A request with `origin` and the body `form`.
fn request_with(
    method: Method,
    uri: &str,
    cookie: Option<&str>,
    origin: Option<&str>,
    form: &str,
) -> Request<Bytes> {
    let mut builder = Request::builder()
        .method(method)
        .uri(uri)
        .header(HOST, HOST_PORT);
    if let Some(cookie) = cookie {
        builder = builder.header(COOKIE, cookie);
    }
    if let Some(origin) = origin {
        builder = builder.header(http::header::ORIGIN, origin);
    }
    builder.body(Bytes::from(form.to_owned())).unwrap()
}

/// This viewer's own origin, as its pages' POSTs carry it.
const OWN_ORIGIN: &str = "http://127.0.0.1:4321";

async fn body(response: Response<Body>) -> String {
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// `path` under `viewer`'s run secret (its URL's first segment), as its pages' links resolve.
fn at<L: audit_trail::access::AccessLog + 'static, B: audit_aws::s3::Bucket + 'static>(
    viewer: &Viewer<L, B>,
    path: &str,
) -> String {
    let url = viewer.url();
    let after_host = &url["http://".len()..];
    let secret = &after_host[after_host.find('/').unwrap()..after_host.find("/?").unwrap()];
    format!("{secret}{path}")
}

/// Opens the viewer's URL: the cookie it sets.
async fn open<B: audit_aws::s3::Bucket + 'static>(viewer: &Viewer<Twin, B>) -> String {
    let url = viewer.url();
    let path = &url[url.find("/?").unwrap()..];
    let response = viewer
        .respond(request(Method::GET, &at(viewer, path), None))
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(response.headers()[LOCATION], at(viewer, "/"));
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
        "/evidence.zip?range=24h",
        "/health?run=1",
        "/assets/viewer.js",
    ] {
        let response = viewer
            .respond(request(Method::GET, &at(&viewer, path), None))
            .await;
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
        .respond(request(
            Method::GET,
            &at(&viewer, &url[url.find("/?").unwrap()..]),
            None,
        ))
        .await;
    assert_eq!(again.status(), StatusCode::FORBIDDEN);
    assert!(body(again).await.contains("token has expired"));
    let js = viewer
        .respond(request(
            Method::GET,
            &at(&viewer, "/assets/viewer.js"),
            Some(&cookie),
        ))
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
        ("/?from=2026-11-22T10:00:00&to=nonsense", "--to 'nonsense'"),
        (
            "/?from=2026-11-23T00:00:00Z&to=2026-11-22T00:00:00Z",
            "is after --to",
        ),
        ("/?actr=alice", "unknown filter 'actr'"),
        ("/?by=colour&actor=a", "by 'colour'"),
        ("/?source_ip=999.1.1.1", "source_ip '999.1.1.1'"),
        (
            "/rows?cursor=2026-11-22T10:00:00Z",
            "is not where a page ended",
        ),
        ("/export.jsonl?colour=red", "unknown filter"),
        ("/event", "needs id"),
    ] {
        let response = viewer
            .respond(request(Method::GET, &at(&viewer, path), Some(&cookie)))
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
                &at(&viewer, "/?actor=al%3Cice&range=2w"),
                Some(&cookie),
            ))
            .await,
    )
    .await;
    assert!(html.contains(r#"name="actor" value="al&lt;ice""#), "{html}");
    assert!(sent.lock().unwrap().is_empty());
    let post = viewer
        .respond(request_with(
            Method::POST,
            &at(&viewer, "/"),
            Some(&cookie),
            Some(OWN_ORIGIN),
            "",
        ))
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
            .respond(request(Method::GET, &at(&viewer, path), Some(&cookie)))
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
            &at(
                &viewer,
                "/?from=2026-11-22T10:00&to=2026-11-22T11:00&actor=alice&outcome=failure",
            ),
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
        .respond(request(
            Method::GET,
            &at(&viewer, "/event?id=m%201"),
            Some(&cookie),
        ))
        .await;
    viewer
        .respond(request(
            Method::GET,
            &at(&viewer, "/export.jsonl?range=24h"),
            Some(&cookie),
        ))
        .await;
    let Recorder::Send { log, .. } = &*viewer.access else {
        panic!("a recorder that sends");
    };
    assert_eq!(
        log.checks.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the access queue is checked once, each access sent"
    );
    let bodies = actions(&sent);
    // Each read failed after its access event (outcome success): a second one says so.
    assert_eq!(
        outcomes(&bodies),
        [
            ("auditctl.ui.search", "success"),
            ("auditctl.ui.search", "failure"),
            ("auditctl.ui.view", "success"),
            ("auditctl.ui.view", "failure"),
            ("auditctl.ui.export", "success"),
            ("auditctl.ui.export", "failure"),
        ]
    );
    for pair in bodies.chunks(2) {
        let (first, failure) = (&pair[0], &pair[1]);
        assert_eq!(failure["accessEventId"], first["messageId"], "{failure}");
        assert_eq!(failure["arguments"], first["arguments"], "{failure}");
        assert!(
            failure["error"]["kind"]
                .as_str()
                .is_some_and(|k| !k.is_empty())
                && failure["error"]["text"]
                    .as_str()
                    .is_some_and(|t| !t.is_empty()),
            "{failure}"
        );
    }
    let search = &bodies[0]["arguments"];
    assert_eq!(search["actor"], "alice");
    assert_eq!(search["outcome"], "failure");
    assert_eq!(search["from"], "2026-11-22T10:00:00.000Z");
    assert_eq!(bodies[2]["arguments"]["messageId"], "m 1");
    assert_eq!(bodies[4]["arguments"]["format"], "jsonl");
    assert!(bodies.iter().all(|b| b["resource"] == "AuditMessages"));
}

#[tokio::test]
async fn a_failed_read_whose_failure_record_cannot_be_sent_shows_its_error_and_says_so() {
    // The access queue takes the access event, then refuses the failure event.
    let (viewer, sent) = viewer_taking(false, Some(1));
    let cookie = open(&viewer).await;
    let response = viewer
        .respond(request(
            Method::GET,
            &at(&viewer, "/event?id=m-1"),
            Some(&cookie),
        ))
        .await;
    assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
    let html = body(response).await;
    let first: Value = serde_json::from_str(&sent.lock().unwrap()[0].body).unwrap();
    assert_eq!(first["outcome"], "success");
    assert!(
        html.contains(&format!(
            "note: the failure record of this read was not sent, so the trail holds only its access event {} (outcome success): not allowed to send to the access queue {QUEUE_URL}: AccessDenied",
            first["messageId"].as_str().unwrap()
        )),
        "{html}"
    );
    assert_eq!(sent.lock().unwrap().len(), 1);
}

// ---- the health page: verify on request, and the log's newest checkpoint --------------------

mod health_checks {
    use super::*;
    use crate::archive::KeyFetch;
    use audit_aws::error::AwsError;
    use audit_aws::kms::MemoryKey as TestKey;
    use audit_aws::s3::MemoryBucket;
    use audit_aws::s3::memory::{Effect, Fault, Operation};
    use audit_model::archive::{ObjectKind, Period, PeriodLength};
    use audit_model::digest::digest_key;
    use audit_model::note::{
        Checkpoint, NoteSignature, SignedNote, WitnessKey, checkpoint_key, cosignature_key,
        cosigned_message, cosigner_key_id, ecdsa_key_id, origin,
    };
    use audit_proof::archive::S3Archive;

    type MemoryArchive = S3Archive<MemoryBucket>;

    /// Lines gzip-compressed as the archiver writes them.
    fn gzip_lines(lines: &[String]) -> Vec<u8> {
        audit_archiver::encode::gzip_lines(lines.iter().map(String::as_str)).unwrap()
    }

    /// Writes an archive object as the archiver does: first the marker that attests it (its key
    /// and SHA-256), then the object naming the marker; its key.
    fn write_object(
        bucket: &MemoryBucket,
        kind: ObjectKind,
        at: chrono::DateTime<Utc>,
        length: PeriodLength,
        sequence: u64,
        lines: &[String],
    ) -> String {
        use audit_archiver::marker::{Confirmed, Marker, RunEntry, marker_key};
        let key = audit_model::archive::ObjectKey::new(kind, at, length, &sequence.to_string(), 0)
            .unwrap()
            .to_string();
        let body = Bytes::from(gzip_lines(lines));
        let run: Vec<RunEntry> = (0..lines.len() as u64)
            .map(|i| {
                RunEntry(
                    (sequence + i).to_string(),
                    format!("event-{}", sequence + i),
                )
            })
            .collect();
        let marker = marker_key(&run[0], 0).unwrap();
        let confirmed = Confirmed {
            key: key.clone(),
            event_ids: run.iter().map(|e| e.event_id().to_owned()).collect(),
            sha256: audit_model::digest::hex(&audit_model::digest::sha256(&body)),
        };
        let json = Marker::new(run, &[confirmed], at.timestamp_millis() + 30_000).to_json();
        bucket.overwrite_with(&marker, Bytes::from(json), Vec::new());
        bucket.overwrite_with(
            &key,
            body,
            vec![
                ("events", lines.len().to_string()),
                (audit_model::archive::MARKER_METADATA, marker),
            ],
        );
        key
    }

    /// The archiver's own sealer, run when `period` becomes sealable: the archive's due periods
    /// sealed, with the transparency log.
    async fn seal(bucket: &MemoryBucket, period: Period, key: &TestKey) {
        let report = audit_archiver::seal::Sealer {
            bucket,
            signer: key,
            bucket_name: "archive",
            period: period.length,
        }
        .run(
            chrono::DateTime::from_timestamp(period.sealable_at(), 0).unwrap(),
            audit_archiver::budget::Budget::unlimited(),
        )
        .await;
        assert!(report.failure.is_none(), "{report:?}");
    }
    use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair};

    const ARN: &str = "arn:aws:kms:us-east-1:123456789012:key/digest";

    /// The viewer over an archive twin named `archive` (hourly periods), with the digest key's
    /// public key when `key`; the key signs as KMS does.
    fn viewer(
        refuse: bool,
        key: bool,
    ) -> (
        Viewer<Twin, MemoryBucket>,
        Arc<Mutex<Vec<AccessEvent>>>,
        TestKey,
    ) {
        witnessed_viewer(refuse, key, Vec::new())
    }

    /// As `viewer`, given the keys of `witnesses` (`auditctl ui --witness-key`).
    fn witnessed_viewer(
        refuse: bool,
        key: bool,
        witnesses: Vec<WitnessKey>,
    ) -> (
        Viewer<Twin, MemoryBucket>,
        Arc<Mutex<Vec<AccessEvent>>>,
        TestKey,
    ) {
        let (plain, sent) = super::viewer(refuse);
        let signer = TestKey::new(ARN);
        let info = signer.public_key();
        let fetch: KeyFetch = Arc::new(move || {
            let info = info.clone();
            Box::pin(async move { Ok(info) })
        });
        let viewer = Viewer {
            reader: plain.reader,
            table: plain.table,
            location: plain.location,
            access: plain.access,
            session: plain.session,
            dead_letters: None,
            archive: None,
            attestations: None,
            hot_days: tokio::sync::OnceCell::new(),
            words: own_words,
        }
        .with_archive(archive::Archive {
            bucket: S3Archive::over(MemoryBucket::new(), "archive", "memory"),
            name: "archive".into(),
            length: PeriodLength::default(),
            key: key.then_some(fetch),
            witnesses,
        });
        (viewer, sent, signer)
    }

    /// An evidence bundle whose making fails after its access was recorded (the digest key is
    /// gone): the page says so and the trail holds the access event and its failure event.
    #[tokio::test]
    async fn an_evidence_bundle_that_fails_records_its_failure() {
        let (mut viewer, sent, _) = viewer(false, true);
        let gone: KeyFetch = Arc::new(|| {
            Box::pin(async {
                Err(audit_proof::Error::KeyNotFound {
                    key: ARN.into(),
                    at: "memory".into(),
                })
            })
        });
        let mut archive = Arc::try_unwrap(viewer.archive.take().unwrap())
            .ok()
            .expect("the viewer's only handle");
        archive.key = Some(gone);
        let viewer = viewer.with_archive(archive);
        let cookie = open(&viewer).await;
        let response = viewer
            .respond(request(
                Method::GET,
                &at(&viewer, "/evidence.zip?range=24h"),
                Some(&cookie),
            ))
            .await;
        assert_ne!(response.status(), StatusCode::OK);
        let html = body(response).await;
        assert!(html.contains("Evidence bundle failed"), "{html}");
        let bodies = actions(&sent);
        assert_eq!(
            outcomes(&bodies),
            [
                ("auditctl.ui.export", "success"),
                ("auditctl.ui.export", "failure")
            ]
        );
        assert_eq!(bodies[1]["accessEventId"], bodies[0]["messageId"]);
        assert_eq!(bodies[1]["error"]["kind"], "key_not_found", "{}", bodies[1]);
    }

    /// A table that keeps items one day (RetentionDays 1): a search of three days ago reads the
    /// archive (a sealed hour through its index, the open hour by listing), never the table
    /// (whose reader fails at once), filters and orders what it reads, and says so; a viewer
    /// without the archive says what to set.
    #[tokio::test]
    async fn a_search_before_the_tables_hot_window_reads_the_archive_and_says_so() {
        let (plain, sent) = super::viewer(false);
        let Recorder::Send { log, .. } = Arc::try_unwrap(plain.access).ok().unwrap() else {
            unreachable!()
        };
        let twin = Twin {
            retention_days: Some(1),
            ..log
        };
        let signer = TestKey::new(ARN);
        let viewer = Viewer::new(
            reader(),
            "AuditMessages".into(),
            "nowhere".into(),
            Recorder::new(Some(twin.clone()), false, Map::new()),
            plain.session,
        );
        let unarchived = Viewer::new(
            reader(),
            "AuditMessages".into(),
            "nowhere".into(),
            Recorder::new(Some(twin), false, Map::new()),
            Session::new(HOST_PORT.parse().unwrap()).unwrap(),
        );
        let viewer = viewer.with_archive(archive::Archive {
            bucket: S3Archive::over(MemoryBucket::new(), "archive", "memory"),
            name: "archive".into(),
            length: PeriodLength::default(),
            key: None,
            witnesses: Vec::new(),
        });
        let bucket: &MemoryBucket = archive(&viewer);
        let old = Utc::now() - chrono::Duration::days(3);
        let line = |id: &str, seconds: i64, actor: &str| {
            format!(
                r#"{{"action":"user.login","actor":"{actor}","auditTime":"{}","messageId":"{id}"}}"#,
                (old + chrono::Duration::seconds(seconds))
                    .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
            )
        };
        let hour = sealed_hour();
        let at = chrono::DateTime::from_timestamp(hour.start + 60, 0).unwrap();
        write_object(
            bucket,
            ObjectKind::Trail,
            at,
            hour.length,
            100,
            &[line("old-a", 1, "carol"), line("old-b", 2, "dave")],
        );
        seal(bucket, hour, &signer).await;
        // Received now, in the open hour: listed.
        write_object(
            bucket,
            ObjectKind::Trail,
            Utc::now(),
            hour.length,
            200,
            &[line("old-c", 3, "carol")],
        );
        let cookie = open(&viewer).await;
        let range = |from: i64, to: i64| {
            format!(
                "from={}&to={}",
                (old + chrono::Duration::seconds(from))
                    .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                (old + chrono::Duration::seconds(to))
                    .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
            )
            .replace('+', "%2B")
        };
        let (status, html) = get(&viewer, &cookie, &format!("/?{}", range(-60, 60))).await;
        assert_eq!(status, StatusCode::OK, "{html}");
        let (a, b, c) = (
            html.find("old-a").expect("old-a"),
            html.find("old-b").expect("old-b"),
            html.find("old-c").expect("old-c"),
        );
        assert!(c < b && b < a, "newest first");
        assert!(
            html.contains("are read from the archive: the table keeps 1 day(s)"),
            "{html}"
        );
        let (status, html) = get(
            &viewer,
            &cookie,
            &format!("/?{}&actor=carol&by=time", range(-60, 60)),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{html}");
        assert!(html.contains("old-a") && html.contains("old-c") && !html.contains("old-b"));
        assert_eq!(actions(&sent).len(), 2);

        let cookie = open(&unarchived).await;
        let (status, html) = get(&unarchived, &cookie, &format!("/?{}", range(-60, 60))).await;
        assert_ne!(status, StatusCode::OK);
        assert!(
            html.contains("start auditctl ui with ARCHIVE_BUCKET or --bucket"),
            "{html}"
        );
    }

    fn archive(viewer: &Viewer<Twin, MemoryBucket>) -> &MemoryArchive {
        &viewer.archive.as_ref().unwrap().bucket
    }

    /// The hour three hours ago: sealed long since.
    fn sealed_hour() -> Period {
        PeriodLength::default().period_of(Utc::now() - chrono::Duration::hours(3))
    }

    fn stamp(seconds: i64) -> String {
        chrono::DateTime::from_timestamp_millis(seconds * 1000)
            .unwrap()
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    }

    /// The health page's verify of `period`.
    fn run_over(period: Period) -> String {
        format!(
            "/health?from={}&to={}&run=1",
            stamp(period.start),
            stamp(period.end() - 1).replace(".000Z", ".999Z")
        )
    }

    async fn get(
        viewer: &Viewer<Twin, MemoryBucket>,
        cookie: &str,
        path: &str,
    ) -> (StatusCode, String) {
        let response = viewer
            .respond(request(Method::GET, &at(viewer, path), Some(cookie)))
            .await;
        (response.status(), body(response).await)
    }

    /// A POST of `path`'s query as a form, from `origin`.
    async fn post_from(
        viewer: &Viewer<Twin, MemoryBucket>,
        cookie: &str,
        path: &str,
        origin: Option<&str>,
    ) -> (StatusCode, String) {
        let (path, form) = path.split_once('?').unwrap_or((path, ""));
        let response = viewer
            .respond(request_with(
                Method::POST,
                &at(viewer, path),
                Some(cookie),
                origin,
                form,
            ))
            .await;
        (response.status(), body(response).await)
    }

    /// A POST of `path`'s query as a form, from the viewer's own page.
    async fn post(
        viewer: &Viewer<Twin, MemoryBucket>,
        cookie: &str,
        path: &str,
    ) -> (StatusCode, String) {
        post_from(viewer, cookie, path, Some(OWN_ORIGIN)).await
    }

    #[tokio::test]
    async fn verify_runs_over_the_periods_in_view_and_says_what_it_checked_and_each_problem() {
        let (viewer, sent, key) = viewer(false, true);
        let cookie = open(&viewer).await;
        let period = sealed_hour();
        let lines = vec![r#"{"messageId":"m-1","auditTime":"x"}"#.to_owned()];
        let object = write_object(
            archive(&viewer),
            ObjectKind::Trail,
            chrono::DateTime::from_timestamp(period.start + 60, 0).unwrap(),
            PeriodLength::default(),
            1,
            &lines,
        );
        seal(archive(&viewer), period, &key).await;

        let (status, html) = post(&viewer, &cookie, &run_over(period)).await;
        assert_eq!(status, StatusCode::OK, "{html}");
        assert!(html.contains("verified: no problem"), "{html}");
        assert!(html.contains("periods   1 checked: 1 sealed"), "{html}");
        assert!(
            html.contains("objects   1 checked (1 trail, 0 tamper)"),
            "{html}"
        );
        assert!(html.contains("events    1 checked"), "{html}");
        assert!(!html.contains("trail     "), "{html}");
        // From the period before the trail's first: counted from the first, and said once.
        let before = Period {
            start: period.start - i64::from(period.length.seconds()),
            length: period.length,
        };
        let over_both = format!(
            "/health?from={}&to={}&run=1",
            stamp(before.start),
            stamp(period.end() - 1).replace(".000Z", ".999Z")
        );
        let (status, both) = post(&viewer, &cookie, &over_both).await;
        assert_eq!(status, StatusCode::OK, "{both}");
        assert!(both.contains("verified: no problem"), "{both}");
        assert!(both.contains("periods   1 checked: 1 sealed"), "{both}");
        assert!(
            both.contains(&format!(
                "trail     the range starts before the trail: its first period is {} (digest {}); the 1 period(s) before it are not counted",
                stamp(period.start).replace(".000Z", "Z"),
                audit_model::digest::digest_key(period)
            )),
            "{both}"
        );
        assert!(
            html.contains(r#"<option value="" selected>From and to</option>"#)
                && html.contains(&format!(r#"name="from" value="{}""#, stamp(period.start))),
            "the form shows the periods in view: {html}"
        );

        // The object written over after its seal: verify names it, with the kind.
        archive(&viewer).overwrite_with(
            &object,
            Bytes::from_static(b"forged"),
            vec![("events", "1".into())],
        );
        let (status, html) = post(&viewer, &cookie, &run_over(period)).await;
        assert_eq!(status, StatusCode::OK, "{html}");
        assert!(!html.contains("verified: no problem"), "{html}");
        assert!(html.contains("1 problem(s) found"), "{html}");
        assert!(
            html.contains(&format!(
                r#"<li><strong class="kind">object changed</strong> <code class="wrap">{object}</code>"#
            )),
            "{html}"
        );

        // Each run was recorded first, as auditctl.ui.verify with the range.
        let bodies = actions(&sent);
        assert_eq!(bodies.len(), 3);
        for (body, from) in bodies.iter().zip([period, before, period]) {
            assert_eq!(body["action"], "auditctl.ui.verify");
            assert_eq!(body["resource"], "archive");
            assert_eq!(body["arguments"]["from"], stamp(from.start));
        }
        // Without run=1 the page does not verify, and records a view.
        let (status, html) = get(&viewer, &cookie, "/health").await;
        assert_eq!(status, StatusCode::OK, "{html}");
        assert!(!html.contains("Verify ran over"), "{html}");
        assert!(html.contains(r#"name="run" value="1">Verify these periods"#));
        assert_eq!(actions(&sent)[3]["action"], "auditctl.ui.view");
    }

    /// The log's head that cannot be read (its checkpoints cannot be listed): the page shows the
    /// rest and says why, and the view's failure event is sent after its access event.
    #[tokio::test]
    async fn a_log_head_that_cannot_be_read_is_shown_and_records_the_views_failure() {
        let (viewer, sent, key) = viewer(false, true);
        let cookie = open(&viewer).await;
        seal(archive(&viewer), sealed_hour(), &key).await;
        archive(&viewer).inject(Fault {
            operation: Operation::List,
            prefix: audit_model::note::CHECKPOINTS_PREFIX.into(),
            times: None,
            effect: Effect::Fail(AwsError::from_answer(503, "SlowDown", "injected")),
        });
        let (status, html) = get(&viewer, &cookie, "/health").await;
        assert_eq!(status, StatusCode::OK, "{html}");
        assert!(html.contains("SlowDown"), "{html}");
        let bodies = actions(&sent);
        assert_eq!(
            outcomes(&bodies),
            [
                ("auditctl.ui.view", "success"),
                ("auditctl.ui.view", "failure")
            ]
        );
        assert_eq!(bodies[1]["accessEventId"], bodies[0]["messageId"]);
    }

    /// Verify costs: a GET that asks for it, or a POST from no or another origin, runs nothing
    /// and records nothing.
    #[tokio::test]
    async fn verify_runs_only_on_a_post_from_the_viewers_own_page() {
        let (viewer, sent, key) = viewer(false, true);
        let cookie = open(&viewer).await;
        let period = sealed_hour();
        seal(archive(&viewer), period, &key).await;
        let (status, html) = get(&viewer, &cookie, &run_over(period)).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{html}");
        assert!(html.contains("verify runs on a POST"), "{html}");
        for origin in [None, Some("http://127.0.0.1:4322"), Some("null")] {
            let (status, html) = post_from(&viewer, &cookie, &run_over(period), origin).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{origin:?}: {html}");
            assert!(html.contains("Origin is missing or not this viewer's"));
        }
        assert!(actions(&sent).is_empty(), "nothing recorded, nothing run");
        let (status, html) = post(&viewer, &cookie, &run_over(period)).await;
        assert_eq!(status, StatusCode::OK, "{html}");
        assert_eq!(actions(&sent)[0]["action"], "auditctl.ui.verify");
    }

    #[tokio::test]
    async fn a_range_too_long_or_a_bad_parameter_is_a_400_naming_the_fix_and_records_nothing() {
        let (viewer, sent, _) = viewer(false, true);
        let cookie = open(&viewer).await;
        for (path, says) in [
            (
                "/health?from=2026-09-01T00:00:00Z&to=2026-11-01T00:00:00Z&run=1",
                "the page verifies at most 31 days at once; run auditctl verify --from 2026-09-01T00:00:00.000Z --to 2026-11-01T00:00:00.000Z for longer ranges",
            ),
            ("/health?colour=red", "unknown parameter 'colour'"),
            ("/health?run=yes", "run=1 verifies the periods in view"),
            ("/health?from=yesterday&run=1", "--from 'yesterday'"),
        ] {
            let (status, html) = post(&viewer, &cookie, path).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{path}");
            assert!(html.contains(says), "{path}: {html}");
        }
        assert!(sent.lock().unwrap().is_empty(), "nothing recorded");
        // 30 days (a preset) is within the bound.
        let (status, html) = post(&viewer, &cookie, "/health?range=30d&run=1").await;
        assert_eq!(status, StatusCode::OK, "{html}");
    }

    #[tokio::test]
    async fn without_the_digest_key_the_button_says_why_and_a_run_is_refused() {
        let (viewer, sent, _) = viewer(false, false);
        let cookie = open(&viewer).await;
        let (status, html) = get(&viewer, &cookie, "/health").await;
        assert_eq!(status, StatusCode::OK, "{html}");
        assert!(
            html.contains(r#"disabled aria-describedby="why-no-verify""#)
                && html.contains("start auditctl ui with DIGEST_KEY_ID or --key-id"),
            "{html}"
        );
        let (status, html) = post(&viewer, &cookie, "/health?run=1").await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{html}");
        assert!(html.contains("verify needs the digest key"), "{html}");
        assert_eq!(actions(&sent).len(), 1, "the view only");
    }

    #[tokio::test]
    async fn a_verify_whose_access_event_cannot_be_sent_shows_the_error_and_no_data() {
        let (viewer, sent, key) = viewer(true, true);
        let cookie = open(&viewer).await;
        let period = sealed_hour();
        seal(archive(&viewer), period, &key).await;
        let (status, html) = post(&viewer, &cookie, &run_over(period)).await;
        assert_eq!(status, StatusCode::BAD_GATEWAY, "{html}");
        assert!(
            html.contains("access not recorded, so nothing was read: not allowed to send"),
            "{html}"
        );
        for data in [
            "Verify ran over",
            "Newest sealed period",
            "Transparency log",
        ] {
            assert!(!html.contains(data), "{data}: {html}");
        }
        assert!(html.contains("Retry"), "{html}");
        assert!(sent.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_failing_archive_shows_a_retry_and_the_page_stays() {
        let (viewer, _, key) = viewer(false, true);
        let cookie = open(&viewer).await;
        let period = sealed_hour();
        seal(archive(&viewer), period, &key).await;
        archive(&viewer).overwrite(&checkpoint_key(1), Bytes::from(checkpoint(&key, 1)));
        // The key's public key cannot be had: verify does not finish, the page says why.
        let fetch: KeyFetch = Arc::new(|| {
            Box::pin(async {
                Err(audit_proof::Error::Key {
                    key: "k".into(),
                    error: audit_aws::AwsError::without_answer(
                        audit_aws::ErrorKind::Throttled,
                        "throttled",
                    ),
                })
            })
        });
        let mut viewer = viewer;
        let mut archive = Arc::try_unwrap(viewer.archive.take().unwrap())
            .ok()
            .unwrap();
        archive.key = Some(fetch);
        let viewer = viewer.with_archive(archive);
        let (status, html) = post(&viewer, &cookie, &run_over(period)).await;
        assert_eq!(status, StatusCode::BAD_GATEWAY, "{html}");
        assert!(html.contains("Verify did not finish"), "{html}");
        assert!(
            html.contains("throttled") && html.contains("Retry"),
            "{html}"
        );
        assert!(
            html.contains("Newest sealed period"),
            "the rest is shown: {html}"
        );
        assert!(
            html.contains("not checked: reading the public key"),
            "{html}"
        );
    }

    /// The checkpoint of `size` signed by `key` as the sealer signs it (KMS, the log's name the
    /// origin).
    fn checkpoint(key: &TestKey, size: u64) -> String {
        let body = Checkpoint {
            origin: origin("archive"),
            size,
            root: [7; 32],
        }
        .body();
        let der = key.public_key().der;
        SignedNote {
            signatures: vec![NoteSignature {
                name: origin("archive"),
                key_id: ecdsa_key_id(&der),
                signature: key.sign(body.as_bytes()).unwrap(),
            }],
            body,
        }
        .text()
    }

    /// Witness `name`'s key pair (the same for the same name) and its key.
    fn witness(name: &str) -> (Ed25519KeyPair, WitnessKey) {
        let mut seed = [7u8; 32];
        for (i, b) in name.bytes().enumerate() {
            seed[i % 32] ^= b;
        }
        let pair = Ed25519KeyPair::from_seed_unchecked(&seed).unwrap();
        let public: [u8; 32] = pair.public_key().as_ref().try_into().unwrap();
        let key = WitnessKey {
            name: name.to_owned(),
            public,
        };
        (pair, key)
    }

    /// Witness `name`'s cosignature line of `note` at `timestamp`, and its key id.
    fn cosign(note: &str, name: &str, timestamp: u64) -> (String, [u8; 4]) {
        let (pair, key) = witness(name);
        let body = SignedNote::parse(note).unwrap().body;
        let mut signature = timestamp.to_be_bytes().to_vec();
        signature.extend_from_slice(
            pair.sign(cosigned_message(timestamp, &body).as_bytes())
                .as_ref(),
        );
        let key_id = cosigner_key_id(name, &key.public);
        let line = NoteSignature {
            name: name.to_owned(),
            key_id,
            signature,
        }
        .line();
        (line, key_id)
    }

    /// A line naming witness `name` under `key_id` whose signature is junk.
    fn junk_cosignature(name: &str, key_id: [u8; 4]) -> String {
        let mut signature = 1_795_000_000u64.to_be_bytes().to_vec();
        signature.extend_from_slice(&[0x5a; 64]);
        NoteSignature {
            name: name.to_owned(),
            key_id,
            signature,
        }
        .line()
    }

    #[tokio::test]
    async fn the_newest_checkpoint_is_shown_with_each_cosignature_verified_or_labelled_unverified()
    {
        let a_key = witness("witness.example/a").1;
        let (viewer, sent, key) = witnessed_viewer(false, true, vec![a_key]);
        let cookie = open(&viewer).await;
        let (_, html) = get(&viewer, &cookie, "/health").await;
        assert!(
            html.contains("No checkpoint yet") && html.contains("No witness has cosigned yet"),
            "{html}"
        );

        // A period sealed with the tree of 3 leaves, its checkpoint, no cosignature yet.
        let period = sealed_hour();
        let lines: Vec<String> = (0..3)
            .map(|i| format!(r#"{{"auditTime":"x","messageId":"m-{i}"}}"#))
            .collect();
        write_object(
            archive(&viewer),
            ObjectKind::Trail,
            chrono::DateTime::from_timestamp(period.start + 60, 0).unwrap(),
            PeriodLength::default(),
            1,
            &lines,
        );
        seal(archive(&viewer), period, &key).await;
        assert_eq!(digest_key(period), archive(&viewer).keys("digest/")[0]);
        let note = String::from_utf8(
            archive(&viewer)
                .current(&checkpoint_key(3))
                .unwrap()
                .body
                .to_vec(),
        )
        .unwrap();
        let (status, html) = get(&viewer, &cookie, "/health").await;
        assert_eq!(status, StatusCode::OK, "{html}");
        assert!(
            html.contains("<dt>Newest checkpoint</dt><dd>tree size 3"),
            "{html}"
        );
        assert!(html.contains("<dt>Log signature</dt><dd>holds"), "{html}");
        assert!(
            html.contains(&format!(
                "with the period <time datetime=\"{}\"",
                health::bounds(period).0
            )) && html.contains("sealed at"),
            "{html}"
        );
        assert!(html.contains("No witness has cosigned yet"), "{html}");

        // Two witnesses cosign it.
        let (a, a_id) = cosign(&note, "witness.example/a", 1_795_000_000);
        let (b, b_id) = cosign(&note, "witness.example/b", 1_795_000_060);
        archive(&viewer).overwrite(&cosignature_key(3, a_id), Bytes::from(a.clone()));
        archive(&viewer).overwrite(&cosignature_key(3, b_id), Bytes::from(b));
        let (_, html) = get(&viewer, &cookie, "/health").await;
        assert!(
            html.contains("Cosignatures of the newest checkpoint (tree size 3)"),
            "{html}"
        );
        // a's key was given: its cosignature verifies; b's was not: unverified, not counted.
        for (name, id, at, verdict) in [
            (
                "witness.example/a",
                a_id,
                "2026-11-18T11:06:40Z",
                "verified with the witness's key",
            ),
            (
                "witness.example/b",
                b_id,
                "2026-11-18T11:07:40Z",
                "<strong>unverified</strong>",
            ),
        ] {
            let row = format!(
                "<tr><td><code>{name}</code></td><td><code>{}</code></td><td><time datetime=\"{at}\"",
                audit_model::digest::hex(&id)
            );
            let at = html.find(&row).unwrap_or_else(|| panic!("{name}: {html}"));
            let cell = &html[at..at + html[at..].find("</tr>").unwrap()];
            assert!(cell.ends_with(&format!("<td>{verdict}</td>")), "{cell}");
        }
        assert!(
            html.contains("1 verified with the witness keys given")
                && html.contains("<strong>1 unverified</strong>, not counted"),
            "{html}"
        );

        // A junk line planted in a's place, naming a: unverified, and a is counted no more.
        archive(&viewer).overwrite(
            &cosignature_key(3, a_id),
            Bytes::from(junk_cosignature("witness.example/a", a_id)),
        );
        let (_, html) = get(&viewer, &cookie, "/health").await;
        assert!(
            html.contains("0 verified with the witness keys given")
                && html.contains("<strong>2 unverified</strong>"),
            "{html}"
        );

        // a's own cosignature back in its place (it never went: the twin overwrote it), and a
        // line naming a planted for a size no checkpoint has: never a size to show.
        archive(&viewer).overwrite(&cosignature_key(3, a_id), Bytes::from(a));
        archive(&viewer).overwrite(
            &cosignature_key(u64::MAX, a_id),
            Bytes::from(junk_cosignature("witness.example/a", a_id)),
        );
        // A newer checkpoint, by another key, not cosigned yet: its signature does not hold, and
        // the newest size a witness given cosigned (verified) has its cosignatures shown.
        let stranger = TestKey::new("arn:aws:kms:us-east-1:123456789012:key/other");
        archive(&viewer).overwrite(&checkpoint_key(5), Bytes::from(checkpoint(&stranger, 5)));
        let (_, html) = get(&viewer, &cookie, "/health").await;
        assert!(html.contains("tree size 5"), "{html}");
        assert!(
            html.contains("<dt>Log signature</dt><dd><strong>does not hold</strong>: the checkpoint has no signature by the log's key"),
            "{html}"
        );
        assert!(
            html.contains(
                "Cosignatures of tree size 3, the newest cosigned (none cosigned the newest yet)"
            ),
            "{html}"
        );
        assert!(
            html.contains("not known (the newest digest carries another tree)"),
            "{html}"
        );
        assert!(!html.contains("18446744073709551615"), "{html}");
        assert!(
            actions(&sent)
                .iter()
                .all(|b| b["action"] == "auditctl.ui.view")
        );
    }

    /// An event's proof verdict, as its page shows it: proven over a log sealed as the sealer
    /// seals it (object, tiles, index, checkpoint) with the archived line's fields; a table's
    /// item changed after it was archived is NOT PROVEN, naming the fields; a cosignature counts
    /// only under a witness key given; refused once its archived line is changed, and "no proof
    /// yet" for an event no index names; nothing without the digest key.
    #[tokio::test]
    async fn an_events_proof_is_checked_in_the_page_and_a_changed_line_or_item_is_not_proven() {
        use crate::checks::{Cosigned, ProofVerdict, proof_verdict};
        use audit_model::note::{IndexRow, index_key};

        let given = witness("witness.example/a").1;
        let (keyed, _, key) = witnessed_viewer(false, true, vec![given.clone()]);
        let (without_key, _, _) = viewer(false, false);
        let archive = keyed.archive.as_ref().unwrap();
        let period = sealed_hour();
        let at = stamp(period.start + 10);
        let lines: Vec<String> = (0..3)
            .map(|i| {
                format!(
                    r#"{{"actor":"alice","auditTime":"{at}","messageId":"m-{i}","outcome":"success"}}"#
                )
            })
            .collect();
        let table =
            |line: &str| -> serde_json::Map<String, Value> { serde_json::from_str(line).unwrap() };
        let when = chrono::DateTime::from_timestamp(period.start + 20, 0).unwrap();
        let object = write_object(
            &archive.bucket,
            ObjectKind::Trail,
            when,
            PeriodLength::default(),
            7,
            &lines,
        );
        let rows: Vec<String> = (0..3u64)
            .map(|i| {
                IndexRow {
                    message_id: format!("m-{i}"),
                    audit_time: at.clone(),
                    leaf_index: i,
                    object: object.clone(),
                    line_number: i,
                }
                .line()
            })
            .collect();
        seal(&archive.bucket, period, &key).await;
        archive.bucket.overwrite(
            &index_key(period),
            Bytes::from(gzip_lines(&[rows.concat().trim_end().to_owned()])),
        );
        let now = Utc::now().timestamp();
        let anchor = when;
        let item = table(&lines[1]);

        let verdict = proof_verdict(archive, &item, &at, anchor, now, own_words).await;
        let Some(ProofVerdict::Proven(held)) = &verdict else {
            panic!("{verdict:?}");
        };
        assert_eq!((held.leaf, held.size), (1, 3));
        assert_eq!(held.line, item, "the archived line's fields");
        assert_eq!(held.cosigned, Cosigned::default());
        assert!(
            verdict
                .unwrap()
                .to_string()
                .starts_with("Proven, checked in this page")
        );

        // The table's item's actor changed (UpdateItem): the line is shown, the item not proven.
        let forged = table(&lines[1].replace("alice", "mallory"));
        let verdict = proof_verdict(archive, &forged, &at, anchor, now, own_words).await;
        let Some(ProofVerdict::Differs(held)) = &verdict else {
            panic!("{verdict:?}");
        };
        assert_eq!(held.fields, ["actor"]);
        assert_eq!(held.line["actor"], "alice");
        let words = verdict.unwrap().to_string();
        assert!(
            words.starts_with(
                "NOT PROVEN: the table's item differs from the archived event in actor."
            ),
            "{words}"
        );

        // A's cosignature on the checkpoint verifies under its given key; a junk line naming b
        // does not, and is not counted.
        let note = archive
            .bucket
            .current(&checkpoint_key(3))
            .expect("the sealed checkpoint")
            .body;
        let note = String::from_utf8(note.to_vec()).unwrap();
        let (line, a_id) = cosign(&note, "witness.example/a", 1_795_000_000);
        assert_eq!(a_id, given.key_id());
        archive
            .bucket
            .overwrite(&cosignature_key(3, a_id), Bytes::from(line));
        let b_id = witness("witness.example/b").1.key_id();
        archive.bucket.overwrite(
            &cosignature_key(3, b_id),
            Bytes::from(junk_cosignature("witness.example/b", b_id)),
        );
        let verdict = proof_verdict(archive, &item, &at, anchor, now, own_words).await;
        let Some(ProofVerdict::Proven(held)) = &verdict else {
            panic!("{verdict:?}");
        };
        assert_eq!(
            held.cosigned,
            Cosigned {
                verified: vec!["witness.example/a".into()],
                unverified: vec!["witness.example/b".into()],
            }
        );
        let words = verdict.unwrap().to_string();
        assert!(
            words.contains("1 witness cosignature(s) verified with the witness keys given (witness.example/a); unverified, not counted: witness.example/b"),
            "{words}"
        );

        let unknown = proof_verdict(
            archive,
            &table(&lines[1].replace("m-1", "m-9")),
            &at,
            anchor,
            now,
            own_words,
        )
        .await;
        assert!(
            matches!(unknown, Some(ProofVerdict::NotYet(_))),
            "{unknown:?}"
        );

        // The archived line changed behind the log's back (a new version of the object).
        let mut changed = lines.clone();
        changed[1] = changed[1].replace("success", "failure");
        archive
            .bucket
            .overwrite(&object, Bytes::from(gzip_lines(&changed)));
        let refused = proof_verdict(archive, &item, &at, anchor, now, own_words).await;
        assert!(
            matches!(refused, Some(ProofVerdict::Fails(_))),
            "{refused:?}"
        );
        assert!(refused.unwrap().to_string().starts_with("NOT PROVEN"));

        let archive = without_key.archive.as_ref().unwrap();
        assert_eq!(
            proof_verdict(archive, &item, &at, anchor, now, own_words).await,
            None
        );
    }

    /// A row at `seconds` with `action`, as the table holds it.
    fn row(id: &str, seconds: i64, action: &str) -> TrailItem {
        use aws_sdk_dynamodb::types::AttributeValue::S;
        TrailItem::from(std::collections::HashMap::from([
            ("messageId".to_owned(), S(id.into())),
            ("auditTime".to_owned(), S(stamp(seconds))),
            ("action".to_owned(), S(action.into())),
        ]))
    }

    #[tokio::test]
    async fn the_results_mark_each_rows_proof_and_say_how_many_access_events_they_left_out() {
        use crate::proof_column::Mark;
        let (viewer, _, _) = viewer(false, false);
        let sealed = sealed_hour();
        // The hour after it is sealable too, and has no digest.
        let unsealed = sealed.next();
        archive(&viewer).overwrite_with(&digest_key(sealed), Bytes::from_static(b"{}"), Vec::new());
        let now = Utc::now();
        let rows = [
            row("now", now.timestamp(), "invoice.view"),
            row("unsealed", unsealed.start + 60, "invoice.delete"),
            row("sealed", sealed.start + 60, "invoice.view"),
        ];
        let marks = viewer.marks(&rows, now).await;
        assert!(
            matches!(
                &marks[..],
                [Mark::Pending, Mark::NotProven(why), Mark::Sealed] if why.contains("no digest")
            ),
            "{marks:?}"
        );
        let search = Search::parse("range=24h", now, false).unwrap();
        let shown = results::Shown {
            rows: &rows,
            marks: &marks,
            next: None,
            hidden: 2,
        };
        let html = results::results(&search, &shown).into_string();
        for seen in [
            "<th scope=\"col\">Proof</th>",
            "<span aria-hidden=\"true\">…</span> pending",
            "<span aria-hidden=\"true\">✗</span> not proven",
            "<span aria-hidden=\"true\">✓</span> sealed",
            "<strong>2 access event(s) hidden</strong>",
            "<a href=\"./?range=24h&amp;access=1\">Show access events</a>",
            "--no-access --desc --format csv",
        ] {
            assert!(html.contains(seen), "{seen}: {html}");
        }
        // Shown on request: the page says so and links back.
        let search = Search::parse("range=24h&access=1", now, false).unwrap();
        let html = results::results(&search, &shown).into_string();
        assert!(html.contains(">Hide access events</a>"), "{html}");
        assert!(!html.contains("--no-access"), "{html}");
        // Without the archive bucket: not known, and why.
        let (plain, _) = super::viewer(false);
        let marks = plain.marks(&rows, now).await;
        assert!(
            marks
                .iter()
                .all(|m| matches!(m, Mark::NotKnown(why) if why.contains("ARCHIVE_BUCKET"))),
            "{marks:?}"
        );
    }
}

/// An export whose read fails after its first bytes were sent (the table deleted mid-way): the
/// download ends in an error, not a short file, and the trail holds the access event and its
/// failure event naming it.
#[tokio::test]
async fn an_export_failing_after_its_first_bytes_ends_in_an_error_and_records_its_failure() {
    use crate::export::{Failure, export_body};
    use aws_sdk_dynamodb::types::AttributeValue::S;
    use http_body_util::BodyExt as _;
    let (viewer, sent) = viewer(false);
    let arguments = Map::from_iter([("format".to_owned(), Value::from("jsonl"))]);
    // The access is recorded before anything is read, as the export does.
    let recorded = viewer
        .access
        .record_with(
            Action::UiExport,
            "AuditMessages",
            "AuditMessages",
            Some(&arguments),
        )
        .await
        .unwrap();
    let text = "x".repeat(1_000);
    let rows = (0..100)
        .map(move |i| {
            TrailItem::from(std::collections::HashMap::from([
                ("messageId".to_owned(), S(format!("m-{i}"))),
                ("auditTime".to_owned(), S("2026-11-22T10:00:00.000Z".into())),
                ("auditText".to_owned(), S(text.clone())),
            ]))
        })
        .map(Ok)
        .chain([Err(Error::Trail(audit_trail::Error::TableNotFound {
            table: "AuditMessages".into(),
            at: "us-east-1".into(),
        }))]);
    let failure = Failure {
        access: viewer.access.clone(),
        recorded,
        table: "AuditMessages".into(),
        arguments,
        words: own_words,
    };
    let mut body = export_body(futures::stream::iter(rows), Format::Jsonl, failure);
    let mut received = Vec::new();
    let error = loop {
        match body.frame().await {
            Some(Ok(frame)) => received.extend_from_slice(&frame.into_data().unwrap()),
            Some(Err(error)) => break error,
            None => panic!("the body ended as if whole"),
        }
    };
    assert!(received.len() >= 64 * 1024, "a first chunk was sent");
    assert!(
        error.to_string().contains("AuditMessages not found"),
        "{error}"
    );
    let bodies = actions(&sent);
    assert_eq!(
        outcomes(&bodies),
        [
            ("auditctl.ui.export", "success"),
            ("auditctl.ui.export", "failure")
        ]
    );
    assert_eq!(bodies[1]["accessEventId"], bodies[0]["messageId"]);
    assert_eq!(bodies[1]["arguments"], bodies[0]["arguments"]);
    assert_eq!(
        bodies[1]["error"]["kind"], "table_not_found",
        "{}",
        bodies[1]
    );
}
