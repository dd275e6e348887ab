//! Fixture tests: directory trees laid out like cgroupfs, with the files the kernel
//! would have pre-created (a write to a plain directory would just create a file),
//! and their content checked against the strings the kernel expects.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

/// A fresh directory under the system temp dir, removed on drop.
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    /// A new empty directory named after `tag`, this process and a counter.
    pub(crate) fn new(tag: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("nnb-cg-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("temp dir");
        TempDir(path)
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Creates `dir` with the files `files` (name, content).
fn cg_dir(dir: &Path, files: &[(&str, &str)]) {
    std::fs::create_dir_all(dir).expect("fixture dir");
    for (name, content) in files {
        std::fs::write(dir.join(name), content).expect("fixture file");
    }
}

fn read(path: impl AsRef<Path>) -> String {
    std::fs::read_to_string(path.as_ref()).unwrap_or_else(|e| panic!("{:?}: {e}", path.as_ref()))
}

/// The cgroup this file's fixtures create.
const LEAF: &str = "nnb/run-1/a";

/// A v2 tree: root, `nnb`, `nnb/run-1` and the leaf, each offering `controllers`;
/// the leaf with the interface files (cpuset ones only when `cpuset` is offered).
fn v2_fixture(controllers: &str) -> TempDir {
    let t = TempDir::new("v2");
    let with_cpuset = controllers.split_whitespace().any(|c| c == "cpuset");
    let mut common = vec![
        ("cgroup.controllers", controllers),
        ("cgroup.subtree_control", ""),
        ("cgroup.procs", ""),
    ];
    if with_cpuset {
        common.push(("cpuset.cpus", ""));
        common.push(("cpuset.cpus.effective", "0-3\n"));
    }
    for dir in ["", "nnb", "nnb/run-1"] {
        cg_dir(&t.path().join(dir), &common);
    }
    let mut leaf = common.clone();
    leaf.extend([
        ("cpu.max", "max 100000\n"),
        ("memory.max", "max\n"),
        ("io.max", ""),
        ("cpu.stat", ""),
        ("memory.stat", ""),
        ("memory.current", ""),
        ("io.stat", ""),
    ]);
    cg_dir(&t.path().join(LEAF), &leaf);
    t
}

/// A v1 tree: one directory per controller, each with `nnb`, `nnb/run-1` and the
/// leaf, a new cpuset being empty.
fn v1_fixture() -> TempDir {
    let t = TempDir::new("v1");
    for level in ["", "nnb", "nnb/run-1", LEAF] {
        let root = level.is_empty();
        let at = |c: &str| t.path().join(c).join(level);
        cg_dir(
            &at("cpu"),
            &[
                ("cgroup.procs", ""),
                ("cpu.cfs_period_us", "100000\n"),
                ("cpu.cfs_quota_us", "-1\n"),
            ],
        );
        cg_dir(
            &at("cpuacct"),
            &[("cgroup.procs", ""), ("cpuacct.usage", "0\n")],
        );
        let (cpus, mems) = if root { ("0-3\n", "0\n") } else { ("\n", "\n") };
        cg_dir(
            &at("cpuset"),
            &[
                ("cgroup.procs", ""),
                ("cpuset.cpus", cpus),
                ("cpuset.mems", mems),
            ],
        );
        cg_dir(
            &at("memory"),
            &[
                ("cgroup.procs", ""),
                ("memory.limit_in_bytes", "9223372036854771712\n"),
            ],
        );
        cg_dir(
            &at("blkio"),
            &[
                ("cgroup.procs", ""),
                ("blkio.throttle.read_iops_device", ""),
                ("blkio.throttle.write_iops_device", ""),
                ("blkio.throttle.read_bps_device", ""),
                ("blkio.throttle.write_bps_device", ""),
            ],
        );
    }
    t
}

/// A grant of every resource, 200 write IOPS on 8:16.
fn full_grant() -> Grant {
    Grant {
        cpus: Some(vec![3, 1]),
        cpu_quota: Some(0.5),
        memory_bytes: Some(64 << 20),
        io: vec![IoLimit {
            device: (8, 16),
            read_iops: None,
            write_iops: Some(200),
            read_bytes_per_s: None,
            write_bytes_per_s: None,
        }],
    }
}

#[test]
fn v2_create_enables_the_controllers_in_every_parent() {
    let t = v2_fixture("cpuset cpu io memory pids");
    let h = Hierarchy::v2_at(t.path());
    assert_eq!(h.version(), Version::V2);
    let cg = h.create(Path::new(LEAF)).expect("create");
    assert_eq!(cg.path(), Path::new(LEAF));
    assert_eq!(cg.dirs(), vec![t.path().join(LEAF)]);
    for parent in ["", "nnb", "nnb/run-1"] {
        let control = read(t.path().join(parent).join("cgroup.subtree_control"));
        assert_eq!(control, "+cpu +memory +io +cpuset", "in `{parent}`");
    }
    assert_eq!(read(t.path().join(LEAF).join("cgroup.subtree_control")), "");

    // Without cpuset, the rest is enabled; without io, creating fails naming it.
    let t = v2_fixture("cpu io memory");
    Hierarchy::v2_at(t.path())
        .create(Path::new(LEAF))
        .expect("create");
    assert_eq!(
        read(t.path().join("nnb/cgroup.subtree_control")),
        "+cpu +memory +io"
    );
    let t = v2_fixture("cpu memory pids");
    let err = Hierarchy::v2_at(t.path())
        .create(Path::new(LEAF))
        .unwrap_err();
    assert!(
        matches!(&err, CgroupError::ControllerMissing { controller: "io", dir } if dir == t.path()),
        "{err}"
    );
}

#[test]
fn v2_apply_and_lift_write_the_kernels_strings() {
    let t = v2_fixture("cpuset cpu io memory");
    let cg = Hierarchy::v2_at(t.path())
        .create(Path::new(LEAF))
        .expect("create");
    let leaf = t.path().join(LEAF);
    cg.apply(&full_grant()).expect("apply");
    assert_eq!(read(leaf.join("cpu.max")), "50000 100000");
    assert_eq!(read(leaf.join("cpuset.cpus")), "1,3");
    assert_eq!(read(leaf.join("memory.max")), "67108864");
    assert_eq!(
        read(leaf.join("io.max")),
        "8:16 riops=max wiops=200 rbps=max wbps=max"
    );

    cg.lift().expect("lift");
    assert_eq!(read(leaf.join("cpu.max")), "max 100000");
    // The parent's effective CPUs ("0-3\n" in nnb/run-1).
    assert_eq!(read(leaf.join("cpuset.cpus")), "0-3");
    assert_eq!(read(leaf.join("memory.max")), "max");
    // 8:16 was limited (io.max listed it), so its rule is cleared.
    assert_eq!(
        read(leaf.join("io.max")),
        "8:16 riops=max wiops=max rbps=max wbps=max"
    );
}

#[test]
fn v2_without_cpuset_refuses_cpus_but_lifts() {
    let t = v2_fixture("cpu io memory");
    let cg = Hierarchy::v2_at(t.path())
        .create(Path::new(LEAF))
        .expect("create");
    let err = cg.apply(&full_grant()).unwrap_err();
    assert!(
        matches!(
            err,
            CgroupError::ControllerMissing {
                controller: "cpuset",
                ..
            }
        ),
        "{err}"
    );
    cg.apply(&Grant {
        cpus: None,
        ..full_grant()
    })
    .expect("apply without cpus");
    assert_eq!(read(t.path().join(LEAF).join("cpu.max")), "50000 100000");
    cg.lift().expect("lift");
    assert!(!t.path().join(LEAF).join("cpuset.cpus").exists());
}

#[test]
fn v2_usage_reads_the_stat_files() {
    let t = v2_fixture("cpu io memory");
    let cg = Hierarchy::v2_at(t.path())
        .create(Path::new(LEAF))
        .expect("create");
    let leaf = t.path().join(LEAF);
    let write =
        |name: &str, content: &str| std::fs::write(leaf.join(name), content).expect("write");
    write(
        "cpu.stat",
        "usage_usec 1500123\nuser_usec 1000000\nsystem_usec 500123\nnr_periods 30\n\
         nr_throttled 12\nthrottled_usec 700000\n",
    );
    write(
        "memory.stat",
        "anon 4194304\nfile 1048576\nkernel 90112\nshmem 0\n",
    );
    write("memory.current", "5332992\n");
    write(
        "io.stat",
        "8:16 rbytes=409600 wbytes=819200 rios=100 wios=200 dbytes=0 dios=0\n\
         254:0 rbytes=4096 wbytes=0 rios=1 wios=0 dbytes=4096 dios=1\n",
    );
    let u = cg.usage().expect("usage");
    assert_eq!(
        u,
        Usage {
            cpu_ns: 1_500_123_000,
            memory_bytes: 4_194_304,
            memory_usage_bytes: 5_332_992,
            // 100 + 200 + 1 + 0; 409600 + 819200 + 4096 + 0
            io_ops: 301,
            io_bytes: 1_232_896,
        }
    );
    write("cpu.stat", "user_usec 1\n");
    let err = cg.usage().unwrap_err();
    assert!(
        matches!(&err, CgroupError::Malformed { path, .. } if path == &leaf.join("cpu.stat")),
        "{err}"
    );
    assert!(err.to_string().contains("no `usage_usec`"), "{err}");
}

#[test]
fn v1_create_fills_each_new_cpuset_from_its_parent() {
    let t = v1_fixture();
    let h = Hierarchy::v1_at(t.path());
    assert_eq!(h.version(), Version::V1);
    let cg = h.create(Path::new(LEAF)).expect("create");
    for level in ["nnb", "nnb/run-1", LEAF] {
        let dir = t.path().join("cpuset").join(level);
        assert_eq!(read(dir.join("cpuset.cpus")), "0-3", "{level}");
        assert_eq!(read(dir.join("cpuset.mems")), "0", "{level}");
    }
    let expected: Vec<PathBuf> = ["cpu", "cpuacct", "cpuset", "memory", "blkio"]
        .iter()
        .map(|c| t.path().join(c).join(LEAF))
        .collect();
    assert_eq!(cg.dirs(), expected);
}

#[test]
fn v1_apply_and_lift_write_the_kernels_strings() {
    let t = v1_fixture();
    let cg = Hierarchy::v1_at(t.path())
        .create(Path::new(LEAF))
        .expect("create");
    let at = |c: &str, f: &str| t.path().join(c).join(LEAF).join(f);
    cg.apply(&full_grant()).expect("apply");
    assert_eq!(read(at("cpu", "cpu.cfs_period_us")), "100000");
    assert_eq!(read(at("cpu", "cpu.cfs_quota_us")), "50000");
    assert_eq!(read(at("cpuset", "cpuset.cpus")), "1,3");
    assert_eq!(read(at("memory", "memory.limit_in_bytes")), "67108864");
    assert_eq!(
        read(at("blkio", "blkio.throttle.write_iops_device")),
        "8:16 200"
    );
    for none in ["read_iops", "read_bps", "write_bps"] {
        let file = format!("blkio.throttle.{none}_device");
        assert_eq!(read(at("blkio", &file)), "8:16 0", "{file}");
    }

    cg.lift().expect("lift");
    assert_eq!(read(at("cpu", "cpu.cfs_quota_us")), "-1");
    assert_eq!(read(at("cpuset", "cpuset.cpus")), "0-3");
    assert_eq!(read(at("memory", "memory.limit_in_bytes")), "-1");
    for file in ["read_iops", "write_iops", "read_bps", "write_bps"] {
        let file = format!("blkio.throttle.{file}_device");
        assert_eq!(read(at("blkio", &file)), "8:16 0", "{file}");
    }
}

#[test]
fn v1_usage_prefers_the_recursive_blkio_files() {
    let t = v1_fixture();
    let cg = Hierarchy::v1_at(t.path())
        .create(Path::new(LEAF))
        .expect("create");
    let write = |c: &str, f: &str, content: &str| {
        std::fs::write(t.path().join(c).join(LEAF).join(f), content).expect("write")
    };
    write("cpuacct", "cpuacct.usage", "2500000123\n");
    write(
        "memory",
        "memory.stat",
        "cache 1000\nrss 2000\nmapped_file 0\ntotal_cache 1048576\ntotal_rss 8388608\n",
    );
    write("memory", "memory.usage_in_bytes", "9441280\n");
    let serviced = "254:0 Read 10\n254:0 Write 300\n254:0 Sync 310\n254:0 Async 0\n\
                    254:0 Discard 5\n254:0 Total 315\nTotal 315\n";
    let bytes = "254:0 Read 40960\n254:0 Write 1228800\n254:0 Sync 1269760\n254:0 Async 0\n\
                 254:0 Discard 20480\n254:0 Total 1290240\nTotal 1290240\n";
    write(
        "blkio",
        "blkio.throttle.io_serviced",
        "254:0 Read 1\n254:0 Write 1\nTotal 2\n",
    );
    write("blkio", "blkio.throttle.io_service_bytes", "Total 0\n");
    let plain = cg.usage().expect("usage without _recursive");
    assert_eq!((plain.io_ops, plain.io_bytes), (2, 0));
    write("blkio", "blkio.throttle.io_serviced_recursive", serviced);
    write("blkio", "blkio.throttle.io_service_bytes_recursive", bytes);
    assert_eq!(
        cg.usage().expect("usage"),
        Usage {
            cpu_ns: 2_500_000_123,
            memory_bytes: 8_388_608,
            memory_usage_bytes: 9_441_280,
            // Read + Write: 10 + 300, 40960 + 1228800 (discards left out)
            io_ops: 310,
            io_bytes: 1_269_760,
        }
    );
    write(
        "blkio",
        "blkio.throttle.io_serviced_recursive",
        "254:0 Read ten\n",
    );
    assert!(matches!(cg.usage(), Err(CgroupError::Malformed { .. })));
}

#[test]
fn processes_join_every_controller() {
    let t = v1_fixture();
    let cg = Hierarchy::v1_at(t.path())
        .create(Path::new(LEAF))
        .expect("create");
    cg.add_process(4321).expect("add");
    for dir in cg.dirs() {
        assert_eq!(read(dir.join("cgroup.procs")), "4321");
    }
    std::fs::write(
        t.path().join("memory").join(LEAF).join("cgroup.procs"),
        "12\n7\n4321\n",
    )
    .expect("write");
    assert_eq!(cg.procs().expect("procs"), vec![7, 12, 4321]);
    std::fs::write(
        t.path().join("cpu").join(LEAF).join("cgroup.procs"),
        "12\nseven\n",
    )
    .expect("write");
    assert!(matches!(cg.procs(), Err(CgroupError::Malformed { .. })));
}

#[test]
fn an_invalid_grant_writes_nothing() {
    let t = v2_fixture("cpuset cpu io memory");
    let cg = Hierarchy::v2_at(t.path())
        .create(Path::new(LEAF))
        .expect("create");
    let io = |device, write_iops| IoLimit {
        device,
        read_iops: None,
        write_iops,
        read_bytes_per_s: None,
        write_bytes_per_s: None,
    };
    let bad = [
        Grant {
            cpu_quota: Some(0.005),
            ..full_grant()
        },
        Grant {
            cpu_quota: Some(0.0),
            ..full_grant()
        },
        Grant {
            cpu_quota: Some(-1.0),
            ..full_grant()
        },
        Grant {
            cpu_quota: Some(f64::NAN),
            ..full_grant()
        },
        Grant {
            cpu_quota: Some(f64::INFINITY),
            ..full_grant()
        },
        Grant {
            cpus: Some(vec![]),
            ..full_grant()
        },
        Grant {
            cpus: Some(vec![0, 1024]),
            ..full_grant()
        },
        Grant {
            memory_bytes: Some(0),
            ..full_grant()
        },
        Grant {
            io: vec![io((8, 16), Some(1)), io((8, 16), Some(2))],
            ..full_grant()
        },
        Grant {
            io: vec![io((8, 16), Some(0))],
            ..full_grant()
        },
        Grant {
            io: (0..65).map(|m| io((8, m), Some(1))).collect(),
            ..full_grant()
        },
    ];
    for grant in bad {
        let err = cg.apply(&grant).unwrap_err();
        assert!(
            matches!(err, CgroupError::InvalidGrant(_)),
            "{grant:?}: {err}"
        );
        assert_eq!(read(t.path().join(LEAF).join("cpu.max")), "max 100000\n");
    }
    // The smallest quota the kernel takes: 1 ms per 100 ms.
    cg.apply(&Grant {
        cpu_quota: Some(0.01),
        ..full_grant()
    })
    .expect("0.01 CPUs");
    assert_eq!(read(t.path().join(LEAF).join("cpu.max")), "1000 100000");
}

#[test]
fn io_rules_clear_devices_the_grant_drops() {
    let grant = Grant {
        io: vec![IoLimit {
            device: (8, 16),
            read_iops: Some(5),
            write_iops: None,
            read_bytes_per_s: None,
            write_bytes_per_s: Some(7),
        }],
        ..Grant::default()
    };
    let plan = grant.plan().expect("plan");
    assert_eq!(
        plan.io_rules(&[(8, 0), (8, 16), (8, 0)]),
        vec![
            ((8, 0), [None; 4]),
            ((8, 16), [Some(5), None, None, Some(7)])
        ]
    );
    assert_eq!(Grant::default().plan().expect("plan").io_rules(&[]), vec![]);
}

#[test]
fn cgroup_paths_stay_below_the_hierarchy() {
    let t = v2_fixture("cpu io memory");
    let h = Hierarchy::v2_at(t.path());
    let deep = "a/".repeat(17);
    for bad in ["", "/nnb", "nnb/../../etc", "./nnb", deep.as_str()] {
        let err = h.create(Path::new(bad)).unwrap_err();
        assert!(
            matches!(err, CgroupError::InvalidPath { .. }),
            "{bad}: {err}"
        );
        let err = h.sweep_dead(Path::new(bad)).unwrap_err();
        assert!(
            matches!(err, CgroupError::InvalidPath { .. }),
            "{bad}: {err}"
        );
    }
}

/// mountinfo text: a tmpfs, the v1 controllers at `v1/<name>` (`cpu_mount` for cpu
/// and cpuacct, which may be mounted together) and a cgroup2 mount at `v2`.
fn mountinfo(v1: &Path, v2: &Path, controllers: &[&str]) -> String {
    let mut text =
        "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n".to_string();
    for (i, c) in controllers.iter().enumerate() {
        let point = v1.join(c.replace(',', "_"));
        text.push_str(&format!(
            "{} 31 0:{} / {} rw,relatime shared:{i} - cgroup cgroup rw,{c}\n",
            32 + i,
            29 + i,
            point.display()
        ));
    }
    text.push_str(&format!(
        "41 31 0:38 / {} rw,relatime - cgroup2 cgroup2 rw\n",
        v2.display()
    ));
    text
}

const V1_ALL: [&str; 8] = [
    "cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids",
];

#[test]
fn detection_prefers_a_capable_v2_mount() {
    let t = TempDir::new("detect");
    let v2 = t.path().join("unified");
    cg_dir(&v2, &[("cgroup.controllers", "hugetlb\n")]);
    // A hybrid host like this one: v2 without controllers, v1 complete.
    let v1_host = Hierarchy::from_mountinfo(&mountinfo(t.path(), &v2, &V1_ALL)).expect("v1");
    assert_eq!(v1_host, Hierarchy::v1_at(t.path()));
    // Once the unified tree offers cpu, memory and io, it wins.
    std::fs::write(
        v2.join("cgroup.controllers"),
        "cpuset cpu io memory hugetlb pids\n",
    )
    .expect("write");
    let v2_host = Hierarchy::from_mountinfo(&mountinfo(t.path(), &v2, &V1_ALL)).expect("v2");
    assert_eq!(v2_host, Hierarchy::v2_at(&v2));
    assert_eq!(v2_host.version(), Version::V2);
}

#[test]
fn detection_names_the_missing_v1_controller() {
    let t = TempDir::new("detect");
    let v2 = t.path().join("unified");
    cg_dir(&v2, &[("cgroup.controllers", "cpu memory\n")]);
    let text = mountinfo(
        t.path(),
        &v2,
        &["cpu", "cpuacct", "cpuset", "memory", "pids"],
    );
    let err = Hierarchy::from_mountinfo(&text).unwrap_err();
    assert!(
        matches!(
            err,
            CgroupError::NotMounted {
                controller: "blkio"
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("cgroup v1 controller `blkio` is not mounted"),
        "{err}"
    );
    // No cgroup2 mount at all, cpu and cpuacct mounted together.
    let text = mountinfo(
        t.path(),
        &t.path().join("absent"),
        &["cpu,cpuacct", "cpuset", "memory", "blkio"],
    );
    let h = Hierarchy::from_mountinfo(&text).expect("co-mounted");
    assert_eq!(h.mount(Controller::Cpu), t.path().join("cpu_cpuacct"));
    assert_eq!(h.mount(Controller::Cpuacct), t.path().join("cpu_cpuacct"));
    assert_eq!(h.distinct_mounts().len(), 4);
    let err = Hierarchy::from_mountinfo("31 23 0:28 / /x rw tmpfs\n").unwrap_err();
    assert!(
        matches!(&err, CgroupError::Malformed { path, .. } if path == Path::new(MOUNTINFO)),
        "{err}"
    );
}

#[test]
fn removal_refuses_to_kill_the_caller() {
    let t = v2_fixture("cpu io memory");
    let cg = Hierarchy::v2_at(t.path())
        .create(Path::new(LEAF))
        .expect("create");
    let me = std::process::id();
    std::fs::write(t.path().join(LEAF).join("cgroup.procs"), format!("{me}\n")).expect("write");
    let err = cg.remove().unwrap_err();
    assert!(
        matches!(err, CgroupError::HoldsSelf { pid, .. } if pid == me),
        "{err}"
    );
    assert!(t.path().join(LEAF).is_dir());
}

#[test]
fn sweeping_removes_only_dead_runs() {
    // Plain empty directories stand for cgroups without processes.
    let t = TempDir::new("sweep");
    let me = std::process::id();
    for dir in [
        "nnb/run-4194304/a/b".to_string(),
        "nnb/run-4194304-3/a".to_string(),
        format!("nnb/run-{me}/a"),
        format!("nnb/run-{me}-1/a"),
        "nnb/other/a".into(),
    ] {
        std::fs::create_dir_all(t.path().join(dir)).expect("dirs");
    }
    let h = Hierarchy::v2_at(t.path());
    let removed = h.sweep_dead(Path::new("nnb")).expect("sweep");
    assert_eq!(
        removed,
        vec![
            PathBuf::from("nnb/run-4194304"),
            PathBuf::from("nnb/run-4194304-3")
        ]
    );
    assert!(!t.path().join("nnb/run-4194304").exists());
    assert!(!t.path().join("nnb/run-4194304-3").exists());
    assert!(t.path().join(format!("nnb/run-{me}/a")).is_dir());
    assert!(t.path().join(format!("nnb/run-{me}-1/a")).is_dir());
    assert!(t.path().join("nnb/other/a").is_dir());
    assert_eq!(
        h.sweep_dead(Path::new("nnb")).expect("again"),
        Vec::<PathBuf>::new()
    );
    assert_eq!(
        h.sweep_dead(Path::new("absent")).expect("absent"),
        Vec::<PathBuf>::new()
    );
}

#[test]
fn errors_say_what_to_do() {
    let err = CgroupError::Write {
        path: PathBuf::from("/sys/fs/cgroup/cpu/nnb/run-1/a/cpu.cfs_quota_us"),
        value: "50000".into(),
        source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
    };
    assert_eq!(
        err.to_string(),
        "writing 50000 to /sys/fs/cgroup/cpu/nnb/run-1/a/cpu.cfs_quota_us: permission denied (run as root)"
    );
}
