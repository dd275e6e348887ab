//! The UDP reflector: answers every valid ping with its pong (the same bytes, kind
//! byte rewritten in place) to the sender, in batches; drops and counts the rest.

use std::net::UdpSocket;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::garbage::{GarbageCounts, GarbageKind};
use super::lock;
use super::mmsg::{self, RecvBatch};
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

/// The reflector loop: receive a batch, turn pings into pongs in place, send them
/// back in one `sendmmsg`, publish counters; until `stop` is set.
pub(crate) fn run(
    socket: UdpSocket,
    busy_poll: bool,
    stop: Arc<AtomicBool>,
    stats: Arc<Mutex<ReflectorStats>>,
) {
    let mut batch = RecvBatch::new(false);
    let mut answer = Vec::with_capacity(mmsg::BATCH);
    mmsg::serve_batches(
        &socket,
        &mut batch,
        busy_poll,
        &stop,
        "reflector",
        |batch, n| {
            answer.clear();
            let mut garbage = GarbageCounts::default();
            for i in 0..n {
                match classify(batch.datagram(i)) {
                    Ok(()) => {
                        Header::turn_into_pong(batch.datagram_mut(i));
                        answer.push(i);
                    }
                    Err(kind) => garbage.add(kind),
                }
            }
            let sent = batch.send_back(&socket, &answer, |e| {
                tracing::debug!("sendmmsg refused a datagram: {e}");
            });
            let mut st = lock(&stats);
            st.reflected += sent as u64;
            st.send_failures += (answer.len() - sent) as u64;
            st.garbage.merge(&garbage);
        },
    );
}
