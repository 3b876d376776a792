//! Loopback ports and servers for tests: a free port, waiting until a child listens, a listener,
//! and a server on a thread and runtime of its own; knows no AWS service and no protocol.

use std::future::Future;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Child;
use std::time::{Duration, Instant};

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free port on 127.0.0.1")
}

/// A listener on a free loopback port, and its port.
pub fn bind() -> (TcpListener, u16) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port on 127.0.0.1");
    let port = listener
        .local_addr()
        .expect("the listener's address")
        .port();
    (listener, port)
}

/// Waits until something accepts connections on `port`; panics when `child` exits first or
/// nothing listens `within`.
pub fn wait_for_port(port: u16, within: Duration, child: &mut Child, what: &str) {
    let started = Instant::now();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited with {status} before listening on {port}");
        }
        assert!(
            started.elapsed() < within,
            "{what} did not listen on port {port} within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs the future `serve` makes on a thread of its own with a current-thread runtime of its own,
/// so that whatever the caller does (block on a child, wait, measure) never slows it.
pub fn on_own_thread<F, S>(serve: S)
where
    S: FnOnce() -> F + Send + 'static,
    F: Future<Output = ()>,
{
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime for the test's server");
        runtime.block_on(serve());
    });
}
