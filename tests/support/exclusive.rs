//! One measuring test at a time: the tests of this binary run in parallel threads,
//! and on a small machine (2 CPUs here) a second test measuring CPU time, disk
//! operations or memory would take what the first one measures.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Holds the machine for the calling test until the guard is dropped. A test that
/// panicked while holding it leaves it usable by the next one.
pub(crate) fn hold_machine() -> MutexGuard<'static, ()> {
    static MACHINE: Mutex<()> = Mutex::new(());
    MACHINE.lock().unwrap_or_else(PoisonError::into_inner)
}
