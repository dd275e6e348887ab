//! The emulated network of the local provider: namespaces, a bridge and one shaped
//! uplink, built with `ip` and `tc` (root needed).
//!
//! ```text
//!   root ns (controller)                 "host" ns                     "endpoint" ns
//!   nnbXXXX-Nc 10.A.B.1 ──veth── ctl ─┐
//!   tenant ns t0: eth0 10.A.B.10 ─veth─ vt0 ─┤
//!   tenant ns t1: eth0 10.A.B.11 ─veth─ vt1 ─┼─ br0 ── up0 ══veth══ eth0 10.A.B.2
//!   ...                                      ┘   (tbf, host_bw)    (tbf, host_bw)
//! ```
//!
//! Every tenant sits in its own namespace with one veth into the bridge `br0` of a
//! "host" namespace, like VMs on one hypervisor. The world outside the host (where
//! the test node's probes and the neighbors' load go: the endpoint agent's
//! reflector and sink) is a separate namespace behind the veth `up0`, the host's
//! NIC. `up0` is shaped to `host_bw` with a token bucket in both directions (on
//! `up0` for tenant→endpoint, on the endpoint's `eth0` for replies), so all tenant
//! traffic to the endpoint contends for one NIC's bandwidth. The controller reaches
//! the agents over its own veth into the bridge, which does not cross the shaped
//! link. All addresses are in one /24 chosen so it is unused on this machine.
//!
//! Mirrored servers (one per client, `servers = "mirrored"`) stand for the thesis'
//! second host: they run in the endpoint's namespace, beyond the shaped uplink, each
//! at an address of its own on its `eth0` (the addresses after the tenants'), so
//! each client's traffic crosses the same NIC to a receiver of its own.
//!
//! Names carry the controller's pid (`nnb<pid hex>-<n>-...`), so concurrent runs do
//! not collide, and leftovers of a controller killed with `-9` (whose agents died
//! with it) are removed by the next run.

use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use super::ProviderError;
use nnb_experiment::tenant::NicQueue;

/// Most tenants one emulated network holds, mirrored servers included (addresses .10
/// to .249 of the /24).
pub const MAX_TENANTS: usize = 240;
/// First host number of tenant addresses.
const TENANT_BASE: usize = 10;
/// Queueing the token bucket allows before it drops, in milliseconds of host_bw.
const QUEUE_MS: f64 = 20.0;

static NEXT_LAB: AtomicU32 = AtomicU32::new(0);

/// One emulated host network; removed by [`NetLab::remove`] or on drop.
#[derive(Debug)]
pub struct NetLab {
    run: String,
    tenants: usize,
    servers: usize,
    prefix: [u8; 3],
    removed: bool,
}

/// Runs `program args`, turning a failure into [`ProviderError::Net`] with its stderr.
fn run(program: &str, args: &[&str]) -> Result<String, ProviderError> {
    let command = format!("{program} {}", args.join(" "));
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| ProviderError::Net {
            command: command.clone(),
            message: format!("cannot run {program} (is iproute2 installed?): {e}"),
        })?;
    if !out.status.success() {
        return Err(ProviderError::Net {
            command,
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Whether this process runs as root (network namespaces need it).
pub use nnb_sys::process::is_root;

/// The namespace names `ip netns list` shows.
pub fn list_namespaces() -> Result<Vec<String>, ProviderError> {
    let out = run("ip", &["netns", "list"])?;
    Ok(out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

/// The token bucket's burst (a millisecond of the link, at least 32 KiB) and queue
/// limit (`QUEUE_MS` of the link, more than a burst), bytes.
fn bucket(host_bw_bps: f64) -> (u64, u64) {
    let bytes_per_s = host_bw_bps / 8.0;
    let burst = (bytes_per_s / 1000.0).max(32.0 * 1024.0) as u64;
    let limit = ((bytes_per_s * QUEUE_MS / 1000.0) as u64).max(burst + 3000);
    (burst, limit)
}

fn tbf_args(host_bw_bps: f64) -> Vec<String> {
    let (burst, limit) = bucket(host_bw_bps);
    vec![
        "rate".into(),
        bits(host_bw_bps),
        "burst".into(),
        burst.to_string(),
        "limit".into(),
        limit.to_string(),
    ]
}

/// A rate as `tc` reads it.
fn bits(bps: f64) -> String {
    format!("{}bit", bps.round() as u64)
}

/// The `tc` commands (each after `tc -n NS`) that shape `dev` to `host_bw_bps`: one
/// token bucket, or with a fair queue an HTB class per tenant address (matched as
/// `side`, "src" or "dst"), each guaranteed an equal share and lent the rest, with
/// its own drop-tail queue; unmatched packets (ARP) share a class of their own.
fn shaping(
    dev: &str,
    host_bw_bps: f64,
    queue: NicQueue,
    tenants: &[IpAddr],
    side: &str,
) -> Vec<Vec<String>> {
    let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<String>>();
    if queue == NicQueue::Fifo {
        let mut tbf = words(&["qdisc", "add", "dev", dev, "root", "tbf"]);
        tbf.extend(tbf_args(host_bw_bps));
        return vec![tbf];
    }
    let (burst, limit) = bucket(host_bw_bps);
    let (burst, limit, link) = (burst.to_string(), limit.to_string(), bits(host_bw_bps));
    let share = bits(host_bw_bps / (tenants.len() + 1) as f64);
    let class = |id: &str| {
        words(&[
            "class", "add", "dev", dev, "parent", "1:1", "classid", id, "htb", "rate", &share,
            "ceil", &link, "burst", &burst, "cburst", &burst, "quantum", "1514",
        ])
    };
    let mut commands = vec![
        words(&[
            "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "2",
        ]),
        words(&[
            "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", &link,
            "ceil", &link, "burst", &burst, "cburst", &burst,
        ]),
        class("1:2"),
    ];
    for (i, ip) in tenants.iter().enumerate() {
        // Class minors are hex: tenant i is 1:(0x10 + i).
        let id = format!("1:{:x}", 0x10 + i);
        commands.push(class(&id));
        commands.push(words(&[
            "qdisc", "add", "dev", dev, "parent", &id, "bfifo", "limit", &limit,
        ]));
        commands.push(words(&[
            "filter",
            "add",
            "dev",
            dev,
            "parent",
            "1:",
            "protocol",
            "ip",
            "prio",
            "1",
            "u32",
            "match",
            "ip",
            side,
            &format!("{ip}/32"),
            "flowid",
            &id,
        ]));
    }
    commands
}

impl NetLab {
    /// Builds the namespaces, bridge, veths and shaping for `tenants` tenants and a
    /// host NIC of `host_bw_bps`, with the addresses of `servers` mirrored servers in
    /// the endpoint's namespace. On error what was built is removed again.
    pub fn create(
        tenants: usize,
        servers: usize,
        host_bw_bps: f64,
        queue: NicQueue,
    ) -> Result<NetLab, ProviderError> {
        if !is_root() {
            return Err(ProviderError::NeedRoot);
        }
        if tenants.saturating_add(servers) > MAX_TENANTS {
            return Err(ProviderError::Invalid(format!(
                "the emulated network holds at most {MAX_TENANTS} tenants and servers, not \
                 {tenants} tenants and {servers} servers"
            )));
        }
        if !(host_bw_bps.is_finite() && host_bw_bps >= 1000.0) {
            return Err(ProviderError::Invalid(format!(
                "host bandwidth {host_bw_bps} bit/s is not a usable rate (at least 1 kbit/s)"
            )));
        }
        remove_stale();
        let n = NEXT_LAB.fetch_add(1, Ordering::Relaxed);
        let mut lab = NetLab {
            run: format!("nnb{:x}-{n:x}", std::process::id()),
            tenants,
            servers,
            prefix: free_prefix(n)?,
            removed: false,
        };
        lab.build(host_bw_bps, queue)?;
        tracing::info!(run = %lab.run, tenants, host_bw_bps, "emulated network up");
        Ok(lab)
    }

    fn build(&mut self, host_bw_bps: f64, queue: NicQueue) -> Result<(), ProviderError> {
        let host = self.host_ns();
        let ep = self.endpoint_ns();
        let ctl = self.ctl_if();
        run("ip", &["netns", "add", &host])?;
        run("ip", &["netns", "add", &ep])?;
        run("ip", &["-n", &host, "link", "set", "lo", "up"])?;
        run("ip", &["-n", &host, "link", "add", "br0", "type", "bridge"])?;
        run("ip", &["-n", &host, "link", "set", "br0", "up"])?;
        // The uplink: endpoint eth0 <-> host up0, shaped both ways.
        run("ip", &["-n", &ep, "link", "set", "lo", "up"])?;
        run(
            "ip",
            &[
                "-n", &ep, "link", "add", "eth0", "type", "veth", "peer", "name", "up0", "netns",
                &host,
            ],
        )?;
        run(
            "ip",
            &["-n", &host, "link", "set", "up0", "master", "br0", "up"],
        )?;
        run(
            "ip",
            &["-n", &ep, "addr", "add", &self.cidr(2), "dev", "eth0"],
        )?;
        for j in 0..self.servers {
            let server = self.cidr(TENANT_BASE + self.tenants + j);
            run("ip", &["-n", &ep, "addr", "add", &server, "dev", "eth0"])?;
        }
        run("ip", &["-n", &ep, "link", "set", "eth0", "up"])?;
        // Towards the endpoint tenants are told apart by source, back by destination.
        let tenant_ips: Vec<IpAddr> = (0..self.tenants).map(|i| self.tenant_ip(i)).collect();
        for (ns, dev, side) in [(&host, "up0", "src"), (&ep, "eth0", "dst")] {
            for command in shaping(dev, host_bw_bps, queue, &tenant_ips, side) {
                let mut args = vec!["-n", ns.as_str()];
                args.extend(command.iter().map(String::as_str));
                run("tc", &args)?;
            }
        }
        // The controller's way in, beside the shaped link.
        run(
            "ip",
            &[
                "link", "add", &ctl, "type", "veth", "peer", "name", "ctl", "netns", &host,
            ],
        )?;
        run(
            "ip",
            &["-n", &host, "link", "set", "ctl", "master", "br0", "up"],
        )?;
        run("ip", &["addr", "add", &self.cidr(1), "dev", &ctl])?;
        run("ip", &["link", "set", &ctl, "up"])?;
        for i in 0..self.tenants {
            let ns = self.tenant_ns(i);
            let port = format!("vt{i}");
            run("ip", &["netns", "add", &ns])?;
            run("ip", &["-n", &ns, "link", "set", "lo", "up"])?;
            run(
                "ip",
                &[
                    "-n", &ns, "link", "add", "eth0", "type", "veth", "peer", "name", &port,
                    "netns", &host,
                ],
            )?;
            run(
                "ip",
                &["-n", &host, "link", "set", &port, "master", "br0", "up"],
            )?;
            run(
                "ip",
                &[
                    "-n",
                    &ns,
                    "addr",
                    "add",
                    &self.cidr(TENANT_BASE + i),
                    "dev",
                    "eth0",
                ],
            )?;
            run("ip", &["-n", &ns, "link", "set", "eth0", "up"])?;
        }
        Ok(())
    }

    /// Shapes what tenant `i` sends to `rate_bps` (its `rate` grant: a token bucket
    /// on its own interface), or with `None` removes that shaping (the grant
    /// lifted). Idempotent.
    pub fn shape_tenant(&self, i: usize, rate_bps: Option<f64>) -> Result<(), ProviderError> {
        let ns = self.tenant_ns(i);
        match rate_bps {
            Some(bps) => {
                let mut args: Vec<String> =
                    ["-n", &ns, "qdisc", "replace", "dev", "eth0", "root", "tbf"]
                        .iter()
                        .map(|s| s.to_string())
                        .collect();
                args.extend(tbf_args(bps));
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                run("tc", &args).map(drop)
            }
            None => {
                let shaped = run("tc", &["-n", &ns, "qdisc", "show", "dev", "eth0", "root"])?;
                if shaped.contains("tbf") {
                    run("tc", &["-n", &ns, "qdisc", "del", "dev", "eth0", "root"])?;
                }
                Ok(())
            }
        }
    }

    /// The run's name prefix (`nnb<pid hex>-<n>`).
    pub fn run_id(&self) -> &str {
        &self.run
    }

    /// The "host" namespace holding the bridge and the shaped uplink `up0`.
    pub fn host_ns(&self) -> String {
        format!("{}-host", self.run)
    }

    /// The namespace beyond the uplink, where the endpoint agent runs.
    pub fn endpoint_ns(&self) -> String {
        format!("{}-ep", self.run)
    }

    /// Tenant `i`'s namespace.
    pub fn tenant_ns(&self, i: usize) -> String {
        format!("{}-t{i}", self.run)
    }

    /// Tenant `i`'s address.
    pub fn tenant_ip(&self, i: usize) -> IpAddr {
        self.ip(TENANT_BASE + i)
    }

    /// Mirrored server `j`'s address (on the endpoint namespace's `eth0`).
    pub fn server_ip(&self, j: usize) -> IpAddr {
        self.ip(TENANT_BASE + self.tenants + j)
    }

    /// The endpoint's address.
    pub fn endpoint_ip(&self) -> IpAddr {
        self.ip(2)
    }

    /// The controller's address on the bridge.
    pub fn controller_ip(&self) -> IpAddr {
        self.ip(1)
    }

    fn ctl_if(&self) -> String {
        format!("{}c", self.run)
    }

    fn ip(&self, host: usize) -> IpAddr {
        let [a, b, c] = self.prefix;
        IpAddr::V4(Ipv4Addr::new(a, b, c, host as u8))
    }

    fn cidr(&self, host: usize) -> String {
        format!("{}/24", self.ip(host))
    }

    /// Every namespace of this lab.
    pub fn namespaces(&self) -> Vec<String> {
        let mut v = vec![self.host_ns(), self.endpoint_ns()];
        v.extend((0..self.tenants).map(|i| self.tenant_ns(i)));
        v
    }

    /// Deletes the namespaces (which takes their veths, the bridge and the shaping
    /// with them) and the controller's veth. Call it after the agents are gone.
    pub fn remove(mut self) -> Result<(), ProviderError> {
        self.remove_all()
    }

    fn remove_all(&mut self) -> Result<(), ProviderError> {
        if self.removed {
            return Ok(());
        }
        self.removed = true;
        let mut first_error = None;
        let present = list_namespaces().unwrap_or_default();
        for ns in self.namespaces().iter().filter(|ns| present.contains(ns)) {
            if let Err(e) = run("ip", &["netns", "del", ns]) {
                first_error.get_or_insert(e);
            }
        }
        // Deleting the host namespace destroyed the controller veth's peer, and so
        // the veth itself; this only matters if the build stopped half-way.
        let _ = run("ip", &["link", "del", &self.ctl_if()]);
        tracing::info!(run = %self.run, "emulated network removed");
        first_error.map_or(Ok(()), Err)
    }
}

impl Drop for NetLab {
    fn drop(&mut self) {
        if let Err(e) = self.remove_all() {
            tracing::warn!("removing the emulated network: {e}");
        }
    }
}

/// A /24 in 10.213.0.0/16 that no interface of this namespace uses.
fn free_prefix(n: u32) -> Result<[u8; 3], ProviderError> {
    let used = run("ip", &["-o", "-4", "addr", "show"])?;
    let start = (std::process::id().wrapping_mul(7).wrapping_add(n)) % 256;
    (0..256)
        .map(|k| ((start + k) % 256) as u8)
        .map(|c| [10, 213, c])
        .find(|p| !used.contains(&format!(" {}.{}.{}.", p[0], p[1], p[2])))
        .ok_or_else(|| {
            ProviderError::Invalid("no free 10.213.x.0/24 subnet for the emulated network".into())
        })
}

/// The controller pid in a namespace name this module made
/// (`nnb<pid hex>-<n hex>-<host|ep|t<i>>`), `None` for any other name.
fn owner_pid(ns: &str) -> Option<u32> {
    let rest = ns.strip_prefix("nnb")?;
    let mut parts = rest.split('-');
    let (pid, n, role) = (parts.next()?, parts.next()?, parts.next()?);
    let role_ok = role == "host"
        || role == "ep"
        || role
            .strip_prefix('t')
            .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()));
    let hex = |x: &str| !x.is_empty() && x.bytes().all(|b| b.is_ascii_hexdigit());
    if parts.next().is_some() || !role_ok || !hex(n) || !hex(pid) {
        return None;
    }
    u32::from_str_radix(pid, 16).ok()
}

/// Removes namespaces of earlier runs whose controller no longer exists (killed
/// with `-9`: its agents died with it, its namespaces did not).
fn remove_stale() {
    let Ok(names) = list_namespaces() else {
        return;
    };
    for ns in names {
        let Some(pid) = owner_pid(&ns) else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            tracing::info!(namespace = %ns, "removing a namespace left by a dead run");
            let _ = run("ip", &["netns", "del", &ns]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_namespace_names_have_an_owner() {
        assert_eq!(owner_pid("nnb1f-0-host"), Some(0x1f));
        assert_eq!(owner_pid("nnb1f-a-ep"), Some(0x1f));
        assert_eq!(owner_pid("nnbabc-2-t12"), Some(0xabc));
        for other in [
            "nnb1f-0",
            "nnb1f-0-t",
            "nnb1f-0-tx",
            "nnbzz-0-host",
            "nbad-0-host",
            "nnb1f-0-host-x",
            "mynet",
        ] {
            assert_eq!(owner_pid(other), None, "{other}");
        }
    }

    #[test]
    fn a_fair_queue_gives_each_tenant_a_class_matched_by_its_address() {
        let ips: Vec<IpAddr> = (10..28)
            .map(|h| IpAddr::V4(Ipv4Addr::new(10, 9, 8, h)))
            .collect();
        let cmds: Vec<String> = shaping("up0", 95e6, NicQueue::Fair, &ips, "src")
            .iter()
            .map(|c| c.join(" "))
            .collect();
        // Root, link class, the class of unmatched packets, then per tenant a class,
        // its queue and its filter: 18 tenants.
        assert_eq!(cmds.len(), 3 + 3 * 18);
        assert!(cmds[0].starts_with("qdisc add dev up0 root handle 1: htb default 2"));
        // 95 Mbit/s over 18 tenants and the default class: 5 Mbit/s guaranteed each.
        assert!(cmds[2].contains("classid 1:2 htb rate 5000000bit ceil 95000000bit"));
        // Tenant 17 (the 18th) is class 0x10 + 17 = 0x21, matched by 10.9.8.27.
        assert!(cmds[3 + 3 * 17].contains("classid 1:21 htb rate 5000000bit"));
        assert!(cmds[3 + 3 * 17 + 2].ends_with("match ip src 10.9.8.27/32 flowid 1:21"));
        let fifo = shaping("eth0", 95e6, NicQueue::Fifo, &ips, "dst");
        assert_eq!(fifo.len(), 1);
        assert_eq!(fifo[0][..6].join(" "), "qdisc add dev eth0 root tbf");
    }

    #[test]
    fn tbf_burst_covers_a_millisecond_and_the_queue_holds_more() {
        let args = tbf_args(200e6);
        assert_eq!(args[1], "200000000bit");
        let burst: u64 = args[3].parse().unwrap();
        let limit: u64 = args[5].parse().unwrap();
        assert!(burst >= 25_000, "{burst}");
        assert!(limit > burst, "{limit} <= {burst}");
    }
}
