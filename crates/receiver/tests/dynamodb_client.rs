//! The function's own DynamoDB client against stand-ins that behave as the real service does at
//! its edges: a service whose clock is far from ours, a pooled connection the server closed
//! while Lambda had the environment frozen, an answer lost after the write was made, and what
//! every request says about who sends it.

mod support;

use audit_testkit::net::on_own_thread;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, SystemTime};

use audit_aws::dynamodb::{DynamoDbStore, Wire};
use audit_aws::dynamodb::{PutOutcome, StoreError};
use audit_receiver::message::AuditItem;
use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider, future};
use support::http::{Request, read_request, write_response};
use support::*;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

fn item(message_id: &str) -> AuditItem {
    let body = format!(
        r#"{{"messageId":"{message_id}","auditText":"login","auditTime":"2026-11-22T10:00:00Z"}}"#
    );
    audit_item(&body, &format!("sqs-{message_id}"))
}

fn header<'a>(request: &'a Request, name: &str) -> Option<&'a str> {
    request
        .headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// The credentials the tests sign with, counting how often they are fetched.
#[derive(Debug, Clone, Default)]
struct Counted(Arc<AtomicUsize>);

impl ProvideCredentials for Counted {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        self.0.fetch_add(1, Ordering::SeqCst);
        future::ProvideCredentials::ready(Ok(Credentials::new("test", "test", None, None, "tests")))
    }
}

impl Counted {
    fn fetched(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }

    fn store(&self, endpoint: &str) -> DynamoDbStore {
        let wire = Wire::new(
            endpoint,
            "us-east-1",
            SharedCredentialsProvider::new(self.clone()),
        )
        .expect("a local endpoint");
        DynamoDbStore::new(wire, TABLE)
    }
}

/// An HTTP `Date`.
fn http_date(time: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(time)
        .format("%a, %d %b %Y %H:%M:%S GMT")
        .to_string()
}

/// A DynamoDB stand-in whose clock is `offset` ahead of ours (behind when negative), which
/// refuses requests signed more than 5 minutes off its clock as DynamoDB does, and otherwise
/// answers 200, or `InvalidSignatureException` for every request when `refuse_all`. Every answer
/// carries its `Date`. Keeps every request. With `together` above 0 it answers none of its first
/// `together` requests before all of them have arrived.
struct Clocked {
    endpoint: String,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl Clocked {
    async fn start(offset_seconds: i64, refuse_all: bool) -> Self {
        Self::start_holding(offset_seconds, refuse_all, 0).await
    }

    async fn start_holding(offset_seconds: i64, refuse_all: bool, together: usize) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let kept = requests.clone();
        let (arrived, _) = tokio::sync::watch::channel(0usize);
        let arrived = Arc::new(arrived);
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(Self::serve(
                    socket,
                    offset_seconds,
                    refuse_all,
                    kept.clone(),
                    (together, arrived.clone()),
                ));
            }
        });
        Self { endpoint, requests }
    }

    async fn serve(
        mut socket: TcpStream,
        offset_seconds: i64,
        refuse_all: bool,
        requests: Arc<Mutex<Vec<Request>>>,
        (together, arrived): (usize, Arc<tokio::sync::watch::Sender<usize>>),
    ) {
        let mut buffer = Vec::new();
        while let Some(request) = read_request(&mut socket, &mut buffer).await {
            let mut count = 0;
            arrived.send_modify(|n| {
                *n += 1;
                count = *n;
            });
            if count <= together {
                let mut waiting = arrived.subscribe();
                let _ = waiting.wait_for(|n| *n >= together).await;
            }
            let shift = Duration::from_secs(offset_seconds.unsigned_abs());
            let now = if offset_seconds >= 0 {
                SystemTime::now() + shift
            } else {
                SystemTime::now() - shift
            };
            let signed_at = header(&request, "x-amz-date")
                .and_then(|d| chrono::NaiveDateTime::parse_from_str(d, "%Y%m%dT%H%M%SZ").ok())
                .map(|d| SystemTime::from(d.and_utc()));
            let within_5_minutes = signed_at.is_some_and(|at| {
                let off = now
                    .duration_since(at)
                    .or_else(|e| Ok::<_, ()>(e.duration()))
                    .unwrap_or_default();
                off <= Duration::from_secs(300)
            });
            let signed = header(&request, "x-amz-date")
                .unwrap_or_default()
                .to_owned();
            requests.lock().unwrap().push(request);
            let date = http_date(now);
            let headers = [
                ("Content-Type", "application/x-amz-json-1.0"),
                ("Date", date.as_str()),
            ];
            let (status, body) = if refuse_all {
                (
                    400,
                    r#"{"__type":"com.amazon.coral.service#InvalidSignatureException","message":"The request signature we calculated does not match the signature you provided."}"#.to_owned(),
                )
            } else if within_5_minutes {
                (200, "{}".to_owned())
            } else {
                (
                    400,
                    format!(
                        r#"{{"__type":"com.amazon.coral.service#InvalidSignatureException","message":"Signature expired: {signed} is now earlier than the service's time - 5 min."}}"#
                    ),
                )
            };
            if write_response(&mut socket, status, &headers, body.as_bytes())
                .await
                .is_err()
            {
                return;
            }
        }
    }

    fn requests(&self) -> usize {
        self.requests.lock().unwrap().len()
    }

    fn signed_at(&self, index: usize) -> String {
        let requests = self.requests.lock().unwrap();
        header(&requests[index], "x-amz-date")
            .unwrap_or_default()
            .to_owned()
    }
}

#[tokio::test]
async fn a_write_refused_for_a_skewed_clock_is_signed_again_at_the_services_time() {
    for hours in [1i64, -1] {
        // Given a service whose clock is an hour off ours.
        let service = Clocked::start(hours * 3600, false).await;
        let credentials = Counted::default();
        let store = credentials.store(&service.endpoint);

        // When the function writes: refused once ("Signature expired"), then signed at the
        // service's time from its answer's `Date`, and written, within the one call.
        assert_eq!(
            store.put_if_absent(&item("a")).await,
            Ok(PutOutcome::Written),
            "{hours} h"
        );
        assert_eq!(service.requests(), 2);
        let expected = chrono::Utc::now() + chrono::Duration::hours(hours);
        let resigned =
            chrono::NaiveDateTime::parse_from_str(&service.signed_at(1), "%Y%m%dT%H%M%SZ")
                .unwrap()
                .and_utc();
        assert!(
            (resigned - expected).num_seconds().abs() < 60,
            "signed at {resigned}, the service's clock says {expected}"
        );

        // Then later writes are signed at the service's time from the start, and the
        // credentials, which were never the problem, were fetched once.
        assert_eq!(
            store.put_if_absent(&item("b")).await,
            Ok(PutOutcome::Written)
        );
        assert_eq!(service.requests(), 3);
        assert_eq!(credentials.fetched(), 1);
    }
}

#[tokio::test]
async fn concurrent_writes_refused_for_a_skewed_clock_are_each_signed_again_once() {
    // Given a service whose clock is an hour ahead of ours, which answers none of the first 32
    // requests before all 32 have arrived: each of them was signed before any answer could show
    // the service's time.
    let service = Clocked::start_holding(3600, false, 32).await;
    let credentials = Counted::default();
    let store = credentials.store(&service.endpoint);

    // When the function has 32 writes in flight at once (its default MAX_CONCURRENCY).
    let items: Vec<AuditItem> = (0..32).map(|i| item(&format!("m{i}"))).collect();
    let outcomes =
        futures::future::join_all(items.iter().map(|item| store.put_if_absent(item))).await;

    // Then every write is refused once and signed again at the service's time, whichever answer
    // corrected the clock first: all 32 written within their own calls (none left to the
    // batch's retries and their backoff), in 64 requests, and the credentials, never at fault,
    // are fetched once.
    let written = outcomes
        .iter()
        .filter(|o| **o == Ok(PutOutcome::Written))
        .count();
    assert_eq!(written, 32, "{outcomes:?}");
    assert_eq!(service.requests(), 64);
    assert_eq!(credentials.fetched(), 1);
}

#[tokio::test]
async fn a_refused_signature_with_the_clock_right_is_not_sent_again() {
    let service = Clocked::start(0, true).await;
    let credentials = Counted::default();
    let store = credentials.store(&service.endpoint);

    let result = store.put_if_absent(&item("a")).await;

    assert!(
        matches!(&result, Err(e @ StoreError::Unavailable(_)) if e.is_retryable()),
        "{result:?}"
    );
    assert_eq!(
        service.requests(),
        1,
        "the clock was right: nothing to correct"
    );
    // The credentials are fetched again for the next call, as before.
    let _ = store.put_if_absent(&item("a")).await;
    assert_eq!(credentials.fetched(), 2);
}

#[tokio::test]
async fn every_request_names_the_function_and_its_version() {
    let service = Clocked::start(0, false).await;
    let store = Counted::default().store(&service.endpoint);

    store.warm_up(3, Duration::from_secs(2)).await.unwrap();
    store.put_if_absent(&item("a")).await.unwrap();

    let requests = service.requests.lock().unwrap();
    assert_eq!(requests.len(), 4);
    let expected = format!("audit-receiver/{}", env!("CARGO_PKG_VERSION"));
    for request in requests.iter() {
        assert_eq!(
            header(request, "user-agent"),
            Some(expected.as_str()),
            "{} {} {}",
            request.method,
            request.path,
            request.target
        );
    }
}

/// A stand-in on its own thread (so that it runs while the test's runtime is blocked, as a
/// server runs while Lambda has the function frozen). It answers every request with 200 and
/// counts connections and requests; when told to, it closes every connection that is idle.
struct Freezable {
    endpoint: String,
    connections: Arc<AtomicUsize>,
    answered: Arc<AtomicUsize>,
    close_idle: tokio::sync::mpsc::UnboundedSender<mpsc::Sender<()>>,
}

impl Freezable {
    fn start() -> Self {
        let (ready_tx, ready_rx) = mpsc::channel();
        let (close_idle, mut close_rx) = tokio::sync::mpsc::unbounded_channel::<mpsc::Sender<()>>();
        let connections = Arc::new(AtomicUsize::new(0));
        let answered = Arc::new(AtomicUsize::new(0));
        let (c, a) = (connections.clone(), answered.clone());
        on_own_thread(move || async move {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            ready_tx.send(listener.local_addr().unwrap()).unwrap();
            // Idle connections, closed when the test says so.
            let idle: Arc<Mutex<Vec<tokio::sync::oneshot::Sender<()>>>> = Arc::default();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((socket, _)) = accepted else { return };
                        c.fetch_add(1, Ordering::SeqCst);
                        tokio::spawn(Self::serve(socket, a.clone(), idle.clone()));
                    }
                    Some(done) = close_rx.recv() => {
                        for close in idle.lock().unwrap().drain(..) {
                            let _ = close.send(());
                        }
                        // Give the connections' tasks the moment to close their sockets.
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        let _ = done.send(());
                    }
                }
            }
        });
        let address = ready_rx.recv().unwrap();
        Self {
            endpoint: format!("http://{address}"),
            connections,
            answered,
            close_idle,
        }
    }

    async fn serve(
        mut socket: TcpStream,
        answered: Arc<AtomicUsize>,
        idle: Arc<Mutex<Vec<tokio::sync::oneshot::Sender<()>>>>,
    ) {
        let mut buffer = Vec::new();
        loop {
            let (close_tx, close_rx) = tokio::sync::oneshot::channel();
            idle.lock().unwrap().push(close_tx);
            let request = tokio::select! {
                request = read_request(&mut socket, &mut buffer) => request,
                _ = close_rx => {
                    // The server's idle timeout: the connection is closed while the client is
                    // not looking.
                    let _ = socket.shutdown().await;
                    return;
                }
            };
            let Some(_request) = request else { return };
            answered.fetch_add(1, Ordering::SeqCst);
            let headers = [("Content-Type", "application/x-amz-json-1.0")];
            if write_response(&mut socket, 200, &headers, b"{}")
                .await
                .is_err()
            {
                return;
            }
        }
    }

    /// Lambda freezes the environment: this thread (and the test's runtime on it) stops, and
    /// meanwhile the server closes its idle connections. Returns once they are closed.
    fn freeze_while_the_server_closes_idle_connections(&self) {
        let (done_tx, done_rx) = mpsc::channel();
        self.close_idle.send(done_tx).unwrap();
        done_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the server closed its idle connections");
    }
}

#[tokio::test]
async fn a_pooled_connection_closed_while_frozen_is_replaced_without_spending_a_retry() {
    // Given a warm function: one write made, its connection idle in the pool.
    let server = Freezable::start();
    let store = store(&server.endpoint, TABLE);
    assert_eq!(
        store.put_if_absent(&item("a")).await,
        Ok(PutOutcome::Written)
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(server.connections.load(Ordering::SeqCst), 1);

    // When the environment is frozen and the server closes the idle connection meanwhile, then
    // thawed, and the next write goes out at once on the pooled (closed) connection.
    server.freeze_while_the_server_closes_idle_connections();
    let outcome = store.put_if_absent(&item("b")).await;

    // Then that one call writes it, on a new connection: no error for the batch to retry with
    // backoff, and no retry attempt spent.
    assert_eq!(outcome, Ok(PutOutcome::Written));
    assert_eq!(server.connections.load(Ordering::SeqCst), 2);
    assert_eq!(server.answered.load(Ordering::SeqCst), 2);
}

/// A proxy in front of moto that forwards every request and its answer, except that it swallows
/// the answer to the first `PutItem` and closes the connection instead: the write was made, and
/// the function never heard so.
async fn losing_first_answer(upstream: String) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let puts = Arc::new(AtomicUsize::new(0));
    let counted = puts.clone();
    let upstream = upstream.trim_start_matches("http://").to_owned();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let (puts, upstream) = (counted.clone(), upstream.clone());
            tokio::spawn(async move {
                let mut buffer = Vec::new();
                while let Some(request) = read_request(&mut socket, &mut buffer).await {
                    let first_put = request.target.ends_with(".PutItem")
                        && puts.fetch_add(1, Ordering::SeqCst) == 0;
                    let answer = relay(&request, &upstream).await;
                    if first_put {
                        return; // The write is in the table; its answer is lost.
                    }
                    let Some(answer) = answer else {
                        return;
                    };
                    if send_back(&mut socket, answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (endpoint, puts)
}

#[tokio::test]
async fn a_write_whose_answer_was_lost_is_sent_again_and_leaves_one_item() {
    // Given the table on moto, behind a connection that loses the first write's answer.
    let moto = Moto::start();
    let client = moto.client();
    create_table(&client, TABLE).await;
    let (endpoint, puts) = losing_first_answer(moto.endpoint.clone()).await;
    let store = store(&endpoint, TABLE);

    // When the function writes: the write is made, its answer lost with the connection.
    let outcome = store.put_if_absent(&item("a")).await;

    // Then the request was sent again at once, found its own item (same payload: a duplicate),
    // and the table holds one item.
    assert_eq!(outcome, Ok(PutOutcome::Duplicate));
    assert_eq!(puts.load(Ordering::SeqCst), 2);
    let items = scan(&client, TABLE).await;
    assert_eq!(items.len(), 1);
    assert_eq!(s(&items[0], "messageId"), "a");
}
