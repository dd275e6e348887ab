//! The UDP sink across cores: several sockets bound to one port with `SO_REUSEPORT`
//! (the kernel spreads senders over them by a hash of their addresses), one receiving
//! thread per socket, each pinned to its own CPU, and the streams' state in shards
//! keyed by the sender's address, each behind its own lock.
//!
//! Sharding by sender address, not by socket, keeps every answer right wherever a
//! datagram lands: a stream's data and its report, series and fine requests (all
//! from one address) reach one shard whichever socket they came in on, and a
//! sender's garbage is counted beside its streams. A thread locks a shard once per
//! run of datagrams of that shard in a batch (a load's batches are long runs of one
//! sender); two threads wait on each other only when senders of one shard arrive on
//! two sockets at once. With one socket there is one shard, as before.
//!
//! Each thread also keeps its socket's counters ([`SinkSocket`]): datagrams received
//! and the kernel's drop count (`SO_RXQ_OVFL`), which the snapshot sums into the
//! sink's own drops.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::mmsg::{self, RecvBatch, BATCH};
use super::sink::{segments, Rx, SinkOutcome, SinkSnapshot, SinkSocket, SinkState};
use super::{lock, ArrivalClock};

/// Shards per receiving thread: more shards than threads make two threads rarely
/// want the same one at once.
const SHARDS_PER_THREAD: usize = 4;
/// Most shards.
const MAX_SHARDS: usize = 256;

/// How long a blocking sink thread sleeps after a batch that emptied its socket
/// before it receives again. A receiver blocked on an empty socket is woken by each
/// arriving datagram, and on loopback or a local veth that wake-up (often an
/// inter-processor interrupt, dear in a VM) is paid by the sender's CPU: the sink
/// would slow the very load it measures. Asleep in between, it is not on the
/// socket's wait queue, the datagrams queue up (the 8 MiB receive buffer holds
/// milliseconds of a full-rate stream) and the next call takes a batch. Arrival times
/// come from the kernel's receive timestamps, so the nap moves no measured figure;
/// busy-polling never naps.
const RECEIVE_NAP: Duration = Duration::from_micros(50);

/// One receive socket's counters, written by its thread alone.
#[derive(Debug, Default)]
struct SocketCounters {
    cpu: Option<usize>,
    datagrams: AtomicU64,
    /// The latest drop count seen (the kernel's `sk_drops`, wrapping at 2^32).
    drops: AtomicU32,
}

/// The state every sink thread shares: the stream shards and each socket's
/// counters.
#[derive(Debug)]
pub(crate) struct SinkShards {
    shards: Box<[Mutex<SinkState>]>,
    sockets: Box<[SocketCounters]>,
}

impl SinkShards {
    /// State for a sink of one socket per entry of `cpus` (each thread's CPU, if
    /// pinned) that tracks about `max_streams` streams: split evenly between the
    /// shards (rounded up, so the bound may be exceeded by less than one per shard).
    pub(crate) fn new(cpus: &[Option<usize>], max_streams: usize) -> Self {
        let threads = cpus.len().max(1);
        let count = if threads == 1 {
            1
        } else {
            (threads * SHARDS_PER_THREAD).min(MAX_SHARDS)
        };
        let per_shard = max_streams.max(1).div_ceil(count);
        SinkShards {
            shards: (0..count)
                .map(|_| Mutex::new(SinkState::new(per_shard)))
                .collect(),
            sockets: cpus
                .iter()
                .map(|&cpu| SocketCounters {
                    cpu,
                    ..SocketCounters::default()
                })
                .collect(),
        }
    }

    /// The shard of `peer`'s streams: a multiplicative hash of its address.
    fn shard_of(&self, peer: &SocketAddr) -> usize {
        let n = self.shards.len();
        if n == 1 {
            return 0;
        }
        let key = match peer {
            SocketAddr::V4(a) => (u64::from(u32::from(*a.ip())) << 16) | u64::from(a.port()),
            SocketAddr::V6(a) => {
                let ip = u128::from(*a.ip());
                (ip as u64) ^ ((ip >> 64) as u64).rotate_left(17) ^ u64::from(a.port())
            }
        };
        let mixed = key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        usize::try_from(mixed).unwrap_or(0) % n
    }

    /// Every shard's streams and totals, and every socket's counters.
    pub(crate) fn snapshot(&self) -> SinkSnapshot {
        let mut snap = SinkSnapshot::default();
        for shard in self.shards.iter() {
            snap.merge(lock(shard).snapshot());
        }
        snap.sockets = self
            .sockets
            .iter()
            .map(|c| SinkSocket {
                cpu: c.cpu,
                datagrams: c.datagrams.load(Ordering::Relaxed),
                drops: u64::from(c.drops.load(Ordering::Relaxed)),
            })
            .collect();
        snap.drops = snap.sockets.iter().map(|s| s.drops).sum();
        snap
    }
}

/// One sink thread's receive loop on socket `index` of `shared`: batches of
/// datagrams stamped by the kernel on arrival, each handled under its sender's
/// shard's lock, until `stop` is set.
pub(crate) fn run(
    socket: UdpSocket,
    index: u16,
    busy_poll: bool,
    clock: ArrivalClock,
    stop: Arc<AtomicBool>,
    shared: Arc<SinkShards>,
) {
    let mut batch = RecvBatch::new(true);
    let mut reply = Vec::new();
    let Some(counters) = shared.sockets.get(usize::from(index)) else {
        tracing::error!(index, "sink socket without counters, not receiving");
        return;
    };
    mmsg::serve_batches(&socket, &mut batch, busy_poll, &stop, "sink", |batch, n| {
        let mut held: Option<(usize, MutexGuard<'_, SinkState>)> = None;
        let mut datagrams = 0u64;
        let mut drops = None;
        for i in 0..n {
            let Some(peer) = batch.peer(i) else { continue };
            let arrival = clock.arrival_ns(batch.kernel_timestamp_ns(i));
            // No count yet means the socket has dropped nothing.
            let rx = Rx {
                socket: index,
                drops: batch.drop_count(i).unwrap_or(0),
            };
            drops = Some(rx.drops);
            let shard = shared.shard_of(&peer);
            if held.as_ref().map(|(s, _)| *s) != Some(shard) {
                // One lock at a time (the held one first): no two threads can each
                // hold a shard the other waits for.
                drop(held.take());
                held = Some((shard, lock(&shared.shards[shard])));
            }
            let Some((_, st)) = held.as_mut() else {
                continue;
            };
            for datagram in segments(batch.datagram(i), batch.gro_segment_size(i)) {
                datagrams += 1;
                if st.handle_rx(peer, datagram, arrival, rx, &mut reply) == SinkOutcome::Report
                    && !reply.is_empty()
                {
                    if let Err(e) = socket.send_to(&reply, peer) {
                        tracing::warn!(%peer, "cannot send report: {e}");
                    }
                }
            }
        }
        drop(held);
        counters.datagrams.fetch_add(datagrams, Ordering::Relaxed);
        if let Some(d) = drops {
            counters.drops.store(d, Ordering::Relaxed);
        }
        if !busy_poll && n < BATCH {
            std::thread::sleep(RECEIVE_NAP);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{decode_report, encode_request};
    use crate::wire::{Header, Kind, HEADER_LEN};

    #[test]
    fn one_socket_is_one_shard_and_many_spread_senders() {
        let one = SinkShards::new(&[None], 4096);
        assert_eq!(one.shards.len(), 1);
        let peer: SocketAddr = "10.0.0.1:5000".parse().unwrap();
        assert_eq!(one.shard_of(&peer), 0);
        let four = SinkShards::new(&[Some(0), Some(1), Some(2), Some(3)], 4096);
        assert_eq!(four.shards.len(), 16);
        // 64 senders of one host, consecutive ports (a load's streams), land on
        // most shards, and each always on the same one.
        let mut used = [0usize; 16];
        for port in 40_000..40_064u16 {
            let p = SocketAddr::from(([10, 0, 0, 1], port));
            assert_eq!(four.shard_of(&p), four.shard_of(&p));
            used[four.shard_of(&p)] += 1;
        }
        assert!(used.iter().filter(|&&n| n > 0).count() >= 12, "{used:?}");
        let v6: SocketAddr = "[fe80::1]:9".parse().unwrap();
        assert!(four.shard_of(&v6) < 16);
    }

    #[test]
    fn a_request_is_answered_on_whichever_socket_it_arrives() {
        // Two sockets of one sink (apart here, so the test picks where each
        // datagram lands): data on the first, the request on the second.
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        let (to_a, to_b) = (a.local_addr().unwrap(), b.local_addr().unwrap());
        let shared = Arc::new(SinkShards::new(&[None, None], 64));
        let stop = Arc::new(AtomicBool::new(false));
        let clock = ArrivalClock::new();
        let threads: Vec<_> = [(a, 0u16), (b, 1)]
            .into_iter()
            .map(|(sock, i)| {
                sock.set_read_timeout(Some(Duration::from_millis(20)))
                    .unwrap();
                let (stop, sh) = (Arc::clone(&stop), Arc::clone(&shared));
                std::thread::spawn(move || run(sock, i, false, clock, stop, sh))
            })
            .collect();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        for seq in 0..10u64 {
            let mut d = vec![0u8; 300];
            Header {
                kind: Kind::Load,
                flags: 0,
                seq,
                send_ts: 0,
                stream: 4,
                payload_len: (300 - HEADER_LEN) as u32,
            }
            .encode(&mut d);
            client.send_to(&d, to_a).unwrap();
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while shared.snapshot().totals.bytes < 3000 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        client.send_to(&encode_request(4, 1, 0), to_b).unwrap();
        let mut buf = [0u8; 2048];
        let (n, from) = client.recv_from(&mut buf).expect("an answer");
        assert_eq!(from, to_b);
        let (_, r) = decode_report(&buf[..n]).unwrap();
        assert_eq!((r.seq.received, r.bytes), (10, 3000));
        assert_eq!(
            r.socket,
            Some(1),
            "the request's socket is the stream's latest"
        );
        // The request's socket counts it after answering: wait for the count.
        let counts = |snap: &SinkSnapshot| -> Vec<u64> {
            snap.sockets.iter().map(|s| s.datagrams).collect()
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        let mut snap = shared.snapshot();
        while counts(&snap) != [10, 1] && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
            snap = shared.snapshot();
        }
        assert_eq!(counts(&snap), [10, 1]);
        assert_eq!(snap.drops, 0);
        stop.store(true, Ordering::Relaxed);
        for t in threads {
            t.join().unwrap();
        }
    }
}
