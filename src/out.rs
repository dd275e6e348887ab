//! The one writer of nnb's output on stdout.
//!
//! Every subcommand writes through an [`Out`]: stdout behind one buffer, so a table
//! goes out in few system calls, each under stdout's lock (the writer is `Send`: a
//! measurement's interval callback on another thread may print through it). A write
//! error (above all a closed pipe, `nnb topo | head -1`) is returned like any other
//! error; `main` ends the program quietly with exit 0 when it was a closed pipe
//! ([`is_broken_pipe`]), the way ripgrep does.

use std::io::{self, BufWriter, Stdout, Write};

/// Buffered, locked stdout. Lines that must be seen while the command still runs
/// (a server's "listening" line) are followed by [`Write::flush`].
#[derive(Debug)]
pub(crate) struct Out(BufWriter<Stdout>);

impl Out {
    /// The program's stdout.
    pub(crate) fn stdout() -> Out {
        Out(BufWriter::new(io::stdout()))
    }
}

impl Write for Out {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// True when the reader of stdout went away: an `io::Error` of kind `BrokenPipe`
/// anywhere in the error's chain.
pub(crate) fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}
