//! Minimal HTTP/1.1 for scripted local endpoints (tests and benchmarks): read one request, write
//! one response, keep-alive. Bodies are Content-Length only (the AWS SDK and the Lambda runtime
//! client send no chunked requests). Hand-written: a server crate would split the build's features.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

pub struct Request {
    pub method: String,
    pub path: String,
    #[allow(dead_code)] // the benchmarks' endpoints answer every operation alike
    /// The `X-Amz-Target` header (e.g. `DynamoDB_20120810.PutItem`), or empty.
    pub target: String,
    #[allow(dead_code)] // read by the signature test only
    /// Every header as received, names as sent.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// The next request on a connection; `None` when the peer closed it. `buffer` keeps bytes that
/// belong to the following request. `socket` is a TCP stream or a TLS stream over one.
pub async fn read_request<S: AsyncRead + Unpin>(
    socket: &mut S,
    buffer: &mut Vec<u8>,
) -> Option<Request> {
    let mut chunk = [0u8; 16384];
    let header_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buffer[..header_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut start = lines.next()?.split(' ');
    let (method, path) = (start.next()?.to_owned(), start.next()?.to_owned());
    let headers: Vec<(&str, &str)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(name, value)| (name.trim(), value.trim()))
        .collect();
    let header = |wanted: &str| {
        headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(wanted))
            .map(|(_, value)| *value)
    };
    let length: usize = header("content-length")
        .and_then(|value| value.parse().ok())
        .unwrap_or(0);
    let target = header("x-amz-target").unwrap_or_default().to_owned();
    let headers = headers
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
    while buffer.len() < header_end + length {
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    }
    let body = buffer[header_end..header_end + length].to_vec();
    buffer.drain(..header_end + length);
    Some(Request {
        method,
        path,
        target,
        headers,
        body,
    })
}

pub async fn write_response<S: AsyncWrite + Unpin>(
    socket: &mut S,
    status: u16,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status} Local\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    socket.write_all(&out).await
}
