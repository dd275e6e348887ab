//! `serve`: a UDP reflector for latency probes, a UDP sink for load, and a TCP sink,
//! each on its own thread (the UDP sink on one thread per socket, several sockets
//! sharing its port: [`shards`]), started together by [`Server::start`].
//!
//! Ports are chosen by [`ServeConfig`]: `Some(0)` asks for an ephemeral port (read it
//! back with [`Server::reflector_addr`] and friends), `None` leaves a service off.
//! Every service counts what it drops ([`GarbageCounts`]) and never panics on input;
//! memory is bounded (streams and connections). [`Server::snapshot`] reads all
//! counters at any time; dropping the [`Server`] or calling [`Server::stop`] stops and
//! joins its threads.

pub mod garbage;
pub mod host_udp;
mod mmsg;
pub mod reflector;
pub mod series;
mod shards;
pub mod sink;
pub mod tcp_sink;

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use nnb_sys::socket;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::sendbatch::SocketBuffer;

pub use garbage::{GarbageCounts, GarbageKind};
pub use host_udp::UdpErrors;
pub use reflector::ReflectorStats;
pub use sink::{Rx, SinkOutcome, SinkSnapshot, SinkSocket, SinkState, SinkTotals};
pub use tcp_sink::{TcpReport, TcpSnapshot};

/// How long a blocking UDP receive waits before checking for a stop.
const RECV_TIMEOUT: Duration = Duration::from_millis(100);
/// Most UDP sink sockets (and threads) by default: one per CPU the server may use,
/// up to this many (a NIC spreads its receive work over about as many queues).
pub const DEFAULT_MAX_SINK_THREADS: usize = 16;
/// Most UDP sink sockets (and threads) one may ask for.
pub const MAX_SINK_THREADS: usize = 256;

/// The UDP sink's default socket count: one per CPU this process may run on (its
/// affinity), at most [`DEFAULT_MAX_SINK_THREADS`]; 1 when the affinity cannot be
/// read.
pub fn default_sink_threads() -> usize {
    nnb_sys::affinity::allowed_cpus()
        .map_or(1, |c| c.len())
        .clamp(1, DEFAULT_MAX_SINK_THREADS)
}

/// Checks a UDP sink socket count asked for: 1 to [`MAX_SINK_THREADS`].
pub fn check_sink_threads(n: usize) -> Result<(), String> {
    if (1..=MAX_SINK_THREADS).contains(&n) {
        Ok(())
    } else {
        Err(format!(
            "sink threads must be 1 to {MAX_SINK_THREADS} (one socket and thread each), not {n}"
        ))
    }
}

/// What to serve, where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeConfig {
    /// Address all services bind (127.0.0.1 by default: nothing is exposed unasked).
    pub bind: IpAddr,
    /// UDP reflector port: `Some(0)` ephemeral, `None` off.
    pub reflector_port: Option<u16>,
    /// UDP sink port: `Some(0)` ephemeral, `None` off.
    pub sink_port: Option<u16>,
    /// TCP sink port: `Some(0)` ephemeral, `None` off.
    pub tcp_port: Option<u16>,
    /// Spin on non-blocking receives instead of blocking (lower latency, one busy CPU
    /// per UDP service).
    pub busy_poll: bool,
    /// CPU to pin the reflector thread to.
    pub reflector_cpu: Option<usize>,
    /// CPU to pin the sink thread to (with one socket), or the first sink thread
    /// (with several, the others following in the order of the CPUs this process
    /// may use).
    pub sink_cpu: Option<usize>,
    /// UDP sink sockets bound to its port with `SO_REUSEPORT`, one receiving thread
    /// each: the kernel spreads senders over them by a hash of their addresses.
    /// With several, each thread is pinned to its own CPU (in turn over the CPUs
    /// this process may use). 1 is a single socket without `SO_REUSEPORT` (its
    /// thread pinned only with `sink_cpu`); `None` is [`default_sink_threads`].
    pub sink_threads: Option<usize>,
    /// Most streams the sink tracks at once; the longest idle are evicted beyond it.
    pub max_streams: usize,
    /// Most TCP connections served at once; more are closed on accept.
    pub max_tcp_connections: usize,
    /// A TCP connection that sends nothing for this long is closed, so idle clients
    /// cannot hold the sink's connection slots forever.
    pub tcp_idle_timeout: Duration,
    /// Socket receive buffer to ask for, in bytes (`SO_RCVBUFFORCE` when allowed, else
    /// `SO_RCVBUF`, which the kernel caps at `net.core.rmem_max`); `None` keeps the
    /// system default.
    pub recv_buffer: Option<usize>,
}

impl Default for ServeConfig {
    /// All three services on ephemeral ports of 127.0.0.1, blocking receives.
    fn default() -> Self {
        ServeConfig {
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            reflector_port: Some(0),
            sink_port: Some(0),
            tcp_port: Some(0),
            busy_poll: false,
            reflector_cpu: None,
            sink_cpu: None,
            sink_threads: None,
            max_streams: sink::DEFAULT_MAX_STREAMS,
            max_tcp_connections: tcp_sink::DEFAULT_MAX_CONNECTIONS,
            tcp_idle_timeout: tcp_sink::DEFAULT_IDLE_TIMEOUT,
            recv_buffer: Some(8 << 20),
        }
    }
}

/// Why the server could not start.
#[derive(Debug, Error)]
pub enum ServeError {
    /// A socket could not be bound (port in use, address not local, ...).
    #[error("cannot bind the {service} to {addr}: {source}")]
    Bind {
        /// Which service.
        service: &'static str,
        /// The address asked for.
        addr: SocketAddr,
        /// The system's reason.
        source: io::Error,
    },
    /// A socket option or query failed.
    #[error("cannot set up the {service} socket: {source}")]
    Socket {
        /// Which service.
        service: &'static str,
        /// The system's reason.
        source: io::Error,
    },
    /// A setting is out of its bounds.
    #[error("{0}")]
    Config(String),
    /// A service thread could not be pinned to its CPU.
    #[error("cannot start the {service}: {source}")]
    Pin {
        /// Which service.
        service: &'static str,
        /// The CPU asked for.
        cpu: usize,
        /// The system's reason.
        source: io::Error,
    },
    /// A thread could not be started.
    #[error("cannot start the {service} thread: {source}")]
    Spawn {
        /// Which service.
        service: &'static str,
        /// The system's reason.
        source: io::Error,
    },
}

impl ServeError {
    /// Whether the error is the user's to fix (a CPU to pin to that this process
    /// may not use), not a failure of the network or the machine.
    pub fn is_bad_input(&self) -> bool {
        matches!(self, ServeError::Pin { .. } | ServeError::Config(_))
    }
}

/// Every counter of a running server at one moment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServeSnapshot {
    /// When the snapshot was taken (server monotonic clock, nanoseconds).
    pub taken_ns: u64,
    /// Reflector counters, if it runs.
    pub reflector: Option<ReflectorStats>,
    /// Sink streams and totals, if it runs.
    pub sink: Option<SinkSnapshot>,
    /// TCP sink counters, if it runs.
    pub tcp: Option<TcpSnapshot>,
    /// The UDP sink's receive buffer, asked for and granted, when one was asked for
    /// (a capped buffer overflows in bursts: that loss is the sink's, not the path's).
    #[serde(default)]
    pub sink_recv_buffer: Option<SocketBuffer>,
    /// The reflector's receive buffer, likewise.
    #[serde(default)]
    pub reflector_recv_buffer: Option<SocketBuffer>,
    /// The host's UDP receive errors since the server started (every UDP socket of
    /// its network namespace, IPv4 and IPv6): a cross-check of the sink's own drop
    /// counts (`sink.drops`), which they bound from above; `None` without procfs.
    #[serde(default)]
    pub host_udp_errors: Option<UdpErrors>,
}

impl ServeSnapshot {
    /// Dropped datagrams of the reflector and the sink together, by kind.
    pub fn garbage(&self) -> GarbageCounts {
        let mut g = GarbageCounts::default();
        if let Some(r) = &self.reflector {
            g.merge(&r.garbage);
        }
        if let Some(s) = &self.sink {
            g.merge(&s.garbage);
        }
        g
    }
}

/// Running services; stopped and joined by [`Server::stop`] or on drop.
#[derive(Debug)]
pub struct Server {
    reflector_addr: Option<SocketAddr>,
    sink_addr: Option<SocketAddr>,
    tcp_addr: Option<SocketAddr>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    reflector: Option<Arc<Mutex<ReflectorStats>>>,
    sink: Option<Arc<shards::SinkShards>>,
    tcp: Option<Arc<tcp_sink::TcpShared>>,
    sink_recv_buffer: Option<SocketBuffer>,
    reflector_recv_buffer: Option<SocketBuffer>,
    udp_errors_at_start: Option<UdpErrors>,
}

impl Server {
    /// Binds every configured service and starts its thread (pinned if asked). On
    /// error nothing is left running.
    pub fn start(cfg: &ServeConfig) -> Result<Server, ServeError> {
        let mut server = Server {
            reflector_addr: None,
            sink_addr: None,
            tcp_addr: None,
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
            reflector: None,
            sink: None,
            tcp: None,
            sink_recv_buffer: None,
            reflector_recv_buffer: None,
            udp_errors_at_start: UdpErrors::read(),
        };
        if let Some(port) = cfg.reflector_port {
            let (socket, addr, buffer) = bind_udp("reflector", cfg, port, false)?;
            server.reflector_recv_buffer = buffer;
            let stats = Arc::new(Mutex::new(ReflectorStats::default()));
            let (stop, st, busy) = (Arc::clone(&server.stop), Arc::clone(&stats), cfg.busy_poll);
            server.spawn("reflector", cfg.reflector_cpu, move || {
                reflector::run(socket, busy, stop, st)
            })?;
            server.reflector_addr = Some(addr);
            server.reflector = Some(stats);
        }
        if let Some(port) = cfg.sink_port {
            let threads = cfg.sink_threads.unwrap_or_else(default_sink_threads);
            check_sink_threads(threads).map_err(ServeError::Config)?;
            let cpus = sink_cpus(cfg.sink_cpu, threads)?;
            let (sockets, addr, buffer) = bind_sink(cfg, port, threads)?;
            server.sink_recv_buffer = buffer;
            let shared = Arc::new(shards::SinkShards::new(&cpus, cfg.max_streams));
            let clock = ArrivalClock::new();
            for (index, (socket, cpu)) in (0u16..).zip(sockets.into_iter().zip(cpus)) {
                let (stop, sh, busy) =
                    (Arc::clone(&server.stop), Arc::clone(&shared), cfg.busy_poll);
                server.spawn("sink", cpu, move || {
                    shards::run(socket, index, busy, clock, stop, sh)
                })?;
            }
            server.sink_addr = Some(addr);
            server.sink = Some(shared);
        }
        if let Some(port) = cfg.tcp_port {
            let want = SocketAddr::new(cfg.bind, port);
            let listener = TcpListener::bind(want).map_err(|source| ServeError::Bind {
                service: "TCP sink",
                addr: want,
                source,
            })?;
            let addr = listener.local_addr().map_err(|source| ServeError::Socket {
                service: "TCP sink",
                source,
            })?;
            let shared = Arc::new(tcp_sink::TcpShared::default());
            let limits = tcp_sink::Limits {
                max_connections: cfg.max_tcp_connections.max(1),
                idle_timeout: cfg.tcp_idle_timeout,
            };
            let (stop, sh) = (Arc::clone(&server.stop), Arc::clone(&shared));
            server.spawn("TCP sink", None, move || {
                tcp_sink::run(listener, limits, stop, sh)
            })?;
            server.tcp_addr = Some(addr);
            server.tcp = Some(shared);
        }
        tracing::info!(
            reflector = ?server.reflector_addr,
            sink = ?server.sink_addr,
            tcp = ?server.tcp_addr,
            "serving"
        );
        Ok(server)
    }

    /// Starts `body` on a named thread pinned to `cpu`, waiting until the pinning
    /// succeeded (or failed, which fails the start).
    fn spawn(
        &mut self,
        service: &'static str,
        cpu: Option<usize>,
        body: impl FnOnce() + Send + 'static,
    ) -> Result<(), ServeError> {
        let (tx, rx) = mpsc::channel();
        let handle = std::thread::Builder::new()
            .name(format!("nnb-{}", service.replace(' ', "-").to_lowercase()))
            .spawn(move || {
                let pinned = cpu.map_or(Ok(()), |c| {
                    nnb_sys::affinity::pin_current_thread(c).map_err(io::Error::from)
                });
                let ok = pinned.is_ok();
                let _ = tx.send(pinned);
                if ok {
                    body();
                }
            })
            .map_err(|source| ServeError::Spawn { service, source })?;
        self.threads.push(handle);
        match rx.recv() {
            Ok(Ok(())) => Ok(()),
            Ok(Err(source)) => Err(ServeError::Pin {
                service,
                cpu: cpu.unwrap_or_default(),
                source,
            }),
            Err(_) => Err(ServeError::Spawn {
                service,
                source: io::Error::other("thread exited before starting"),
            }),
        }
    }

    /// Address of the UDP reflector, if it runs.
    pub fn reflector_addr(&self) -> Option<SocketAddr> {
        self.reflector_addr
    }

    /// Address of the UDP sink, if it runs.
    pub fn sink_addr(&self) -> Option<SocketAddr> {
        self.sink_addr
    }

    /// Address of the TCP sink, if it runs.
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        self.tcp_addr
    }

    /// All counters now.
    pub fn snapshot(&self) -> ServeSnapshot {
        ServeSnapshot {
            taken_ns: monotonic_ns(),
            reflector: self.reflector.as_ref().map(|r| *lock(r)),
            sink: self.sink.as_ref().map(|s| s.snapshot()),
            tcp: self.tcp.as_ref().map(|t| t.snapshot()),
            sink_recv_buffer: self.sink_recv_buffer,
            reflector_recv_buffer: self.reflector_recv_buffer,
            host_udp_errors: self
                .udp_errors_at_start
                .zip(UdpErrors::read())
                .map(|(start, now)| now.since(&start)),
        }
    }

    /// Stops every service, waits for its threads, and returns the final counters.
    pub fn stop(mut self) -> ServeSnapshot {
        self.shutdown();
        self.snapshot()
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.threads.drain(..) {
            if h.join().is_err() {
                tracing::error!("a serve thread panicked");
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The CPU of each of the sink's `threads`: with one, `sink_cpu` (or none); with
/// several, in turn over the CPUs this process may use, from `sink_cpu` on.
fn sink_cpus(sink_cpu: Option<usize>, threads: usize) -> Result<Vec<Option<usize>>, ServeError> {
    if threads == 1 {
        return Ok(vec![sink_cpu]);
    }
    let mut cpus = nnb_sys::affinity::allowed_cpus().map_err(|source| ServeError::Socket {
        service: "sink",
        source,
    })?;
    if let Some(first) = sink_cpu {
        match cpus.iter().position(|&c| c == first) {
            Some(i) => cpus.rotate_left(i),
            None => {
                return Err(ServeError::Pin {
                    service: "sink",
                    cpu: first,
                    source: io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "not a CPU this process may run on",
                    ),
                })
            }
        }
    }
    if cpus.is_empty() {
        return Ok(vec![None; threads]);
    }
    Ok((0..threads).map(|i| Some(cpus[i % cpus.len()])).collect())
}

/// Binds the sink's `threads` sockets to one port (a `SO_REUSEPORT` group when
/// several, [`socket::bind_udp_group`]) and sets each up ([`setup_udp`]), with the
/// sink's own drop counts (`SO_RXQ_OVFL`) on. Returns them, their address and the
/// receive buffer granted (the same on each).
fn bind_sink(
    cfg: &ServeConfig,
    port: u16,
    threads: usize,
) -> Result<(Vec<UdpSocket>, SocketAddr, Option<SocketBuffer>), ServeError> {
    let service = "sink";
    let want = SocketAddr::new(cfg.bind, port);
    let bound = if threads == 1 {
        UdpSocket::bind(want).map(|s| vec![s])
    } else {
        socket::bind_udp_group(want, threads)
    };
    let sockets = bound.map_err(|source| ServeError::Bind {
        service,
        addr: want,
        source,
    })?;
    let mut granted = (want, None);
    for s in &sockets {
        granted = setup_udp(service, cfg, s, true)?;
        socket::set_rxq_overflow(s, true)
            .map_err(|source| ServeError::Socket { service, source })?;
    }
    Ok((sockets, granted.0, granted.1))
}

/// Binds one UDP service socket and sets it up ([`setup_udp`]). Returns the socket,
/// its address and its receive buffer as granted, when one was asked for.
fn bind_udp(
    service: &'static str,
    cfg: &ServeConfig,
    port: u16,
    sink: bool,
) -> Result<(UdpSocket, SocketAddr, Option<SocketBuffer>), ServeError> {
    let want = SocketAddr::new(cfg.bind, port);
    let socket = UdpSocket::bind(want).map_err(|source| ServeError::Bind {
        service,
        addr: want,
        source,
    })?;
    let (addr, buffer) = setup_udp(service, cfg, &socket, sink)?;
    Ok((socket, addr, buffer))
}

/// Sets a bound UDP service socket up: receive timeout (so a blocking loop notices a
/// stop), receive buffer, and for the `sink` kernel receive timestamps and coalesced
/// (GRO) receive. Returns its address and its receive buffer as granted, when one
/// was asked for.
fn setup_udp(
    service: &'static str,
    cfg: &ServeConfig,
    socket: &UdpSocket,
    sink: bool,
) -> Result<(SocketAddr, Option<SocketBuffer>), ServeError> {
    let err = |source| ServeError::Socket { service, source };
    socket.set_read_timeout(Some(RECV_TIMEOUT)).map_err(err)?;
    let mut buffer = None;
    if let Some(bytes) = cfg.recv_buffer {
        socket::set_buffer(socket, socket::Direction::Receive, bytes).map_err(err)?;
        buffer = Some(SocketBuffer::read(
            socket,
            socket::Direction::Receive,
            bytes,
        ));
    }
    if sink {
        socket::set_timestamps_ns(socket, true).map_err(err)?;
        // Coalesced receive: a sender's GSO batch arrives as one buffer that the sink
        // splits, instead of one system call per datagram. Kernels before 5.0 lack it.
        if let Err(e) = socket::set_udp_gro(socket, true) {
            tracing::debug!("UDP_GRO unavailable, receiving datagram by datagram: {e}");
        }
    }
    let addr = socket.local_addr().map_err(err)?;
    Ok((addr, buffer))
}

/// The server's clock: `CLOCK_MONOTONIC` in nanoseconds. Not the probes'
/// `CLOCK_MONOTONIC_RAW` ([`crate::clock`]): the sink converts kernel `CLOCK_REALTIME`
/// stamps, and realtime and monotonic are slewed alike, so their offset stays fixed.
pub(crate) fn monotonic_ns() -> u64 {
    nnb_sys::clock::monotonic_ns()
}

/// Maps kernel receive timestamps (`CLOCK_REALTIME`) onto the server's monotonic
/// clock with an offset taken once at start. Kernel stamps are taken when a datagram
/// reaches the socket, so arrival spacing is the network's, not the receive loop's.
/// A step of the realtime clock while serving shifts later arrivals by the step.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ArrivalClock {
    realtime_minus_mono: i128,
}

impl ArrivalClock {
    fn new() -> Self {
        let mono = monotonic_ns();
        let real = nnb_sys::clock::realtime_ns();
        ArrivalClock {
            realtime_minus_mono: i128::from(real) - i128::from(mono),
        }
    }

    /// Arrival time on the monotonic clock: from the kernel stamp when there is one,
    /// else the time now.
    pub(crate) fn arrival_ns(&self, kernel_realtime_ns: Option<u64>) -> u64 {
        match kernel_realtime_ns {
            Some(t) => u64::try_from(i128::from(t) - self.realtime_minus_mono).unwrap_or(0),
            None => monotonic_ns(),
        }
    }
}

/// Locks a mutex, recovering the data if a thread panicked while holding it (the
/// counters stay meaningful).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
