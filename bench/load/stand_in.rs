//! Owns the DynamoDB stand-in and the endpoints the contenders run against: the Runtime API
//! stand-in, plain HTTP and TLS, the injected round trip. Must not know who runs against them.

use super::*;

// The DynamoDB stand-in: `{}` to every request (PutItem: written; DescribeTable: the start-up
// check) after the injected round trip; plain HTTP and TLS on two ports. It also answers the one
// KMS Sign audit-receiver makes at start to certify its attestation key (ATTESTATION_KEY_ID), with
// a signature of a real one's length: the function then attests every item, as deployed.

/// The attestation key audit-receiver is given (the stand-in signs for it).
pub(crate) const BENCH_ATTESTATION_KEY: &str = "arn:aws:kms:us-east-1:000000000000:key/bench";

struct Dynamo {
    rtt_ms: AtomicU64,
    requests: AtomicUsize,
    /// Requests whose item carries an `attestation` attribute.
    attested: AtomicUsize,
    tls: Option<tokio_rustls::TlsAcceptor>,
}

impl Dynamo {
    async fn serve<S: AsyncRead + AsyncWrite + Unpin>(&self, mut socket: S) {
        let mut buffer = Vec::new();
        while let Some(request) = read_request(&mut socket, &mut buffer).await {
            if request.target == "TrentService.Sign" {
                let signature = format!(
                    r#"{{"KeyId":"{BENCH_ATTESTATION_KEY}","Signature":"{}","SigningAlgorithm":"ECDSA_SHA_256"}}"#,
                    "A".repeat(96)
                );
                let headers = [("Content-Type", "application/x-amz-json-1.1")];
                if write_response(&mut socket, 200, &headers, signature.as_bytes())
                    .await
                    .is_err()
                {
                    return;
                }
                continue;
            }
            self.requests.fetch_add(1, Ordering::Relaxed);
            let attestation: &[u8] = b"\"attestation\":";
            if request
                .body
                .windows(attestation.len())
                .any(|w| w == attestation)
            {
                self.attested.fetch_add(1, Ordering::Relaxed);
            }
            let rtt = self.rtt_ms.load(Ordering::Relaxed);
            if rtt > 0 {
                tokio::time::sleep(Duration::from_millis(rtt)).await;
            }
            let headers = [
                ("Content-Type", "application/x-amz-json-1.0"),
                ("x-amzn-RequestId", "bench"),
            ];
            if write_response(&mut socket, 200, &headers, b"{}")
                .await
                .is_err()
            {
                return;
            }
        }
    }
}

impl AsyncHandler for Dynamo {
    async fn connection(self: Arc<Self>, socket: tokio::net::TcpStream) {
        match &self.tls {
            Some(acceptor) => {
                if let Ok(socket) = acceptor.accept(socket).await {
                    self.serve(socket).await;
                }
            }
            None => self.serve(socket).await,
        }
    }
}

/// Both endpoints, the CA file that makes the TLS one trusted, and the round trip they inject.
pub(crate) struct Endpoints {
    plain: Arc<Dynamo>,
    tls: Arc<Dynamo>,
    plain_url: String,
    tls_url: String,
    pub(crate) ca_file: PathBuf,
}

impl Endpoints {
    pub(crate) fn start(work: &Path) -> Self {
        let (ca_pem, acceptor) = tls::acceptor();
        let ca_file = work.join("stand-in-ca.pem");
        std::fs::write(&ca_file, ca_pem).unwrap();
        let start = |tls| {
            let (listener, port) = bind();
            let dynamo = Arc::new(Dynamo {
                rtt_ms: AtomicU64::new(0),
                requests: AtomicUsize::new(0),
                attested: AtomicUsize::new(0),
                tls,
            });
            serve_on_thread(listener, dynamo.clone());
            (dynamo, port)
        };
        let (plain, plain_port) = start(None);
        let (tls, tls_port) = start(Some(acceptor));
        Self {
            plain,
            tls,
            plain_url: format!("http://127.0.0.1:{plain_port}"),
            tls_url: format!("https://127.0.0.1:{tls_port}"),
            ca_file,
        }
    }

    pub(crate) fn set_rtt(&self, ms: u64) {
        self.plain.rtt_ms.store(ms, Ordering::Relaxed);
        self.tls.rtt_ms.store(ms, Ordering::Relaxed);
    }

    pub(crate) fn url(&self, tls: bool) -> &str {
        if tls { &self.tls_url } else { &self.plain_url }
    }

    /// Requests so far whose item carried an attestation.
    pub(crate) fn attested(&self) -> usize {
        self.plain.attested.load(Ordering::Relaxed) + self.tls.attested.load(Ordering::Relaxed)
    }

    pub(crate) fn requests(&self) -> usize {
        self.plain.requests.load(Ordering::Relaxed) + self.tls.requests.load(Ordering::Relaxed)
    }
}
