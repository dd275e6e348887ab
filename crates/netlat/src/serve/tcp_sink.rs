//! The TCP sink: accepts connections (one thread each, at most a bounded number at
//! once), counts the bytes each one sends, and when the client half-closes (shuts
//! down its write side) answers with one JSON line, a [`TcpAnswer`], then closes.
//!
//! Each read is timed on return and its bytes recorded as arrival checkpoints
//! ([`crate::grain::Arrivals`]); the answer carries them as the ends of 16 KiB
//! grains, from which the load cuts its fine-grained series and buffer bursts for
//! any grain it likes. A read is the receiving application's view (what the
//! seed's TCPTest receiver saw), not the wire's: reads are at most [`READ_BYTES`],
//! so a 256 KiB grain spans several of them.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{lock, monotonic_ns};
use crate::grain::{Arrivals, GrainEnds, CHECKPOINT_BYTES};

/// Default bound on connections served at once; more are closed on accept.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// Default time a connection may send nothing before the sink closes it.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// What bounds the TCP sink's connections.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Connections served at once.
    pub(crate) max_connections: usize,
    /// Silence after which a connection is closed.
    pub(crate) idle_timeout: Duration,
}
/// Finished connections kept for snapshots.
const RECENT: usize = 64;
/// How often blocked accept and read calls wake to check for a stop.
const POLL: Duration = Duration::from_millis(100);
/// Most bytes one read takes (64 KiB): a quarter of the seed's grain, so a grain's
/// end is timed by the read that completed it, not by a read of several grains.
pub const READ_BYTES: usize = 64 * 1024;

/// The sink's view of one finished TCP connection; also the JSON line it answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TcpReport {
    /// Client address as `ip:port`.
    pub peer: String,
    /// Bytes received.
    pub bytes: u64,
    /// From the first read that returned data to the last one, in nanoseconds.
    pub duration_ns: u64,
    /// The bytes read after the first read, in bit/s over `duration_ns`: the first
    /// read's bytes arrived before the window opened, so counting them would
    /// overstate the rate. 0 when fewer than two reads returned data (too short to
    /// time).
    pub rate_bps: f64,
    /// The receive buffer a load's hello asked for ([`crate::load::tcp_hello`]), as
    /// `getsockopt(SO_RCVBUF)` read it back after setting it (Linux doubles the
    /// size asked for); absent without a hello.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recv_buffer_granted: Option<u64>,
}

/// The line a TCP sink answers: its [`TcpReport`] and the connection's arrival
/// checkpoints (the ends of its [`CHECKPOINT_BYTES`] grains).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TcpAnswer {
    /// What the sink saw.
    #[serde(flatten)]
    pub report: TcpReport,
    /// Ends of the connection's 16 KiB grains, for [`GrainEnds::coarsen`]; absent
    /// from a sink older than this field.
    #[serde(default)]
    pub checkpoints: Option<GrainEnds>,
}

/// The TCP sink's counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpSnapshot {
    /// Connections accepted and served.
    pub accepted: u64,
    /// Connections closed at once because the bound was reached.
    pub refused: u64,
    /// Connections closed after sending nothing for the idle timeout.
    #[serde(default)]
    pub idle_closed: u64,
    /// Connections being served now.
    pub active: u64,
    /// Bytes received over all connections, live ones included.
    pub bytes: u64,
    /// The most recent finished connections, oldest first.
    pub recent: Vec<TcpReport>,
}

/// State shared between the accept thread, connection threads and snapshots.
#[derive(Debug, Default)]
pub(crate) struct TcpShared {
    accepted: AtomicU64,
    refused: AtomicU64,
    idle_closed: AtomicU64,
    active: AtomicU64,
    bytes: AtomicU64,
    recent: Mutex<VecDeque<TcpReport>>,
}

impl TcpShared {
    /// The counters now.
    pub(crate) fn snapshot(&self) -> TcpSnapshot {
        TcpSnapshot {
            accepted: self.accepted.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            idle_closed: self.idle_closed.load(Ordering::Relaxed),
            active: self.active.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            recent: lock(&self.recent).iter().cloned().collect(),
        }
    }
}

/// The accept loop: waits for connections with `poll` (so it notices `stop`),
/// serves each on its own thread, joins them all before returning.
pub(crate) fn run(
    listener: TcpListener,
    limits: Limits,
    stop: Arc<AtomicBool>,
    shared: Arc<TcpShared>,
) {
    let max_connections = limits.max_connections;
    let mut conns: Vec<JoinHandle<()>> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        if !nnb_sys::socket::wait_readable(&listener, POLL) {
            continue;
        }
        let (stream, peer) = match listener.accept() {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!("accept failed: {e}");
                continue;
            }
        };
        conns.retain(|h| !h.is_finished());
        if conns.len() >= max_connections {
            // Said once, then only counted: a client must not flood the log.
            if shared.refused.fetch_add(1, Ordering::Relaxed) == 0 {
                tracing::warn!(
                    %peer,
                    "TCP sink full ({max_connections} connections), refusing; further \
                     refusals are only counted"
                );
            }
            continue;
        }
        shared.accepted.fetch_add(1, Ordering::Relaxed);
        shared.active.fetch_add(1, Ordering::Relaxed);
        let (stop, shared2) = (Arc::clone(&stop), Arc::clone(&shared));
        let spawned = std::thread::Builder::new()
            .name("nnb-tcp-conn".into())
            .spawn(move || {
                if let Err(e) = serve_connection(stream, peer, limits.idle_timeout, &stop, &shared2)
                {
                    tracing::debug!(%peer, "TCP connection ended: {e}");
                }
                shared2.active.fetch_sub(1, Ordering::Relaxed);
            });
        match spawned {
            Ok(h) => conns.push(h),
            Err(e) => {
                shared.active.fetch_sub(1, Ordering::Relaxed);
                tracing::warn!(%peer, "cannot start a connection thread: {e}");
            }
        }
    }
    for h in conns {
        if h.join().is_err() {
            tracing::error!("a TCP connection thread panicked");
        }
    }
}

/// Reads until the client's half-close, counting bytes, then answers the report line.
fn serve_connection(
    mut stream: TcpStream,
    peer: SocketAddr,
    idle_timeout: Duration,
    stop: &AtomicBool,
    shared: &TcpShared,
) -> io::Result<()> {
    stream.set_read_timeout(Some(POLL.min(idle_timeout)))?;
    let recv_buffer_granted = read_hello(&mut stream, idle_timeout, stop)?;
    let mut buf = vec![0u8; READ_BYTES];
    let mut arrivals = Arrivals::default();
    let (mut bytes, mut first_bytes, mut first_ns, mut last_ns) = (0u64, 0u64, 0u64, 0u64);
    let idle_ns = u64::try_from(idle_timeout.as_nanos()).unwrap_or(u64::MAX);
    let mut active_ns = monotonic_ns();
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                last_ns = monotonic_ns();
                active_ns = last_ns;
                if bytes == 0 {
                    first_ns = last_ns;
                    first_bytes = n as u64;
                }
                bytes += n as u64;
                arrivals.record(last_ns, n as u64);
                shared.bytes.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                if stop.load(Ordering::Relaxed) {
                    return Ok(());
                }
                if monotonic_ns().saturating_sub(active_ns) >= idle_ns {
                    shared.idle_closed.fetch_add(1, Ordering::Relaxed);
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("nothing received for {idle_timeout:?}: closed"),
                    ));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let duration_ns = last_ns.saturating_sub(first_ns);
    let report = TcpReport {
        peer: peer.to_string(),
        bytes,
        duration_ns,
        rate_bps: if duration_ns == 0 {
            0.0
        } else {
            (bytes - first_bytes) as f64 * 8e9 / duration_ns as f64
        },
        recv_buffer_granted,
    };
    let answer = TcpAnswer {
        report: report.clone(),
        checkpoints: Some(arrivals.grain_ends(CHECKPOINT_BYTES)),
    };
    let mut line = serde_json::to_vec(&answer).map_err(io::Error::other)?;
    line.push(b'\n');
    {
        let mut recent = lock(&shared.recent);
        if recent.len() == RECENT {
            recent.pop_front();
        }
        recent.push_back(report);
    }
    stream.write_all(&line)?;
    stream.shutdown(Shutdown::Both)
}

/// Reads a load's hello ([`crate::load::TCP_HELLO_MAGIC`] and a receive buffer
/// size) when the connection starts with one, before any data, and sets that
/// receive buffer (the receive window) on the socket; returns it as `SO_RCVBUF`
/// reads back. A connection whose first bytes are not the magic is left unread
/// (`None`). Waits at most `idle_timeout` for a hello's missing bytes.
fn read_hello(
    stream: &mut TcpStream,
    idle_timeout: Duration,
    stop: &AtomicBool,
) -> io::Result<Option<u64>> {
    use crate::load::{TCP_HELLO_LEN, TCP_HELLO_MAGIC};
    let mut head = [0u8; TCP_HELLO_LEN];
    let give_up =
        monotonic_ns().saturating_add(u64::try_from(idle_timeout.as_nanos()).unwrap_or(u64::MAX));
    loop {
        match stream.peek(&mut head) {
            Ok(0) => return Ok(None),
            Ok(n) => {
                let m = n.min(TCP_HELLO_MAGIC.len());
                if head[..m] != TCP_HELLO_MAGIC[..m] {
                    return Ok(None);
                }
                if n == TCP_HELLO_LEN {
                    break;
                }
                // Part of a hello: the rest is on its way.
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        if stop.load(Ordering::Relaxed) || monotonic_ns() >= give_up {
            return Ok(None);
        }
    }
    stream.read_exact(&mut head)?;
    let mut size = [0u8; 4];
    size.copy_from_slice(&head[TCP_HELLO_MAGIC.len()..]);
    let asked = u32::from_be_bytes(size) as usize;
    let dir = nnb_sys::socket::Direction::Receive;
    if let Err(e) = nnb_sys::socket::set_buffer(&*stream, dir, asked) {
        tracing::debug!("could not set a TCP receive buffer of {asked} bytes: {e}");
    }
    Ok(nnb_sys::socket::buffer_size(&*stream, dir)
        .ok()
        .map(|b| b as u64))
}
