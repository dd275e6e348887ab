//! A tiny HTTP/1.1 proxy between the SDK and moto that records every request and can answer
//! RunInstances with an EC2 error, to test a launch that fails part-way.
//!
//! One request per connection: the proxy reads the request (head + Content-Length body),
//! forwards it to moto with `Connection: close`, relays the answer with `Connection: close`
//! and closes, so the SDK opens a fresh connection for the next request.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The EC2 error a failing RunInstances gets (what EC2 says when a host is full).
const FAULT_CODE: &str = "InsufficientInstanceCapacity";

/// A running proxy; stops with the test's runtime.
pub(crate) struct FaultProxy {
    /// Where the SDK should send its requests.
    pub endpoint: String,
    requests: Arc<Mutex<Vec<String>>>,
}

/// How RunInstances calls fail, from the k-th (1-based) on: the SDK's retries fail too.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Fault {
    /// Answer with InsufficientInstanceCapacity without telling moto: nothing is launched.
    Refuse(usize),
    /// Forward to moto (the instance is launched) but answer with the error: the answer
    /// is lost, as when the controller is interrupted during the call.
    LoseAnswer(usize),
}

/// Where the proxy forwards and how it fails.
struct Rules {
    upstream: SocketAddr,
    fault: Option<Fault>,
    run_instances_seen: AtomicUsize,
}

impl FaultProxy {
    /// Starts a proxy to moto at `upstream` ("http://127.0.0.1:PORT"), failing RunInstances
    /// calls as `fault` says.
    pub(crate) async fn start(upstream: &str, fault: Option<Fault>) -> FaultProxy {
        let upstream: SocketAddr = upstream
            .trim_start_matches("http://")
            .parse()
            .expect("moto endpoint is http://IP:PORT");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let endpoint = format!("http://{}", listener.local_addr().expect("proxy address"));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let rules = Arc::new(Rules {
            upstream,
            fault,
            run_instances_seen: AtomicUsize::new(0),
        });
        let log = Arc::clone(&requests);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (rules, log) = (Arc::clone(&rules), Arc::clone(&log));
                tokio::spawn(async move {
                    if let Err(e) = serve(client, &rules, &log).await {
                        eprintln!("fault proxy: {e}");
                    }
                });
            }
        });
        FaultProxy { endpoint, requests }
    }

    /// The bodies (form-encoded EC2 query requests) of every request so far, in order.
    pub(crate) fn requests(&self) -> Vec<String> {
        self.requests.lock().expect("request log").clone()
    }

    /// The recorded bodies of the requests for EC2 action `action`.
    pub(crate) fn calls(&self, action: &str) -> Vec<String> {
        let needle = format!("Action={action}&");
        self.requests()
            .into_iter()
            .filter(|b| b.starts_with(&needle) || b.contains(&format!("&{needle}")))
            .collect()
    }
}

/// Handles one connection: one request, one answer.
async fn serve(
    mut client: TcpStream,
    rules: &Rules,
    log: &Mutex<Vec<String>>,
) -> std::io::Result<()> {
    let (head, body) = read_message(&mut client).await?;
    let text = String::from_utf8_lossy(&body).into_owned();
    log.lock().expect("request log").push(text.clone());
    let fault = if text.contains("Action=RunInstances") {
        let n = rules.run_instances_seen.fetch_add(1, Ordering::SeqCst) + 1;
        rules.fault.filter(|f| match f {
            Fault::Refuse(k) | Fault::LoseAnswer(k) => n >= *k,
        })
    } else {
        None
    };
    if matches!(fault, Some(Fault::Refuse(_))) {
        client.write_all(&ec2_error()).await?;
        return client.shutdown().await;
    }
    let answer = {
        let mut upstream = TcpStream::connect(rules.upstream).await?;
        upstream.write_all(&close_after(&head)).await?;
        upstream.write_all(&body).await?;
        let mut answer = Vec::new();
        upstream.read_to_end(&mut answer).await?;
        let split = find(&answer, b"\r\n\r\n").map_or(answer.len(), |i| i + 4);
        let mut relayed = close_after(&answer[..split]);
        relayed.extend_from_slice(&answer[split..]);
        relayed
    };
    let answer = if fault.is_some() { ec2_error() } else { answer };
    client.write_all(&answer).await?;
    client.shutdown().await
}

/// Reads one HTTP message head and its Content-Length body.
async fn read_message(stream: &mut TcpStream) -> std::io::Result<(Vec<u8>, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::Error::other("connection closed inside the head"));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = buf[..head_end].to_vec();
    let length = String::from_utf8_lossy(&head)
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::Error::other("connection closed inside the body"));
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Ok((head, body))
}

/// `head` (ending in an empty line) with its Connection header replaced by `Connection: close`.
fn close_after(head: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(head);
    let mut out: String = text
        .split("\r\n")
        .filter(|l| !l.is_empty() && !l.to_ascii_lowercase().starts_with("connection:"))
        .map(|l| format!("{l}\r\n"))
        .collect();
    out.push_str("Connection: close\r\n\r\n");
    out.into_bytes()
}

/// An EC2 query-protocol error answer, as EC2 sends it for a full host.
fn ec2_error() -> Vec<u8> {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{FAULT_CODE}</Code>\
         <Message>Insufficient capacity on the dedicated host (injected by the test proxy).</Message>\
         </Error></Errors><RequestID>fault-proxy</RequestID></Response>"
    );
    format!(
        "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/xml;charset=UTF-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Position of `needle` in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
