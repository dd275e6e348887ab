//! A real moto server process per test (moto's server on 127.0.0.1:PORT), killed
//! on drop. It runs through `moto_shim.py`, which adds what EC2 has and moto 5.2
//! lacks (placement groups) and then starts moto's own server unchanged. Shared by nnb-aws' integration tests (`support/mod.rs`) and the root
//! package's CLI tests (`tests/support/moto.rs`, through `#[path]`).
//!
//! When `moto_server` is not installed the test is skipped with a printed reason, unless
//! the environment variable `CI` is set: then it fails, so CI never skips silently.

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long moto may take to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// moto's server with EC2 placement groups added (see the file).
const SHIM: &str = include_str!("moto_shim.py");

/// A running moto server, private to one test.
pub(crate) struct Moto {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
}

impl Moto {
    /// Starts moto on a free local port and waits until it accepts connections.
    /// None (after printing why) when moto is not installed and `CI` is unset.
    pub(crate) fn start() -> Option<Moto> {
        let port = free_port();
        let importable = Command::new("python3")
            .args(["-c", "import moto.server"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !importable {
            nnb_testkit::skip_or_fail(
                "python3 cannot import moto.server; install it with `pip install 'moto[server]'`",
            );
            return None;
        }
        let spawned = Command::new("python3")
            .args(["-c", SHIM, "-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let child = match spawned {
            Ok(child) => child,
            Err(e) => {
                let reason = format!(
                    "moto_server could not be started ({e}); install it with `pip install 'moto[server]'`"
                );
                nnb_testkit::skip_or_fail(&reason);
                return None;
            }
        };
        let mut moto = Moto {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
        };
        moto.wait_until_listening(port);
        Some(moto)
    }

    /// Polls the port until moto accepts a connection; panics if moto exits or
    /// does not listen within [`START_TIMEOUT`].
    fn wait_until_listening(&mut self, port: u16) {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let started = Instant::now();
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("moto_server exited before listening: {status}");
            }
            assert!(
                started.elapsed() < START_TIMEOUT,
                "moto_server did not listen on {addr} within {START_TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        // The server may already be gone; either way reap it.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A local TCP port free right now (the OS picks it; moto binds it next).
pub(crate) fn free_port() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind a free port");
    listener.local_addr().expect("local address").port()
}
