//! The agent's HTTP/1 connection loop: hyper's, with the bounds `axum::serve`
//! lacks ([`ServeConfig`]). A connection must send each request's header within
//! the header timeout (an idle keep-alive connection is closed after it, a
//! slowloris one too) and its body within the body timeout; at most
//! `max_connections` are open, a new one beyond that closes the oldest, and so does
//! a new one that finds no file descriptor left; shutdown closes every connection
//! within [`SHUTDOWN_GRACE`], whatever its client holds open. The answers hyper
//! writes itself, before any route runs (400, 414 and 431 for a request it cannot
//! parse), carry the same `{"error": ...}` body as every other error answer.

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::Router;
use hyper::body::{Frame, SizeHint};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::jobs::limits::{
    BODY_READ_TIMEOUT, FD_RESERVE, HEADER_READ_TIMEOUT, MAX_CONNECTIONS, MIN_CONNECTIONS,
    SHUTDOWN_GRACE,
};

/// Pause after a failed accept that closing a connection cannot cure (or while no
/// connection is left to close), so the loop does not spin while the condition
/// lasts; also the longest wait for a closed connection to free its descriptor.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// How the agent's server bounds its connections: how many it holds, and how long
/// a request's header and body may take to arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeConfig {
    /// Most connections open at once; a new one beyond closes the oldest.
    pub max_connections: usize,
    /// Time a connection has to send a request's whole header (and an idle
    /// keep-alive connection to send the next one).
    pub header_read_timeout: Duration,
    /// Time a request's body has to arrive once its header has; a body still
    /// missing then is answered 408.
    pub body_read_timeout: Duration,
}

impl ServeConfig {
    /// The bounds for a process that may hold `open_files` file descriptors:
    /// [`MAX_CONNECTIONS`] connections, fewer when those and [`FD_RESERVE`] for the
    /// jobs would not fit (at least [`MIN_CONNECTIONS`]); the header and body
    /// timeouts of [`crate::jobs::limits`].
    pub fn for_open_files(open_files: u64) -> ServeConfig {
        let room = open_files.saturating_sub(FD_RESERVE as u64);
        let max_connections = usize::try_from(room)
            .unwrap_or(usize::MAX)
            .clamp(MIN_CONNECTIONS, MAX_CONNECTIONS);
        ServeConfig {
            max_connections,
            header_read_timeout: HEADER_READ_TIMEOUT,
            body_read_timeout: BODY_READ_TIMEOUT,
        }
    }

    /// The bounds for this process's open-files limit as it is now (raise it
    /// first: [`crate::raise_open_files`]); [`MAX_CONNECTIONS`] when
    /// the limit cannot be read.
    pub fn for_this_process() -> ServeConfig {
        let open_files = nnb_sys::rlimit::open_files().map_or(u64::MAX, |l| l.soft);
        ServeConfig::for_open_files(open_files)
    }
}

/// Whether a failed accept means that this process, or the system, has no file
/// descriptor left (EMFILE, ENFILE): closing a connection frees one.
fn out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Serves `app` on `listener` within `config`'s bounds until `shutdown` completes,
/// then lets requests in flight finish for at most [`SHUTDOWN_GRACE`] and closes
/// every connection.
pub(super) async fn serve(
    listener: TcpListener,
    app: Router,
    config: ServeConfig,
    shutdown: impl Future<Output = ()> + Send,
) {
    tokio::pin!(shutdown);
    let app = app.layer(axum::middleware::map_request_with_state(
        config.body_read_timeout,
        body_deadline,
    ));
    let mut tasks = JoinSet::new();
    // Open connections, oldest first, each with the sender that asks it to close.
    let mut open: BTreeMap<u64, watch::Sender<bool>> = BTreeMap::new();
    let mut next_id = 0u64;
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                if let Ok(id) = done {
                    open.remove(&id);
                }
            }
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) if out_of_descriptors(&e) && !open.is_empty() => {
                        // The connection waiting in the backlog may be a
                        // controller's: make room for it as the cap would, by
                        // closing the oldest, and give that a moment to end.
                        tracing::debug!("agent: accept failed ({e}): closing the oldest connection");
                        if let Some((_, close)) = open.pop_first() {
                            close.send_replace(true);
                        }
                        if let Ok(Some(Ok(id))) =
                            tokio::time::timeout(ACCEPT_BACKOFF, tasks.join_next()).await
                        {
                            open.remove(&id);
                        }
                        continue;
                    }
                    Err(e) => {
                        tracing::debug!("agent: accept failed: {e}");
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                        continue;
                    }
                };
                if open.len() >= config.max_connections {
                    if let Some((_, close)) = open.pop_first() {
                        close.send_replace(true);
                    }
                }
                next_id += 1;
                let (close, closing) = watch::channel(false);
                open.insert(next_id, close);
                tasks.spawn(connection(
                    next_id,
                    stream,
                    app.clone(),
                    config.header_read_timeout,
                    closing,
                ));
            }
        }
    }
    drop(listener);
    for close in open.values() {
        close.send_replace(true);
    }
    let drained = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(SHUTDOWN_GRACE, drained).await.is_err() {
        tracing::warn!(
            left = tasks.len(),
            "agent: connections still open after the shutdown grace: closing them"
        );
    }
    tasks.abort_all();
}

/// Serves one connection until it ends, or until `closing` turns true: then it
/// stops taking requests and gets [`SHUTDOWN_GRACE`] to finish the one in flight.
/// Returns `id`.
async fn connection(
    id: u64,
    stream: TcpStream,
    app: Router,
    header_read_timeout: Duration,
    mut closing: watch::Receiver<bool>,
) -> u64 {
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout)
        .serve_connection(
            TokioIo::new(JsonParseErrors::new(stream)),
            TowerToHyperService::new(app),
        );
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return id,
        _ = closing.wait_for(|c| *c) => {}
    }
    conn.as_mut().graceful_shutdown();
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, conn).await;
    id
}

/// The error a request body gives when it has not arrived within the body timeout.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {} s of its header", .0.as_secs_f64())]
pub(crate) struct BodyTimedOut(pub(crate) Duration);

/// Middleware: bounds the time the request's body may take to arrive, from now
/// (its header has just been read).
async fn body_deadline(State(limit): State<Duration>, req: Request) -> Request {
    req.map(|body| Body::new(Deadline::new(body, limit)))
}

/// A request body that fails with [`BodyTimedOut`] once its time is up. A body
/// nobody reads is never timed.
struct Deadline {
    body: Body,
    limit: Duration,
    timer: Pin<Box<tokio::time::Sleep>>,
}

impl Deadline {
    fn new(body: Body, limit: Duration) -> Deadline {
        Deadline {
            body,
            limit,
            timer: Box::pin(tokio::time::sleep(limit)),
        }
    }
}

impl hyper::body::Body for Deadline {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        ready!(this.timer.as_mut().poll(cx));
        Poll::Ready(Some(Err(axum::Error::new(BodyTimedOut(this.limit)))))
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The connection's socket, with hyper's own error answers made JSON. For a request
/// it cannot parse, hyper answers 400, 414 or 431 with an empty body before any
/// route or middleware runs, and offers no hook to change that answer; it writes
/// it alone, as one buffer (this type does no vectored writes), which is how it is
/// recognised here: an error status, `content-length: 0`, nothing after the head.
/// Every answer the routes give has a body, so none of theirs is touched. Such a
/// head is replaced by the same status with an `{"error": ...}` body and
/// `connection: close` (hyper closes the connection after it anyway).
struct JsonParseErrors<S> {
    inner: S,
    /// The replacement being written, how much of it is written, and how many
    /// bytes of hyper's head it stands for.
    replacing: Option<(Vec<u8>, usize, usize)>,
}

impl<S> JsonParseErrors<S> {
    fn new(inner: S) -> Self {
        JsonParseErrors {
            inner,
            replacing: None,
        }
    }
}

/// The JSON answer that replaces `head` when it is one of hyper's bodiless error
/// answers (see [`JsonParseErrors`]); `None` for anything else.
fn json_parse_error(head: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(head).ok()?;
    let rest = text.strip_prefix("HTTP/1.1 ")?;
    let (status_line, headers) = text.split_once("\r\n")?;
    let status = StatusCode::from_bytes(rest.get(..3)?.as_bytes()).ok()?;
    let headers = headers.strip_suffix("\r\n\r\n")?;
    let bodiless = headers
        .split("\r\n")
        .any(|h| h.eq_ignore_ascii_case("content-length: 0"));
    if !(status.is_client_error() || status.is_server_error()) || !bodiless {
        return None;
    }
    let body = serde_json::to_vec(&crate::jobs::ErrorBody {
        error: crate::reason_message(status),
    })
    .ok()?;
    let mut answer = format!(
        "{status_line}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    answer.extend_from_slice(&body);
    Some(answer)
}

impl<S: AsyncRead + Unpin> AsyncRead for JsonParseErrors<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for JsonParseErrors<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let (answer, written, stands_for) = match this.replacing {
            Some(ref mut replacing) => replacing,
            None => match json_parse_error(buf) {
                Some(answer) => this.replacing.insert((answer, 0, buf.len())),
                None => return Pin::new(&mut this.inner).poll_write(cx, buf),
            },
        };
        while *written < answer.len() {
            let n = ready!(Pin::new(&mut this.inner).poll_write(cx, &answer[*written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *written += n;
        }
        let done = *stands_for;
        this.replacing = None;
        Poll::Ready(Ok(done))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::ServeConfig;
    use crate::{Agent, Token};

    const TOKEN: &str = "server-test-token-0123";

    /// Starts an agent on a loopback port with `config`; it serves until the test's
    /// runtime ends.
    async fn start(config: ServeConfig) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        let agent = Agent::new(
            Token::new(TOKEN).expect("token"),
            IpAddr::V4(Ipv4Addr::LOCALHOST),
        )
        .expect("agent");
        tokio::spawn(crate::serve_with(
            listener,
            agent,
            config,
            std::future::pending(),
        ));
        addr
    }

    /// Sends `request` on a new connection and reads until the agent closes it,
    /// within `timeout`: the answer's status line and body. The request is written
    /// beside the read, so an answer the agent gives before reading it all is seen.
    async fn exchange(
        addr: SocketAddr,
        request: Vec<u8>,
        timeout: Duration,
    ) -> Result<(String, String), String> {
        let talk = async {
            let s = tokio::net::TcpStream::connect(addr)
                .await
                .map_err(|e| format!("connect: {e}"))?;
            let (mut rx, mut tx) = s.into_split();
            let writer = tokio::spawn(async move {
                // The agent may close before taking it all: that is its answer.
                let _ = tx.write_all(&request).await;
                // Keep the write half open: a half-close is no request's end.
                tokio::time::sleep(Duration::from_secs(60)).await;
                drop(tx);
            });
            let mut answer = Vec::new();
            let read = rx.read_to_end(&mut answer).await;
            writer.abort();
            if answer.is_empty() {
                return Err(format!("closed without an answer: {read:?}"));
            }
            let text = String::from_utf8_lossy(&answer).into_owned();
            let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
            let status = head.lines().next().unwrap_or("").to_string();
            Ok((status, body.to_string()))
        };
        tokio::time::timeout(timeout, talk)
            .await
            .map_err(|_| format!("no answer and no close within {timeout:?}"))?
    }

    /// The `error` of a JSON error body, or a panic saying what the body was.
    fn error_of(body: &str) -> String {
        let v: serde_json::Value =
            serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body:?}"));
        v["error"]
            .as_str()
            .unwrap_or_else(|| panic!("no error field: {body}"))
            .to_string()
    }

    /// NL14 (reliability review A11): a token holder's request whose body never
    /// comes (Content-Length 1000 and nothing, or a chunked body left unfinished)
    /// held its connection for good. Now the body timeout answers 408 and closes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_body_that_does_not_arrive_is_answered_408_and_its_connection_closed() {
        let config = ServeConfig {
            body_read_timeout: Duration::from_millis(300),
            ..ServeConfig::for_open_files(u64::MAX)
        };
        let addr = start(config).await;
        let head = |framing: &str| {
            format!(
                "POST /jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\
                 Content-Type: application/json\r\n{framing}\r\n\r\n"
            )
        };
        let missing = head("Content-Length: 1000");
        let unfinished = head("Transfer-Encoding: chunked") + "5\r\n{\"spe";
        for request in [missing, unfinished] {
            let (status, body) = exchange(addr, request.into_bytes(), Duration::from_secs(5))
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(status.starts_with("HTTP/1.1 408"), "{status}");
            let error = error_of(&body);
            assert!(error.contains("did not arrive within 0.3 s"), "{error}");
        }
    }

    /// NL11 (rest of L2): the answers hyper writes itself for a request it cannot
    /// parse (431 for a header over its buffer, 414 for a 70,000-character path,
    /// 400 for bytes that are no request) had an empty body; they now carry the
    /// `{"error": ...}` every other error answer has.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_answers_to_unparseable_requests_are_json() {
        let addr = start(ServeConfig::for_open_files(u64::MAX)).await;
        let big_header = format!(
            "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
            "a".repeat(1 << 20)
        );
        let long_path = format!(
            "GET /jobs/{} HTTP/1.1\r\nHost: x\r\n\r\n",
            "9".repeat(70_000)
        );
        let garbage = "\0\0\0\0 / HTTP/1.1\r\n\r\n".to_string();
        for (request, want, reason) in [
            (big_header, 431, "request header fields too large"),
            (long_path, 414, "uri too long"),
            (garbage, 400, "bad request"),
        ] {
            let (status, body) = exchange(addr, request.into_bytes(), Duration::from_secs(10))
                .await
                .unwrap_or_else(|e| panic!("{want}: {e}"));
            assert!(status.starts_with(&format!("HTTP/1.1 {want} ")), "{status}");
            assert_eq!(error_of(&body), reason);
        }
        // The agent still answers, and its own error answers are untouched.
        let (status, body) = exchange(
            addr,
            b"GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec(),
            Duration::from_secs(5),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(status.starts_with("HTTP/1.1 404"), "{status}");
        assert_eq!(error_of(&body), "no such endpoint");
    }

    /// Arithmetic worked out by hand: 1,024 descriptors leave 1,024 - 256 = 768
    /// connections; 20,000 leave more than the cap of 1,024; 100 would leave none,
    /// and the floor of 16 holds.
    #[test]
    fn the_connection_cap_follows_the_open_files_limit() {
        let cap = |n| ServeConfig::for_open_files(n).max_connections;
        assert_eq!(cap(1024), 768);
        assert_eq!(cap(1280), 1024);
        assert_eq!(cap(20_000), 1024);
        assert_eq!(cap(u64::MAX), 1024);
        assert_eq!(cap(100), 16);
    }

    /// Env var that turns [`helper_agent_without_descriptors`] into the helper.
    const HELPER_ENV: &str = "NNB_TEST_AGENT_EMFILE_HELPER";

    /// Not a test on its own, so ignored: the agent of
    /// `a_connection_that_finds_no_descriptor_left_closes_the_oldest`, run in a
    /// process of its own under `ulimit -n 64` with a connection cap far above
    /// that, so only the eviction on EMFILE can make room. Prints `listening ADDR`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "the helper process of a_connection_that_finds_no_descriptor_left_closes_the_oldest"]
    async fn helper_agent_without_descriptors() {
        if std::env::var_os(HELPER_ENV).is_none() {
            return;
        }
        let addr = start(ServeConfig::for_open_files(u64::MAX)).await;
        println!("listening {addr}");
        tokio::time::sleep(Duration::from_secs(60)).await;
    }

    /// NM8 (reliability review K2): when accept fails for want of a file descriptor
    /// the agent closes its oldest connection, as its connection cap would, so a
    /// controller's new connection gets in. Before, the loop only slept and retried
    /// while the controller's connection waited in the backlog until the header
    /// timeout freed descriptors (10 s): here 3 probes of 2 s each went unanswered.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_connection_that_finds_no_descriptor_left_closes_the_oldest() {
        use std::io::BufRead;
        let mut helper = std::process::Command::new("sh")
            .arg("-c")
            .arg("ulimit -n 64 && exec \"$0\" \"$@\"")
            .arg(std::env::current_exe().expect("test binary"))
            .args([
                "server::tests::helper_agent_without_descriptors",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(HELPER_ENV, "1")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("helper starts");
        let mut lines = std::io::BufReader::new(helper.stdout.take().expect("stdout")).lines();
        let addr: SocketAddr = loop {
            let line = lines
                .next()
                .expect("the helper prints its address")
                .expect("a line");
            // libtest may print the test's name on the same line first.
            if let Some((_, a)) = line.split_once("listening ") {
                break a.trim().parse().expect("an address");
            }
        };
        let mut idle = Vec::new();
        for _ in 0..100 {
            idle.push(tokio::net::TcpStream::connect(addr).await.expect("connect"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut answers = Vec::new();
        for _ in 0..3 {
            let health = format!(
                "GET /health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\
                 Connection: close\r\n\r\n"
            );
            answers.push(exchange(addr, health.into_bytes(), Duration::from_secs(2)).await);
        }
        let _ = helper.kill();
        let _ = helper.wait();
        assert!(
            answers
                .iter()
                .all(|a| matches!(a, Ok((status, _)) if status.starts_with("HTTP/1.1 200"))),
            "health with no descriptor left: {answers:?}"
        );
        drop(idle);
    }
}
