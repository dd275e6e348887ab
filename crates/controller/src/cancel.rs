//! Stopping a run cleanly: [`Cancel`] is set by Ctrl-C or SIGTERM (or a
//! [`Canceller`]); the controller stops the step's measured jobs, drops the step
//! and shuts the fleet down.

use tokio::sync::watch;

/// Set when the user asks the run to stop (Ctrl-C, SIGTERM).
#[derive(Debug, Clone)]
pub struct Cancel(watch::Receiver<bool>);

/// What sets a [`Cancel`] made by [`Cancel::manual`].
#[derive(Debug)]
pub struct Canceller(watch::Sender<bool>);

impl Canceller {
    /// Asks the run to stop.
    pub fn cancel(&self) {
        let _ = self.0.send(true);
    }
}

impl Cancel {
    /// A cancel set by its [`Canceller`] only (embedding programs, tests).
    pub fn manual() -> (Canceller, Cancel) {
        let (tx, rx) = watch::channel(false);
        (Canceller(tx), Cancel(rx))
    }

    /// Listens for Ctrl-C and SIGTERM (needs a tokio runtime).
    pub fn on_signals() -> Cancel {
        let (tx, rx) = watch::channel(false);
        tokio::spawn(async move {
            let term = async {
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(mut s) => {
                        s.recv().await;
                    }
                    Err(_) => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                () = term => {}
            }
            tracing::warn!("stopping: finishing cleanly and keeping what was measured");
            let _ = tx.send(true);
        });
        Cancel(rx)
    }

    pub(crate) fn is_set(&self) -> bool {
        *self.0.borrow()
    }

    pub(crate) async fn wait(&self) {
        let mut rx = self.0.clone();
        if rx.wait_for(|v| *v).await.is_err() {
            // Whatever could set it is gone: it never will be.
            std::future::pending::<()>().await;
        }
    }
}
