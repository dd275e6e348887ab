//! runc's command line: run a bundle detached, its state, update, kill, delete and
//! list, each a short synchronous call of the `runc` binary (its default state
//! root, `/run/runc`).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde::Deserialize;

/// The largest output nnb reads from one runc call (`runc list` of many
/// containers is a few hundred bytes each).
const MAX_OUTPUT: usize = 4 << 20;

/// The `runc` binary and what it said its version was.
#[derive(Debug, Clone)]
pub struct Runc {
    bin: PathBuf,
    version: String,
}

/// A container as `runc state` and `runc list` describe it.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct State {
    /// Its id.
    pub id: String,
    /// Its init process on the host (0 once stopped).
    pub pid: u32,
    /// `created`, `running`, `paused` or `stopped`.
    pub status: String,
    /// Its bundle directory.
    pub bundle: PathBuf,
}

/// `name` found in `PATH`.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

impl Runc {
    /// The `runc` in `PATH` and the first line of its `--version`; the reason when
    /// there is none or it does not answer.
    pub fn find() -> Result<Runc, String> {
        let bin = which("runc").ok_or("no runc binary in PATH: install runc")?;
        let out = run(&bin, ["--version"]).map_err(|e| format!("{}: {e}", bin.display()))?;
        let version = out.lines().next().unwrap_or("").trim().to_string();
        if version.is_empty() {
            return Err(format!("{} --version said nothing", bin.display()));
        }
        Ok(Runc { bin, version })
    }

    /// The binary.
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// The first line of `runc --version`, e.g. `runc version 1.1.5+ds1`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Starts `runc run --detach --bundle BUNDLE ID` with its stdout piped: the
    /// container's process inherits the pipe (runc passes its stdio through when no
    /// terminal is asked for), so the agent's `listening ADDR` line is read from
    /// the returned child's stdout, while runc itself exits once the container
    /// runs. Its errors and the agent's go to nnb's stderr.
    pub fn run_detached(&self, bundle: &Path, id: &str) -> std::io::Result<Child> {
        Command::new(&self.bin)
            .arg("run")
            .arg("--detach")
            .arg("--bundle")
            .arg(bundle)
            .arg(id)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
    }

    /// The container `id`'s state; `None` when runc knows no such container.
    pub fn state(&self, id: &str) -> Option<State> {
        let out = run(&self.bin, ["state", id]).ok()?;
        serde_json::from_str(&out).ok()
    }

    /// Every container runc knows.
    pub fn list(&self) -> Result<Vec<State>, String> {
        let out = run(&self.bin, ["list", "--format", "json"])?;
        // An empty list is `null`.
        let list: Option<Vec<State>> =
            serde_json::from_str(&out).map_err(|e| format!("runc list: {e}"))?;
        Ok(list.unwrap_or_default())
    }

    /// `runc kill ID SIGNAL` (e.g. `TERM`).
    pub fn kill(&self, id: &str, signal: &str) -> Result<(), String> {
        run(&self.bin, ["kill", id, signal]).map(drop)
    }

    /// `runc delete --force ID`: kills what still runs and removes the container
    /// and its cgroups. A container runc does not know is gone already.
    pub fn delete(&self, id: &str) -> Result<(), String> {
        match run(&self.bin, ["delete", "--force", id]) {
            Err(e) if e.contains("does not exist") => Ok(()),
            r => r.map(drop),
        }
    }

    /// `runc update ARGS... ID` (e.g. `--cpu-quota -1`).
    pub fn update(&self, id: &str, args: &[String]) -> Result<(), String> {
        let mut all: Vec<&OsStr> = vec![OsStr::new("update")];
        all.extend(args.iter().map(OsStr::new));
        all.push(OsStr::new(id));
        run(&self.bin, all).map(drop)
    }
}

/// Runs `bin ARGS`, returning its stdout, or its stderr's last line (or its exit
/// status) when it fails.
fn run<I, S>(bin: &Path, args: I) -> Result<String, String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let out = Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    let text = |b: &[u8]| String::from_utf8_lossy(&b[..b.len().min(MAX_OUTPUT)]).into_owned();
    if out.status.success() {
        Ok(text(&out.stdout))
    } else {
        let err = text(&out.stderr);
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        Err(format!("{} {} ({last})", bin.display(), out.status))
    }
}
