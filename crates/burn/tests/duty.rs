//! A duty-cycled burner thread is busy its share of the time, as the kernel counts
//! its CPU time from outside the thread (`/proc/self/task/TID/stat`), not as the
//! burner says.

use std::time::{Duration, Instant};

use nnb_burn::burner::{burn_duty, Duty};
use nnb_burn::clock::Clock;
use nnb_burn::placement::Slot;
use nnb_burn::workload::Workload;

/// The burner thread's index: its thread is named `burn-7001`, a name no other test
/// gives a thread.
const THREAD: usize = 7001;

/// The thread named `name` in this process, by its task id.
fn find_thread(name: &str) -> Option<String> {
    std::fs::read_dir("/proc/self/task")
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|tid| {
            std::fs::read_to_string(format!("/proc/self/task/{tid}/comm"))
                .is_ok_and(|c| c.trim() == name)
        })
}

/// A task's utime + stime in clock ticks, None once it has gone.
fn cpu_ticks(tid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    // Fields after `(comm)`: state is field 3, utime 14 and stime 15.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace().skip(11);
    let utime: u64 = f.next()?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    Some(utime + stime)
}

/// Clock ticks per second of /proc (USER_HZ): `getconf CLK_TCK`.
fn ticks_per_second() -> f64 {
    let out = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .expect("getconf");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("CLK_TCK")
}

/// One thread at duty 0.25 for 2 s: its CPU time over the wall time it was watched is
/// 25% +- 3 points.
#[test]
fn a_quarter_duty_uses_a_quarter_of_the_cpu() {
    let hz = ticks_per_second();
    let clock = Clock::calibrate();
    let quarter = Duty::new(0.25).expect("a share");
    let slot = Slot {
        thread: THREAD,
        cpu: None,
        core: None,
        package: None,
    };
    let name = format!("burn-{THREAD}");
    let (result, watched) = std::thread::scope(|s| {
        let watcher = s.spawn(|| {
            let started = Instant::now();
            let tid = loop {
                if let Some(tid) = find_thread(&name) {
                    break tid;
                }
                assert!(started.elapsed() < Duration::from_secs(5), "no {name}");
                std::thread::sleep(Duration::from_millis(1));
            };
            // (time, ticks) at the first and the latest reading while it lives.
            let first = (Instant::now(), cpu_ticks(&tid).expect("stat"));
            let mut last = first;
            while let Some(ticks) = cpu_ticks(&tid) {
                last = (Instant::now(), ticks);
                std::thread::sleep(Duration::from_millis(10));
            }
            (last.0 - first.0, last.1 - first.1)
        });
        let r = burn_duty(
            &clock,
            &Workload::Int,
            Duration::from_secs(2),
            quarter,
            &[slot],
            None,
        )
        .expect("burn");
        (r, watcher.join().expect("watcher"))
    });
    assert_eq!(result.duty, Some(quarter));
    let (wall, ticks) = watched;
    assert!(wall > Duration::from_millis(1500), "watched only {wall:?}");
    let share = ticks as f64 / hz / wall.as_secs_f64();
    assert!(
        (0.22..=0.28).contains(&share),
        "busy {share:.3} of {wall:?} ({ticks} ticks)"
    );
}
