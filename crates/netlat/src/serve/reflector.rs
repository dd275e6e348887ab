//! The UDP reflector: answers every valid ping with its pong (the same bytes, kind
//! byte rewritten in place) to the sender, one datagram at a time; drops and counts
//! the rest. A ping that asks for it ([`crate::wire::FLAG_STAMP_RECEIVE`], Badabing's
//! one-way delays) also gets the reflector's receive time written into its payload.

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::garbage::{GarbageCounts, GarbageKind};
use super::lock;
use super::mmsg;
use crate::wire::{Header, Kind};

/// The reflector's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReflectorStats {
    /// Pings answered.
    pub reflected: u64,
    /// Pongs the kernel refused to send (full send buffer, unreachable sender).
    pub send_failures: u64,
    /// Dropped datagrams by kind.
    pub garbage: GarbageCounts,
}

/// Whether a datagram is a ping the reflector answers, or why it is dropped.
pub fn classify(datagram: &[u8]) -> Result<(), GarbageKind> {
    match Header::decode(datagram) {
        Ok(h) if h.kind == Kind::Ping => Ok(()),
        Ok(_) => Err(GarbageKind::WrongKind),
        Err(e) => Err(GarbageKind::from(&e)),
    }
}

/// The reflector loop: receive one datagram, turn a ping into its pong in place, send
/// it straight back, publish counters; until `stop` is set. One `recvfrom` and one
/// `sendto` per ping, as sockperf's server makes: a batched receive (`recvmmsg`) adds
/// a second, empty receive attempt to every round trip of a ping-pong probe, which
/// sends its next ping only after this pong arrives (busy-poll p50 on loopback: 6.60
/// µs batched, 6.21 µs so, sockperf 6.39 µs; medians of 8 interleaved runs). Busy-polls
/// a non-blocking socket with `busy_poll`, else blocks until a datagram or the
/// socket's receive timeout.
pub(crate) fn run(
    socket: UdpSocket,
    busy_poll: bool,
    stop: Arc<AtomicBool>,
    stats: Arc<Mutex<ReflectorStats>>,
) {
    if let Err(e) = socket.set_nonblocking(busy_poll) {
        tracing::error!("reflector cannot set its socket's blocking mode, reflector stops: {e}");
        return;
    }
    let mut buf = vec![0u8; nnb_sys::mmsg::BUF_LEN];
    while !stop.load(Ordering::Relaxed) {
        let (len, peer, received_ns) = match socket.recv_from(&mut buf) {
            Ok((len, peer)) => (len, peer, crate::clock::now_ns()),
            Err(e) if mmsg::is_idle(&e) => {
                std::hint::spin_loop();
                continue;
            }
            Err(e) => {
                tracing::error!("reflector receive failed, reflector stops: {e}");
                return;
            }
        };
        let datagram = &mut buf[..len];
        let verdict = classify(datagram);
        let sent = verdict.is_ok() && {
            Header::stamp_receive(datagram, received_ns);
            Header::turn_into_pong(datagram);
            match socket.send_to(datagram, peer) {
                Ok(_) => true,
                Err(e) => {
                    tracing::debug!("sendto refused a pong to {peer}: {e}");
                    false
                }
            }
        };
        let mut st = lock(&stats);
        match verdict {
            Ok(()) if sent => st.reflected += 1,
            Ok(()) => st.send_failures += 1,
            Err(kind) => st.garbage.add(kind),
        }
    }
}
