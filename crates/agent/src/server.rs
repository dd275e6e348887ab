//! The agent's HTTP/1 connection loop: hyper's, with the bounds `axum::serve`
//! lacks. A connection must send each request's header within
//! [`HEADER_READ_TIMEOUT`] (an idle keep-alive connection is closed after it, a
//! slowloris one too); at most [`MAX_CONNECTIONS`] are open, a new one beyond that
//! closes the oldest; and shutdown closes every connection within
//! [`SHUTDOWN_GRACE`], whatever its client holds open.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::jobs::limits::{HEADER_READ_TIMEOUT, MAX_CONNECTIONS, SHUTDOWN_GRACE};

/// Pause after a failed accept (e.g. out of file descriptors), so the loop does not
/// spin while the condition lasts.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Serves `app` on `listener` until `shutdown` completes, then lets requests in
/// flight finish for at most [`SHUTDOWN_GRACE`] and closes every connection.
pub(super) async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send,
) {
    tokio::pin!(shutdown);
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
                    Err(e) => {
                        tracing::debug!("agent: accept failed: {e}");
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                        continue;
                    }
                };
                if open.len() >= MAX_CONNECTIONS {
                    if let Some((_, close)) = open.pop_first() {
                        close.send_replace(true);
                    }
                }
                next_id += 1;
                let (close, closing) = watch::channel(false);
                open.insert(next_id, close);
                tasks.spawn(connection(next_id, stream, app.clone(), closing));
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
    mut closing: watch::Receiver<bool>,
) -> u64 {
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .serve_connection(TokioIo::new(stream), TowerToHyperService::new(app));
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return id,
        _ = closing.wait_for(|c| *c) => {}
    }
    conn.as_mut().graceful_shutdown();
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, conn).await;
    id
}
