//! One measuring test at a time: the tests of this binary run in parallel threads,
//! and on a small machine (2 CPUs here) a second test measuring CPU time, disk
//! operations or memory would take what the first one measures.

use std::future::Future;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Holds the machine for the calling test until the guard is dropped. A test that
/// panicked while holding it leaves it usable by the next one.
pub(crate) fn hold_machine() -> MutexGuard<'static, ()> {
    static MACHINE: Mutex<()> = Mutex::new(());
    MACHINE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs `test` on a runtime of its own while holding the machine. A fleet launched
/// in it is launched from this thread, which outlives it (its agents'
/// parent-death signal).
pub(crate) fn measuring<F: Future>(test: F) -> F::Output {
    let _machine = hold_machine();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("tokio runtime: {e}"))
        .block_on(test)
}
