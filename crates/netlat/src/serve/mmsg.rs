//! The batched receive loop of the UDP sink: [`nnb_sys::mmsg::RecvBatch`] moves up to
//! [`BATCH`] datagrams from many clients per system call; this module runs it until a
//! stop and tells idle wake-ups from real errors (for the reflector's loop too).

use std::io;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};

use nnb_sys::mmsg::Wait;
pub(crate) use nnb_sys::mmsg::{RecvBatch, BATCH};

/// True for the errors a receive timeout or an empty non-blocking socket give.
pub(crate) fn is_idle(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// The receive loop the sink runs: fills `batch` from `socket` (blocking for
/// the first datagram, or busy-polling with `busy_poll`) and hands it with the number
/// of datagrams received to `handle`, until `stop` is set. An idle wake-up (receive
/// timeout, empty socket, signal) just loops; any other receive error is logged
/// under `role` and ends the loop.
pub(crate) fn serve_batches(
    socket: &UdpSocket,
    batch: &mut RecvBatch,
    busy_poll: bool,
    stop: &AtomicBool,
    role: &str,
    mut handle: impl FnMut(&mut RecvBatch, usize),
) {
    let wait = if busy_poll { Wait::Never } else { Wait::ForOne };
    while !stop.load(Ordering::Relaxed) {
        match batch.recv(socket, wait) {
            Ok(n) => handle(batch, n),
            Err(e) if is_idle(&e) => std::hint::spin_loop(),
            Err(e) => {
                tracing::error!("{role} receive failed, {role} stops: {e}");
                return;
            }
        }
    }
}
