//! The OCI bundle's `config.json` (runtime spec 1.0): the agent's command line, the
//! minimal root filesystem's mounts, the namespaces, and the tenant's grant in the
//! runtime's own terms (`linux.resources`), written with serde from typed structs
//! that hold only the fields nnb sets.

use std::path::{Path, PathBuf};

use serde::Serialize;

use nnb_burn::topology::format_list;
use nnb_experiment::tenant::TenantGrant;

/// The CFS period nnb gives the runtime, µs (100 ms, the kernel's default and the
/// one nnb's own cgroups use): a grant of q CPUs is a quota of q * 100 ms.
pub const PERIOD_US: u64 = 100_000;
/// Where the agent's binary is inside the container.
pub const AGENT_BIN: &str = "/nnb/nnb";
/// Where the agent's token file is inside the container.
pub const AGENT_TOKEN: &str = "/nnb/token";
/// The host's library directories bind-mounted read-only (those that exist), so
/// that nnb's binary finds what `ldd` lists without copying it.
pub const LIBRARY_DIRS: [&str; 3] = ["/lib", "/lib64", "/usr/lib"];

/// A whole `config.json`.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Config {
    oci_version: &'static str,
    process: Process,
    root: Root,
    hostname: String,
    mounts: Vec<Mount>,
    linux: Linux,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
struct Process {
    terminal: bool,
    user: User,
    args: Vec<String>,
    env: Vec<String>,
    cwd: &'static str,
    capabilities: Capabilities,
    no_new_privileges: bool,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
struct User {
    uid: u32,
    gid: u32,
}

/// The capabilities the agent keeps (runc's own `runc spec` defaults).
#[derive(Debug, Clone, Serialize, PartialEq)]
struct Capabilities {
    bounding: Vec<&'static str>,
    effective: Vec<&'static str>,
    permitted: Vec<&'static str>,
}

const CAPABILITIES: [&str; 3] = ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"];

#[derive(Debug, Clone, Serialize, PartialEq)]
struct Root {
    path: &'static str,
    readonly: bool,
}

/// One mount of the container.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Mount {
    destination: PathBuf,
    #[serde(rename = "type")]
    kind: &'static str,
    source: PathBuf,
    options: Vec<&'static str>,
}

impl Mount {
    fn special(destination: &str, kind: &'static str, options: &[&'static str]) -> Mount {
        Mount {
            destination: destination.into(),
            kind,
            source: kind.into(),
            options: options.to_vec(),
        }
    }

    /// The host's `source` at `destination`, read-only or not.
    fn bind(source: &Path, destination: &Path, read_only: bool) -> Mount {
        let mut options = vec!["rbind", "nosuid"];
        if read_only {
            options.push("ro");
        }
        Mount {
            destination: destination.to_path_buf(),
            kind: "bind",
            source: source.to_path_buf(),
            options,
        }
    }

    /// Where it is inside the container.
    pub fn destination(&self) -> &Path {
        &self.destination
    }

    /// Whether a file (not a directory) is mounted there.
    pub fn is_file(&self) -> bool {
        self.kind == "bind" && self.source.is_file()
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
struct Linux {
    cgroups_path: String,
    resources: Resources,
    namespaces: Vec<Namespace>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
struct Namespace {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<PathBuf>,
}

/// A grant in OCI terms (`linux.resources`): what the runtime enforces.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Resources {
    /// CFS quota and period, µs, and the cpuset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Cpu>,
    /// The memory limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
    /// Disk throttles per device.
    #[serde(rename = "blockIO", skip_serializing_if = "Option::is_none")]
    pub block_io: Option<BlockIo>,
}

/// `linux.resources.cpu`.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Cpu {
    /// CPU time per period, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota: Option<i64>,
    /// The period, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub period: Option<u64>,
    /// The cpuset, e.g. "0-1".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<String>,
}

/// `linux.resources.memory`.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Memory {
    /// The limit, bytes.
    pub limit: i64,
}

/// `linux.resources.blockIO`: one throttle list per kind, each of one device.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BlockIo {
    /// Reads per second.
    #[serde(
        rename = "throttleReadIOPSDevice",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub read_iops: Vec<Throttle>,
    /// Writes per second.
    #[serde(
        rename = "throttleWriteIOPSDevice",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub write_iops: Vec<Throttle>,
    /// Read bytes per second.
    #[serde(
        rename = "throttleReadBpsDevice",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub read_bps: Vec<Throttle>,
    /// Written bytes per second.
    #[serde(
        rename = "throttleWriteBpsDevice",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub write_bps: Vec<Throttle>,
}

/// One device's throttle.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Throttle {
    /// The device's major number.
    pub major: u32,
    /// Its minor number.
    pub minor: u32,
    /// The rate.
    pub rate: u64,
}

impl Resources {
    /// `grant` on CPUs `cpus` (the tenant's carved set, its cpuset when the grant
    /// limits anything, as for process tenants), its I/O limits on `disk` (the
    /// device of its `io_dir`, resolved by the caller): nothing for an empty grant.
    pub fn of(grant: &TenantGrant, cpus: &[usize], disk: Option<(u32, u32)>) -> Resources {
        if grant.is_empty() {
            return Resources::default();
        }
        let cpu = Cpu {
            quota: grant.cpu.map(|c| (c * PERIOD_US as f64).round() as i64),
            period: grant.cpu.map(|_| PERIOD_US),
            cpus: Some(format_list(cpus)),
        };
        let memory = grant.memory_bytes.map(|b| Memory {
            limit: i64::try_from(b).unwrap_or(i64::MAX),
        });
        let block_io = disk.filter(|_| grant.limits_io()).map(|(major, minor)| {
            let one = |rate: Option<u64>| {
                rate.map(|rate| Throttle { major, minor, rate })
                    .into_iter()
                    .collect()
            };
            BlockIo {
                read_iops: one(grant.read_iops),
                write_iops: one(grant.write_iops),
                read_bps: one(grant.read_bytes_per_s),
                write_bps: one(grant.write_bytes_per_s),
            }
        });
        Resources {
            cpu: Some(cpu),
            memory,
            block_io,
        }
    }
}

/// What a tenant's container is made of.
#[derive(Debug, Clone)]
pub struct Spec<'a> {
    /// Its hostname (the tenant's name, made safe).
    pub hostname: &'a str,
    /// The agent's arguments after the binary (`agent --listen ...`).
    pub agent_args: Vec<String>,
    /// nnb's binary on the host.
    pub binary: &'a Path,
    /// The agent's token file on the host.
    pub token_file: &'a Path,
    /// A directory bind-mounted read-write at the same path (the disk matrix's).
    pub io_dir: Option<&'a Path>,
    /// The tenant's network namespace (`/var/run/netns/NAME`); `None`: the host's.
    pub netns: Option<PathBuf>,
    /// The container's cgroup path (absolute: under each hierarchy's root).
    pub cgroups_path: String,
    /// Its grant in OCI terms.
    pub resources: Resources,
}

impl Spec<'_> {
    /// The bundle's `config.json`.
    pub fn config(&self) -> Config {
        let mut args = vec![AGENT_BIN.to_string()];
        args.extend(self.agent_args.iter().cloned());
        let mut mounts = vec![
            Mount::special("/proc", "proc", &["nosuid", "noexec", "nodev"]),
            Mount::special(
                "/dev",
                "tmpfs",
                &["nosuid", "strictatime", "mode=755", "size=65536k"],
            ),
            Mount::special("/sys", "sysfs", &["nosuid", "noexec", "nodev", "ro"]),
            Mount::special("/tmp", "tmpfs", &["nosuid", "nodev", "mode=1777"]),
        ];
        for dir in LIBRARY_DIRS.iter().map(Path::new).filter(|d| d.exists()) {
            mounts.push(Mount::bind(dir, dir, true));
        }
        mounts.push(Mount::bind(self.binary, Path::new(AGENT_BIN), true));
        mounts.push(Mount::bind(self.token_file, Path::new(AGENT_TOKEN), true));
        if let Some(dir) = self.io_dir {
            mounts.push(Mount::bind(dir, dir, false));
        }
        let mut namespaces: Vec<Namespace> = ["pid", "ipc", "uts", "mount"]
            .into_iter()
            .map(|kind| Namespace { kind, path: None })
            .collect();
        if let Some(path) = &self.netns {
            namespaces.push(Namespace {
                kind: "network",
                path: Some(path.clone()),
            });
        }
        let caps = CAPABILITIES.to_vec();
        Config {
            oci_version: "1.0.2",
            process: Process {
                terminal: false,
                user: User { uid: 0, gid: 0 },
                args,
                env: vec!["PATH=/nnb".into()],
                cwd: "/",
                capabilities: Capabilities {
                    bounding: caps.clone(),
                    effective: caps.clone(),
                    permitted: caps,
                },
                no_new_privileges: true,
            },
            root: Root {
                path: "rootfs",
                readonly: true,
            },
            hostname: self.hostname.to_string(),
            mounts,
            linux: Linux {
                cgroups_path: self.cgroups_path.clone(),
                resources: self.resources.clone(),
                namespaces,
            },
        }
    }
}

impl Config {
    /// Its mounts (the root filesystem needs a mount point for each).
    pub fn mounts(&self) -> &[Mount] {
        &self.mounts
    }

    /// Its bind mounts: the host's source, the destination, read-only or not
    /// (what a runtime without a bundle, podman, is given as volumes).
    pub fn binds(&self) -> impl Iterator<Item = (&Path, &Path, bool)> {
        self.mounts.iter().filter(|m| m.kind == "bind").map(|m| {
            (
                m.source.as_path(),
                m.destination.as_path(),
                m.options.contains(&"ro"),
            )
        })
    }

    /// The container's command line.
    pub fn args(&self) -> &[String] {
        &self.process.args
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 28: a 0.5-CPU, 256 MiB grant on CPU 1 is, in OCI terms, a quota of
    /// 50000 µs of a 100000 µs period on cpuset "1" and a limit of 268435456 bytes
    /// (256 * 1024 * 1024), worked by hand; the agent's command line is the local
    /// provider's, behind the binary's path inside the container.
    #[test]
    fn half_a_cpu_and_256_mib_in_oci_terms() {
        let grant = TenantGrant {
            cpu: Some(0.5),
            memory_bytes: Some(256 << 20),
            ..TenantGrant::default()
        };
        let spec = Spec {
            hostname: "a",
            agent_args: [
                "agent",
                "--listen",
                "127.0.0.1:0",
                "--token-file",
                AGENT_TOKEN,
            ]
            .map(String::from)
            .to_vec(),
            binary: Path::new("/usr/bin/nnb"),
            token_file: Path::new("/run/t/a.token"),
            io_dir: None,
            netns: None,
            cgroups_path: "/nnb-runc/run-7-0/nnb-x-a".into(),
            resources: Resources::of(&grant, &[1], None),
        };
        let json = serde_json::to_value(spec.config()).unwrap();
        let expected = serde_json::json!({
            "cgroupsPath": "/nnb-runc/run-7-0/nnb-x-a",
            "resources": {
                "cpu": {"quota": 50000, "period": 100000, "cpus": "1"},
                "memory": {"limit": 268435456}
            },
            "namespaces": [
                {"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}
            ]
        });
        assert_eq!(json["linux"], expected, "{json:#}");
        assert_eq!(
            json["process"]["args"],
            serde_json::json!([
                "/nnb/nnb",
                "agent",
                "--listen",
                "127.0.0.1:0",
                "--token-file",
                "/nnb/token"
            ])
        );
        assert_eq!(json["ociVersion"], "1.0.2");
        assert_eq!(
            json["root"],
            serde_json::json!({"path": "rootfs", "readonly": true})
        );
        let mount = |dest: &str| {
            json["mounts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["destination"] == dest)
                .cloned()
                .unwrap_or_else(|| panic!("no mount at {dest}: {json:#}"))
        };
        assert_eq!(
            mount("/nnb/nnb"),
            serde_json::json!({"destination": "/nnb/nnb", "type": "bind",
                "source": "/usr/bin/nnb", "options": ["rbind", "nosuid", "ro"]})
        );
        assert_eq!(mount("/nnb/token")["source"], "/run/t/a.token");
        assert_eq!(mount("/sys")["options"][3], "ro");
        for m in ["/proc", "/dev", "/tmp"] {
            mount(m);
        }
    }

    /// The emulated network's namespace is joined by path; I/O limits name the
    /// device, one throttle per limit given; an empty grant limits nothing.
    #[test]
    fn a_network_namespace_and_io_throttles() {
        let grant = TenantGrant {
            read_iops: Some(200),
            write_bytes_per_s: Some(10 << 20),
            ..TenantGrant::default()
        };
        let r = Resources::of(&grant, &[0, 1], Some((8, 0)));
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "cpu": {"cpus": "0-1"},
                "blockIO": {
                    "throttleReadIOPSDevice": [{"major": 8, "minor": 0, "rate": 200}],
                    "throttleWriteBpsDevice": [{"major": 8, "minor": 0, "rate": 10485760}]
                }
            })
        );
        assert_eq!(
            serde_json::to_value(Resources::of(&TenantGrant::default(), &[0], None)).unwrap(),
            serde_json::json!({})
        );
        let spec = Spec {
            hostname: "b",
            agent_args: Vec::new(),
            binary: Path::new("/nnb"),
            token_file: Path::new("/t"),
            io_dir: Some(Path::new("/data/io")),
            netns: Some("/var/run/netns/nnb-t0".into()),
            cgroups_path: "/x".into(),
            resources: r,
        };
        let json = serde_json::to_value(spec.config()).unwrap();
        assert_eq!(
            json["linux"]["namespaces"][4],
            serde_json::json!({"type": "network", "path": "/var/run/netns/nnb-t0"})
        );
        assert!(json["mounts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["destination"] == "/data/io"
                && m["options"] == serde_json::json!(["rbind", "nosuid"])));
    }
}
