//! The Lambda Runtime API, as a function process meets it: `next` hands out one queued event with
//! its own request id and deadline, `response` and `error` report what came back. Serves any
//! number of pollers at once (Lambda Managed Instances poll `next` from several workers), counts
//! the invocations in flight, and reports everything to the caller in order. Used by the
//! concurrency test and by the benchmarks (`benches/load.rs`).
#![allow(dead_code)] // the test and the benchmarks use different parts

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub use audit_testkit::net::bind;
use audit_testkit::net::on_own_thread;

use super::http::{read_request, write_response};

pub const FUNCTION_ARN: &str = "arn:aws:lambda:us-east-1:123456789012:function:audit-receiver";

/// A connection handler for [`serve_on_thread`].
pub trait AsyncHandler: Send + Sync + 'static {
    fn connection(
        self: Arc<Self>,
        socket: tokio::net::TcpStream,
    ) -> impl Future<Output = ()> + Send;
}

/// Serves `listener` on a thread of its own with a runtime of its own, so that whatever the
/// caller does (block, wait, measure) never slows the server.
pub fn serve_on_thread<H: AsyncHandler>(listener: std::net::TcpListener, handler: Arc<H>) {
    on_own_thread(move || async move {
        listener.set_nonblocking(true).unwrap();
        let listener = tokio::net::TcpListener::from_std(listener).unwrap();
        while let Ok((socket, _)) = listener.accept().await {
            let _ = socket.set_nodelay(true);
            tokio::spawn(handler.clone().connection(socket));
        }
    });
}

#[derive(Debug)]
pub enum ApiEvent {
    NextRequested(Instant),
    Delivered(String, Instant),
    Response(String, Instant, String),
    Error(String, Instant, String),
    InitError(String),
}

struct Server {
    queue: tokio::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<(String, String)>>,
    events: Mutex<mpsc::Sender<ApiEvent>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    timeout: Duration,
}

impl Server {
    fn report(&self, event: ApiEvent) {
        let _ = self.events.lock().unwrap().send(event);
    }
}

impl AsyncHandler for Server {
    async fn connection(self: Arc<Self>, mut socket: tokio::net::TcpStream) {
        let mut buffer = Vec::new();
        while let Some(request) = read_request(&mut socket, &mut buffer).await {
            if request.method == "GET" && request.path.ends_with("/invocation/next") {
                self.report(ApiEvent::NextRequested(Instant::now()));
                let Some((id, body)) = self.queue.lock().await.recv().await else {
                    return;
                };
                let deadline = (SystemTime::now() + self.timeout)
                    .duration_since(UNIX_EPOCH)
                    .unwrap()
                    .as_millis()
                    .to_string();
                let headers = [
                    ("Content-Type", "application/json"),
                    ("Lambda-Runtime-Aws-Request-Id", id.as_str()),
                    ("Lambda-Runtime-Deadline-Ms", deadline.as_str()),
                    ("Lambda-Runtime-Invoked-Function-Arn", FUNCTION_ARN),
                    (
                        "Lambda-Runtime-Trace-Id",
                        "Root=1-00000000-000000000000000000000000",
                    ),
                ];
                let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                self.max_in_flight.fetch_max(now, Ordering::SeqCst);
                self.report(ApiEvent::Delivered(id.clone(), Instant::now()));
                if write_response(&mut socket, 200, &headers, body.as_bytes())
                    .await
                    .is_err()
                {
                    return;
                }
            } else {
                let at = Instant::now();
                let body = String::from_utf8_lossy(&request.body).into_owned();
                // /2018-06-01/runtime/invocation/{id}/response|error, /runtime/init/error
                let parts: Vec<&str> = request.path.split('/').collect();
                let id = parts
                    .iter()
                    .position(|p| *p == "invocation")
                    .and_then(|at| parts.get(at + 1))
                    .map(|id| (*id).to_owned());
                match (id, parts.last().copied()) {
                    (Some(id), Some("response")) => {
                        self.in_flight.fetch_sub(1, Ordering::SeqCst);
                        self.report(ApiEvent::Response(id, at, body));
                    }
                    (Some(id), Some("error")) => {
                        self.in_flight.fetch_sub(1, Ordering::SeqCst);
                        self.report(ApiEvent::Error(id, at, body));
                    }
                    _ => self.report(ApiEvent::InitError(format!(
                        "{} {}: {body}",
                        request.method, request.path
                    ))),
                }
                if write_response(&mut socket, 202, &[], b"{}").await.is_err() {
                    return;
                }
            }
        }
    }
}

/// One Runtime API on a free port. Give its address to the function as `AWS_LAMBDA_RUNTIME_API`.
pub struct RuntimeApi {
    pub port: u16,
    queue: tokio::sync::mpsc::UnboundedSender<(String, String)>,
    events: mpsc::Receiver<ApiEvent>,
    server: Arc<Server>,
    delivered: HashMap<String, Instant>,
    /// Answers that arrived while the caller waited for another invocation's.
    answered: HashMap<String, Result<(Duration, String), String>>,
    next_id: usize,
}

impl RuntimeApi {
    /// Invocations get a deadline of `timeout` from their delivery.
    pub fn start(timeout: Duration) -> Self {
        let (listener, port) = bind();
        let (queue, queue_rx) = tokio::sync::mpsc::unbounded_channel();
        let (events_tx, events) = mpsc::channel();
        let server = Arc::new(Server {
            queue: tokio::sync::Mutex::new(queue_rx),
            events: Mutex::new(events_tx),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            timeout,
        });
        serve_on_thread(listener, server.clone());
        Self {
            port,
            queue,
            events,
            server,
            delivered: HashMap::new(),
            answered: HashMap::new(),
            next_id: 0,
        }
    }

    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Queues one event; returns its request id.
    pub fn enqueue(&mut self, body: String) -> String {
        self.next_id += 1;
        let id = format!("request-{:06}", self.next_id);
        self.queue.send((id.clone(), body)).unwrap();
        id
    }

    /// The next thing that happened, within `within`.
    pub fn next_event(&mut self, within: Duration) -> Result<ApiEvent, String> {
        let event = self
            .events
            .recv_timeout(within)
            .map_err(|_| format!("nothing from the function within {within:?}"))?;
        if let ApiEvent::Delivered(id, at) = &event {
            self.delivered.insert(id.clone(), *at);
        }
        Ok(event)
    }

    /// Process start (`since`) to the first `next`.
    pub fn first_next(&mut self, within: Duration) -> Result<Instant, String> {
        loop {
            match self.next_event(within)? {
                ApiEvent::NextRequested(at) => return Ok(at),
                ApiEvent::InitError(e) => return Err(format!("init error: {e}")),
                _ => {}
            }
        }
    }

    /// Waits for the response to `id`: delivery to response, and the response's body. Other
    /// invocations' answers that arrive first are kept for their own call.
    pub fn response(&mut self, id: &str, within: Duration) -> Result<(Duration, String), String> {
        loop {
            if let Some(answer) = self.answered.remove(id) {
                return answer;
            }
            match self.next_event(within)? {
                ApiEvent::Response(got, at, body) => {
                    let delivered = self
                        .delivered
                        .remove(&got)
                        .ok_or("response before delivery")?;
                    self.answered.insert(got, Ok((at - delivered, body)));
                }
                ApiEvent::Error(got, _, body) => {
                    self.answered
                        .insert(got, Err(format!("invocation error: {body}")));
                }
                ApiEvent::InitError(e) => return Err(format!("init error: {e}")),
                _ => {}
            }
        }
    }

    /// Delivers one event and waits for its response.
    pub fn invoke(&mut self, body: String, within: Duration) -> Result<(Duration, String), String> {
        let id = self.enqueue(body);
        self.response(&id, within)
    }

    /// The most invocations that were delivered and not yet answered at one time.
    pub fn max_in_flight(&self) -> usize {
        self.server.max_in_flight.load(Ordering::SeqCst)
    }

    pub fn reset_max_in_flight(&self) {
        self.server.max_in_flight.store(
            self.server.in_flight.load(Ordering::SeqCst),
            Ordering::SeqCst,
        );
    }
}
