//! A command's output stream, kept bounded: its head (what a metric reads) and its
//! tail (what the result and errors quote), everything between counted and dropped
//! as it arrives, never buffered whole.

use std::collections::VecDeque;
use std::io::Read;
use std::sync::{Arc, Mutex, PoisonError};

/// Bytes read from a pipe at once.
const CHUNK: usize = 64 << 10;

/// What is kept of one output stream.
#[derive(Debug)]
pub(super) struct Capture {
    /// The stream's first bytes, at most `head_limit`.
    head: Vec<u8>,
    head_limit: usize,
    /// The last bytes after the head, at most `tail_limit`.
    tail: VecDeque<u8>,
    tail_limit: usize,
    /// Every byte the stream carried.
    total: u64,
}

impl Capture {
    /// An empty capture keeping `head_limit` bytes from the start and `tail_limit`
    /// from the end.
    pub(super) fn new(head_limit: usize, tail_limit: usize) -> Capture {
        Capture {
            head: Vec::new(),
            head_limit,
            tail: VecDeque::new(),
            tail_limit,
            total: 0,
        }
    }

    /// Takes the next bytes of the stream: into the head while it has room, then
    /// into the tail, whose oldest bytes are dropped beyond its bound.
    pub(super) fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = self.head_limit - self.head.len();
        let (to_head, rest) = bytes.split_at(room.min(bytes.len()));
        self.head.extend_from_slice(to_head);
        bytes = rest;
        if bytes.len() >= self.tail_limit {
            self.tail.clear();
            bytes = &bytes[bytes.len() - self.tail_limit..];
        }
        self.tail.extend(bytes);
        let excess = self.tail.len().saturating_sub(self.tail_limit);
        self.tail.drain(..excess);
    }

    /// Every byte the stream carried.
    pub(super) fn total(&self) -> u64 {
        self.total
    }

    /// Bytes kept neither in the head nor in the tail.
    pub(super) fn dropped(&self) -> u64 {
        self.total - self.head.len() as u64 - self.tail.len() as u64
    }

    /// The head: the stream's first bytes (all of it when it fit).
    pub(super) fn head(&self) -> &[u8] {
        &self.head
    }

    /// The whole stream, if it fit in the head.
    pub(super) fn whole(&self) -> Option<&[u8]> {
        (self.total == self.head.len() as u64).then_some(&self.head[..])
    }

    /// The kept bytes after the head (empty when the stream fit in the head).
    pub(super) fn tail(&self) -> Vec<u8> {
        self.tail.iter().copied().collect()
    }

    /// The stream's last bytes, at most `n`: from the tail, and from the head's end
    /// where nothing was dropped between them.
    pub(super) fn last(&self, n: usize) -> Vec<u8> {
        let tail = self.tail();
        let joined = if self.dropped() == 0 {
            [&self.head[..], &tail[..]].concat()
        } else {
            tail
        };
        joined[joined.len().saturating_sub(n)..].to_vec()
    }
}

/// A capture shared between its reading thread and the job.
pub(super) type Shared = Arc<Mutex<Capture>>;

/// Locks a capture; a reader that panicked leaves what it had read.
pub(super) fn lock(c: &Shared) -> std::sync::MutexGuard<'_, Capture> {
    c.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Reads `pipe` to its end into `capture` on a thread of its own; the handle ends
/// when every writer of the pipe has closed it (or it failed).
pub(super) fn read_into(
    mut pipe: impl Read + Send + 'static,
    capture: Shared,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("command-output".into())
        .spawn(move || {
            let mut buf = vec![0u8; CHUNK];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => lock(&capture).push(&buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        tracing::warn!("a command's output could not be read to its end: {e}");
                        break;
                    }
                }
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_and_the_tail_are_kept_and_the_middle_counted() {
        let mut c = Capture::new(4, 3);
        c.push(b"ab");
        assert_eq!((c.whole(), c.last(10)), (Some(&b"ab"[..]), b"ab".to_vec()));
        c.push(b"cdefg");
        c.push(b"hij");
        // 10 bytes: head "abcd", tail "hij", "efg" dropped.
        assert_eq!((c.head(), c.tail()), (&b"abcd"[..], b"hij".to_vec()));
        assert_eq!((c.total(), c.dropped(), c.whole()), (10, 3, None));
        assert_eq!(c.last(2), b"ij".to_vec());
        // A chunk longer than the tail replaces it.
        c.push(b"0123456789");
        assert_eq!((c.tail(), c.dropped()), (b"789".to_vec(), 13));
        // Nothing dropped yet: the last bytes run from the head into the tail.
        let mut d = Capture::new(4, 3);
        d.push(b"abcdef");
        assert_eq!((d.dropped(), d.last(4)), (0, b"cdef".to_vec()));
    }
}
