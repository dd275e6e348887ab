//! Test harness for root-only network tests: two fresh network namespaces joined by a
//! veth pair, `tc` shaping helpers, commands run inside a namespace, and a `Drop` that
//! deletes everything even when the test panics.
//!
//! Start every test that uses it with
//! `if !netns::require_root() { return; }` (plus [`require_netem`] before using
//! [`Netns::netem_delay`]). The policy for a test that cannot run: it FAILS when the
//! environment variable `CI` is set, and prints why and skips otherwise.
//!
//! Everything is done with Debian's iproute2 (`ip`, `tc`); the only addresses
//! configured are `10.x.y.1/24` and `10.x.y.2/24` on the veth ends, inside the
//! namespaces this harness creates, so the host's own networking is never touched.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;

use super::cli::NNB;

pub(crate) use nnb_testkit::skip_or_fail;

/// True when the test may go on: running as root with `ip` and `tc` installed.
/// Otherwise applies [`skip_or_fail`].
pub(crate) fn require_root() -> bool {
    if !nnb_testkit::require_root("this test") {
        return false;
    }
    for tool in ["ip", "tc"] {
        let ok = Command::new(tool)
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return skip_or_fail(&format!("needs `{tool}` (Debian package iproute2)"));
        }
    }
    true
}

/// True when the kernel has the netem qdisc (probed once, in a throwaway namespace).
/// Call after [`require_root`].
///
/// Unlike root or iproute2, netem is a kernel build option (`CONFIG_NET_SCH_NETEM`)
/// that no package can add: the Firecracker kernels these VMs and their CI run on
/// leave it out. So a kernel that refuses the qdisc skips the test with the reason
/// printed, under CI too; any other failure of the probe (no `tc`, no namespaces)
/// follows [`skip_or_fail`].
pub(crate) fn require_netem() -> bool {
    static NETEM: OnceLock<Result<(), String>> = OnceLock::new();
    let probe = NETEM.get_or_init(|| {
        let ns = Namespace::create(&format!("{}p", unique_prefix()))?;
        run(
            "tc",
            &[
                "-n", &ns.0, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms",
            ],
        )
        .map(|_| ())
    });
    match probe {
        Ok(()) => true,
        Err(e) if e.contains("qdisc kind is unknown") => {
            eprintln!(
                "skipping: this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM unset), \
                 which no package can install: {e}"
            );
            false
        }
        Err(e) => skip_or_fail(&format!("needs the netem qdisc: {e}")),
    }
}

/// Runs a command to completion; its stdout, or an error with its stderr.
fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "`{program} {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A prefix unique to this process and call: `nnb<pid>n<counter>`, short enough that
/// interface names built from it stay within the kernel's 15 characters.
fn unique_prefix() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    format!(
        "nnb{}n{}",
        std::process::id() % 10_000_000,
        COUNTER.fetch_add(1, Ordering::Relaxed) % 100
    )
}

/// A network namespace this harness created; deleted on drop.
struct Namespace(String);

impl Namespace {
    fn create(name: &str) -> Result<Self, String> {
        run("ip", &["netns", "add", name])?;
        Ok(Namespace(name.to_string()))
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        // Deleting the namespace also destroys the veth end inside it.
        if let Err(e) = run("ip", &["netns", "delete", &self.0]) {
            eprintln!("netns harness: {e}");
        }
    }
}

/// True when a network namespace of this name exists.
pub(crate) fn netns_exists(name: &str) -> bool {
    run("ip", &["netns", "list"]).is_ok_and(|list| {
        list.lines()
            .any(|l| l.split_whitespace().next() == Some(name))
    })
}

/// One side of a [`NetnsPair`]: a namespace, its veth end and that end's address.
#[derive(Debug, Clone)]
pub(crate) struct Netns {
    /// Namespace name.
    pub name: String,
    /// The veth interface inside it.
    pub dev: String,
    /// The interface's IPv4 address (a /24 shared with the other side).
    pub ip: Ipv4Addr,
}

impl Netns {
    /// A command that runs `program` inside this namespace (`ip netns exec`).
    pub(crate) fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name]).arg(program);
        c
    }

    /// Runs `ip`/`tc`-style `args` of `program` inside the namespace; its stdout.
    pub(crate) fn run(&self, program: &str, args: &[&str]) -> Result<String, String> {
        let mut all = vec!["netns", "exec", &self.name, program];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// Delays every packet leaving this side's veth by `delay` (netem as the root
    /// qdisc, replacing any other; queue limit raised so the delay line never drops).
    pub(crate) fn netem_delay(&self, delay: Duration) -> Result<(), String> {
        let d = format!("{}us", delay.as_micros());
        self.run(
            "tc",
            &[
                "qdisc", "replace", "dev", &self.dev, "root", "netem", "delay", &d, "limit",
                "100000",
            ],
        )
        .map(|_| ())
    }

    /// Shapes traffic leaving this side's veth to `rate_bps` bit/s with a token bucket
    /// (tbf as the root qdisc, replacing any other): `burst_bytes` of bucket (64 KiB
    /// suits 100 Mbit/s), and packets waiting longer than `latency` are dropped.
    pub(crate) fn tbf(
        &self,
        rate_bps: u64,
        burst_bytes: u64,
        latency: Duration,
    ) -> Result<(), String> {
        let (rate, burst) = (format!("{rate_bps}bit"), burst_bytes.to_string());
        let lat = format!("{}us", latency.as_micros());
        self.run(
            "tc",
            &[
                "qdisc", "replace", "dev", &self.dev, "root", "tbf", "rate", &rate, "burst",
                &burst, "latency", &lat,
            ],
        )
        .map(|_| ())
    }

    /// The qdiscs on this side's veth, as `tc qdisc show` prints them.
    pub(crate) fn qdiscs(&self) -> Result<String, String> {
        self.run("tc", &["qdisc", "show", "dev", &self.dev])
    }
}

/// Two fresh namespaces `a` and `b` joined by a veth pair, `a` at `10.x.y.1/24` and
/// `b` at `10.x.y.2/24`, links and loopbacks up. Dropping it deletes both namespaces
/// (and with them the veth pair), also while a failing test unwinds.
pub(crate) struct NetnsPair {
    /// The first side (`.1`).
    pub a: Netns,
    /// The second side (`.2`).
    pub b: Netns,
    // Field order: the namespaces are deleted when the pair drops.
    _namespaces: [Namespace; 2],
}

impl NetnsPair {
    /// Creates the namespaces, the veth pair and the addresses.
    pub(crate) fn new() -> Result<Self, String> {
        let prefix = unique_prefix();
        let ns_a = Namespace::create(&format!("{prefix}a"))?;
        let ns_b = Namespace::create(&format!("{prefix}b"))?;
        let n = std::process::id();
        let subnet = [10, (n >> 8) as u8, n as u8];
        let side = |ns: &Namespace, host: u8| Netns {
            name: ns.0.clone(),
            dev: format!("{prefix}{}", if host == 1 { 'a' } else { 'b' }),
            ip: Ipv4Addr::new(subnet[0], subnet[1], subnet[2], host),
        };
        let (a, b) = (side(&ns_a, 1), side(&ns_b, 2));
        let pair = NetnsPair {
            a,
            b,
            _namespaces: [ns_a, ns_b],
        };
        // From here on, a failure drops `pair`, which deletes what exists so far.
        // The veth is made in the root namespace, then each end moved into its own.
        run(
            "ip",
            &[
                "link",
                "add",
                &pair.a.dev,
                "type",
                "veth",
                "peer",
                "name",
                &pair.b.dev,
            ],
        )?;
        for s in [&pair.a, &pair.b] {
            if let Err(e) = run("ip", &["link", "set", &s.dev, "netns", &s.name]) {
                let _ = run("ip", &["link", "delete", &s.dev]);
                return Err(e);
            }
        }
        for s in [&pair.a, &pair.b] {
            let addr = format!("{}/24", s.ip);
            s.run("ip", &["addr", "add", &addr, "dev", &s.dev])?;
            s.run("ip", &["link", "set", &s.dev, "up"])?;
            s.run("ip", &["link", "set", "lo", "up"])?;
        }
        Ok(pair)
    }
}

/// Two tenants in namespaces of their own joined through a third, a router, by two
/// veth pairs: `a` at `10.0.1.2/24`, the router at `10.0.1.1` and `10.0.2.1`, `b` at
/// `10.0.2.2/24`, each tenant's default route through the router, which forwards
/// (`net.ipv4.ip_forward=1` in its namespace only). A datagram between the tenants
/// crosses one router, which takes one off its TTL. Dropping it deletes the three
/// namespaces (and with them the veths).
pub(crate) struct RoutedPair {
    /// The first tenant (`10.0.1.2`).
    pub a: Netns,
    /// The second tenant (`10.0.2.2`).
    pub b: Netns,
    // Field order: the namespaces are deleted when the pair drops.
    _namespaces: [Namespace; 3],
}

impl RoutedPair {
    /// Creates the namespaces, the veth pairs, the addresses and the routes.
    pub(crate) fn new() -> Result<Self, String> {
        let prefix = unique_prefix();
        let ns_a = Namespace::create(&format!("{prefix}a"))?;
        let ns_r = Namespace::create(&format!("{prefix}r"))?;
        let ns_b = Namespace::create(&format!("{prefix}b"))?;
        let router = ns_r.0.clone();
        let tenant = |ns: &Namespace, side: char, net: u8| Netns {
            name: ns.0.clone(),
            dev: format!("{prefix}{side}"),
            ip: Ipv4Addr::new(10, 0, net, 2),
        };
        let pair = RoutedPair {
            a: tenant(&ns_a, 'a', 1),
            b: tenant(&ns_b, 'b', 2),
            _namespaces: [ns_a, ns_r, ns_b],
        };
        // From here on, a failure drops `pair`, which deletes what exists so far.
        // Each veth is made in the router's namespace, its tenant end moved out.
        for (side, end, net) in [(&pair.a, 'p', 1u8), (&pair.b, 'q', 2)] {
            let port = format!("{prefix}{end}");
            run(
                "ip",
                &[
                    "-n", &router, "link", "add", &port, "type", "veth", "peer", "name", &side.dev,
                    "netns", &side.name,
                ],
            )?;
            let gateway = format!("10.0.{net}.1");
            run(
                "ip",
                &[
                    "-n",
                    &router,
                    "addr",
                    "add",
                    &format!("{gateway}/24"),
                    "dev",
                    &port,
                ],
            )?;
            run("ip", &["-n", &router, "link", "set", &port, "up"])?;
            side.run(
                "ip",
                &["addr", "add", &format!("{}/24", side.ip), "dev", &side.dev],
            )?;
            side.run("ip", &["link", "set", &side.dev, "up"])?;
            side.run("ip", &["link", "set", "lo", "up"])?;
            side.run("ip", &["route", "add", "default", "via", &gateway])?;
        }
        run(
            "ip",
            &[
                "netns",
                "exec",
                &router,
                "sysctl",
                "-qw",
                "net.ipv4.ip_forward=1",
            ],
        )?;
        Ok(pair)
    }
}

/// A child process killed and reaped on drop, so a failing test leaves no process
/// behind (which would also keep its namespace alive).
pub(crate) struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `nnb serve` with only its reflector, on 127.0.0.1, for `duration` (as
/// `--duration` takes it); the process (killed when the guard drops) and the
/// reflector's address.
pub(crate) fn spawn_reflector(duration: &str) -> (KillOnDrop, SocketAddr) {
    let mut serve = Command::new(NNB);
    serve
        .args(["serve", "--reflector-port", "0", "--no-sink", "--no-tcp"])
        .args(["--json", "--duration", duration]);
    spawn_serve(serve, "reflector")
}

/// Runs `serve` (an `nnb serve ... --json` command) and reads the address of its
/// `service` (`sink`, `reflector`) from the JSON line it prints first; the process is
/// killed when the guard drops.
pub(crate) fn spawn_serve(mut serve: Command, service: &str) -> (KillOnDrop, SocketAddr) {
    let mut serve = KillOnDrop(
        serve
            .stdout(Stdio::piped())
            .spawn()
            .expect("cannot run nnb serve"),
    );
    let stdout = serve.0.stdout.take().expect("piped stdout");
    let mut first = String::new();
    BufReader::new(stdout)
        .read_line(&mut first)
        .expect("serve prints its addresses");
    let v: Value = serde_json::from_str(&first).expect("the first line is JSON");
    let addr = v[service]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no {service} address in {first}"));
    (serve, addr)
}

/// Starts an `nnb serve` reflector (nothing else) inside `side`, on its veth address;
/// the process and the reflector's address.
pub(crate) fn reflector_in(side: &Netns) -> (KillOnDrop, SocketAddr) {
    let ip = side.ip.to_string();
    let mut serve = side.command(NNB);
    serve
        .args(["serve", "--bind", &ip, "--reflector-port", "0"])
        .args(["--no-sink", "--no-tcp", "--json", "--duration", "60s"]);
    spawn_serve(serve, "reflector")
}

/// Starts an `nnb serve` UDP sink (nothing else) inside `side`, on its veth address;
/// the process and the sink's address.
pub(crate) fn sink_in(side: &Netns) -> (KillOnDrop, SocketAddr) {
    let ip = side.ip.to_string();
    let mut serve = side.command(NNB);
    serve
        .args(["serve", "--bind", &ip, "--sink-port", "0"])
        .args(["--no-reflector", "--no-tcp", "--json", "--duration", "60s"]);
    spawn_serve(serve, "sink")
}
