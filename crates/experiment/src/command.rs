//! Commands in an experiment file: a program of the user's (or one of the seeds'
//! tools through a preset) as a neighbor staircase's test workload or as its busy
//! neighbors' job, checked key by key into the agent's [`CommandSpec`].
//!
//! The keys are the same in `[scenario.test]` and `[scenario.busy]`: `command` (the
//! argv, never a shell string) or `preset` with `args`, `cwd`, `env` and
//! `output_limit`; the test workload adds `timeout`, `duration` (a fixed run time)
//! and `metric` (what its samples record). The agent's rules for a command
//! ([`JobSpec::check_limits`]) are stated once, in `nnb-agent`: each key is checked
//! against them as it is added to the spec, so a mistake is reported at its own key.

use std::collections::BTreeMap;
use std::ops::Range;
use std::time::Duration;

use nnb_agent::jobs::{CommandMetric, CommandSpec, JobSpec, OutputStream, Preset};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::file::{BurnFile, BusyFile, SizeFile, Spanned};
use crate::{values, Burn, Busy, Checker, ExperimentError, TenantDef};

/// A neighbor staircase's test workload: nnb's burner, or a command of the user's.
/// Serialized as the one it is (a burner's keys, or a command's `argv` and the
/// rest), so readers of a manifest that look for the burner's keys find none in a
/// command.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum TestWorkload {
    /// The burner (`workload`, `ops` or `duration`, ...).
    Burn(Burn),
    /// A program (`command` or `preset`); its samples record its wall time or the
    /// value it prints ([`CommandMetric`]).
    Command(CommandSpec),
}

/// `metric` of a command test workload: `"wall"`, or a table naming the value the
/// command prints.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(
    untagged,
    expecting = "metric is \"wall\", or a table { json = \"/pointer\", unit = \"...\", \
                 higher_is_better = true } or { regex = \"value: ([0-9.]+)\", unit = \"...\", \
                 higher_is_better = true }, with `stream = \"stderr\"` to read stderr (no \
                 other keys)"
)]
pub enum MetricFile {
    /// `"wall"`: the wall time from the start to the exit (a fixed-work command's
    /// runtime), seconds, lower is better.
    Name(String),
    /// A value the command prints.
    Printed(PrintedMetricFile),
}

/// `metric = { json = ..., unit = ..., higher_is_better = ... }` or the same with
/// `regex`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrintedMetricFile {
    /// A JSON pointer (RFC 6901) into the output read as one JSON document, e.g.
    /// "/jobs/0/read/iops".
    #[serde(default)]
    pub json: Option<String>,
    /// A regex whose first capture group is the number, e.g.
    /// "events per second: +([0-9.]+)".
    #[serde(default)]
    pub regex: Option<String>,
    /// The value's unit as the results record it, e.g. "events/s".
    #[serde(default)]
    pub unit: Option<String>,
    /// Whether a higher value is better (a rate) or a lower one (a time).
    #[serde(default)]
    pub higher_is_better: Option<bool>,
    /// The stream the value is read from: "stdout" (default) or "stderr".
    #[serde(default)]
    pub stream: Option<String>,
}

/// The command keys of a `[scenario.test]` or `[scenario.busy]` table, borrowed
/// from it (the keys a busy neighbor does not take are `None`).
#[derive(Debug, Clone, Copy, Default)]
pub struct CommandKeys<'a> {
    /// `command`.
    pub command: Option<&'a Spanned<Vec<String>>>,
    /// `preset`.
    pub preset: Option<&'a Spanned<String>>,
    /// `args`.
    pub args: Option<&'a Spanned<Vec<String>>>,
    /// `cwd`.
    pub cwd: Option<&'a Spanned<String>>,
    /// `env`.
    pub env: Option<&'a Spanned<BTreeMap<String, String>>>,
    /// `output_limit`.
    pub output_limit: Option<&'a Spanned<SizeFile>>,
    /// `timeout` (test workload).
    pub timeout: Option<&'a Spanned<String>>,
    /// `metric` (test workload).
    pub metric: Option<&'a Spanned<MetricFile>>,
}

impl CommandKeys<'_> {
    /// Whether the table names a program (`command` or `preset`).
    pub fn is_command(&self) -> bool {
        self.command.is_some() || self.preset.is_some()
    }

    /// Where the first key given that only a command takes stands (`command` and
    /// `preset` left out: they make the table a command).
    pub fn first_span(&self) -> Option<Range<usize>> {
        (self.args.map(Spanned::span))
            .or(self.cwd.map(Spanned::span))
            .or(self.env.map(Spanned::span))
            .or(self.output_limit.map(Spanned::span))
            .or(self.timeout.map(Spanned::span))
            .or(self.metric.map(Spanned::span))
    }
}

impl Checker<'_> {
    /// A neighbor staircase's `[scenario.test]`: a command when it names one
    /// (`command` or `preset`; the burner's keys are then refused), else the
    /// burner.
    pub(crate) fn test_workload(
        &self,
        tenants: &[TenantDef],
        b: &Spanned<BurnFile>,
    ) -> Result<TestWorkload, ExperimentError> {
        let f = b.get_ref();
        if !f.command_keys().is_command() {
            return self.burn(tenants, b).map(TestWorkload::Burn);
        }
        let burner_only = (f.workload.as_ref().map(Spanned::span))
            .or(f.threads.as_ref().map(Spanned::span))
            .or(f.ops.as_ref().map(Spanned::span))
            .or(f.pin.as_ref().map(Spanned::span))
            .or(f.pool.as_ref().map(Spanned::span));
        if let Some(span) = burner_only {
            return Err(self.error(
                span,
                "`workload`, `threads`, `ops`, `pin` and `pool` are the burner's: a command \
                 test workload takes `command` (or `preset` and `args`), `cwd`, `env`, \
                 `timeout`, `duration`, `output_limit` and `metric`",
            ));
        }
        self.command(f.command_keys(), f.duration.as_ref())
            .map(TestWorkload::Command)
    }

    /// `[scenario.busy]` of kind "command": the burner's and the load's keys are
    /// refused.
    pub(crate) fn busy_command(&self, b: &BusyFile) -> Result<Busy, ExperimentError> {
        let other = (b.workload.as_ref().map(Spanned::span))
            .or(b.threads.as_ref().map(Spanned::span))
            .or(b.rate.as_ref().map(Spanned::span))
            .or(b.streams.as_ref().map(Spanned::span))
            .or(b.msg_size.as_ref().map(Spanned::span))
            .or(b.load_settings().first_span());
        if let Some(span) = other {
            return Err(self.error(
                span,
                "a command neighbor takes `command` (or `preset` and `args`), `cwd`, `env` \
                 and `output_limit`: this key is a burner's or a load's",
            ));
        }
        if !b.command_keys().is_command() {
            let at = b
                .kind
                .as_ref()
                .map_or(self.scenario_span.clone(), Spanned::span);
            return Err(self.error(
                at,
                "a command neighbor needs `command` (its argv, e.g. [\"stress-ng\", \"--cpu\", \
                 \"1\"]) or `preset` (one of the seeds' tools, with `args`)",
            ));
        }
        self.command(b.command_keys(), None).map(Busy::Command)
    }

    /// Refuses the command keys in a table that is not a command, naming `what`
    /// they apply to.
    pub(crate) fn no_command_keys(
        &self,
        keys: CommandKeys<'_>,
        what: &str,
    ) -> Result<(), ExperimentError> {
        let first = (keys.command.map(Spanned::span))
            .or(keys.preset.map(Spanned::span))
            .or(keys.first_span());
        match first {
            Some(span) => Err(self.error(
                span,
                format!(
                    "`command`, `preset`, `args`, `cwd`, `env`, `output_limit`, `timeout` and \
                     `metric` apply to {what}"
                ),
            )),
            None => Ok(()),
        }
    }

    /// The command `keys` describe (one of them is `command` or `preset`), with a
    /// fixed run time `duration` (a test workload's `duration`; `None` for a
    /// command that runs until it exits or is stopped). Each key is checked as it
    /// is added, against the agent's rules for a command job, so a mistake is
    /// reported at its key.
    pub(crate) fn command(
        &self,
        keys: CommandKeys<'_>,
        duration: Option<&Spanned<String>>,
    ) -> Result<CommandSpec, ExperimentError> {
        let (argv, preset, at) = match (keys.command, keys.preset) {
            (Some(_), Some(p)) => {
                return Err(self.error(
                    p.span(),
                    "give either `command` (a program's argv) or `preset` (one of the \
                     seeds' tools, with `args`), not both",
                ))
            }
            (Some(c), None) => {
                if let Some(a) = keys.args {
                    return Err(self.error(
                        a.span(),
                        "`args` are a preset's arguments: with `command`, write them in \
                         its list after the program",
                    ));
                }
                let argv = c.get_ref().clone();
                match argv.first() {
                    None => {
                        return Err(self.error(
                            c.span(),
                            "the command is empty: give the program and its arguments, \
                             e.g. command = [\"./loop\", \"2000\"]",
                        ))
                    }
                    Some(p) if p.trim().is_empty() => {
                        return Err(self.error(c.span(), "the command's program is empty"))
                    }
                    Some(_) => {}
                }
                (argv, None, c.span())
            }
            (None, Some(p)) => {
                let Some(preset) = Preset::from_name(p.get_ref()) else {
                    let names: Vec<&str> = Preset::ALL.iter().map(|p| p.name()).collect();
                    return Err(self.error(
                        p.span(),
                        format!(
                            "unknown preset `{}`: expected one of {} (or give your own \
                             program as `command`)",
                            p.get_ref(),
                            names.join(", ")
                        ),
                    ));
                };
                let args = keys.args.map(|a| a.get_ref().clone()).unwrap_or_default();
                let argv = std::iter::once(preset.name().to_string())
                    .chain(args)
                    .collect();
                (argv, Some(preset), p.span())
            }
            (None, None) => {
                return Err(self.scenario_error(
                    "a command needs `command` (its argv) or `preset` (one of the seeds' \
                     tools)",
                ))
            }
        };
        let mut spec = CommandSpec {
            argv,
            cwd: None,
            env: BTreeMap::new(),
            timeout_ms: None,
            duration_ms: None,
            output_limit: nnb_agent::jobs::limits::DEFAULT_COMMAND_OUTPUT,
            metric: CommandMetric::Wall,
            preset,
        };
        self.command_fits(&spec, at)?;
        if let Some(c) = keys.cwd {
            spec.cwd = Some(c.get_ref().clone());
            self.command_fits(&spec, c.span())?;
        }
        if let Some(e) = keys.env {
            spec.env = e.get_ref().clone();
            self.command_fits(&spec, e.span())?;
        }
        if let Some(o) = keys.output_limit {
            spec.output_limit = self.at(o, size(o.get_ref()))?;
            self.command_fits(&spec, o.span())?;
        }
        if let Some(t) = keys.timeout {
            spec.timeout_ms = Some(self.command_ms(t, "timeout")?);
            self.command_fits(&spec, t.span())?;
        }
        if let Some(d) = duration {
            spec.duration_ms = Some(self.command_ms(d, "duration")?);
            self.command_fits(&spec, d.span())?;
        }
        if let Some(m) = keys.metric {
            spec.metric = self.at(m, metric(m.get_ref()))?;
            self.command_fits(&spec, m.span())?;
        }
        Ok(spec)
    }

    /// The agent's verdict on `spec`, as an error at `at`.
    fn command_fits(&self, spec: &CommandSpec, at: Range<usize>) -> Result<(), ExperimentError> {
        JobSpec::Command(spec.clone())
            .check_limits()
            .map_err(|why| self.error(at, why))
    }

    /// A duration key of a command in whole milliseconds, at least 1.
    fn command_ms(&self, v: &Spanned<String>, what: &str) -> Result<u64, ExperimentError> {
        let d: Duration = self.at(v, values::duration(v.get_ref()))?;
        match nnb_units::millis(d) {
            0 => Err(self.error(
                v.span(),
                format!("{what} must be at least 1ms (jobs are timed in whole milliseconds)"),
            )),
            ms => Ok(ms),
        }
    }
}

/// A size in bytes: an integer, or a string with its unit ("64K").
fn size(v: &SizeFile) -> Result<u64, String> {
    match v {
        SizeFile::Bytes(n) => Ok(*n),
        SizeFile::Text(t) => nnb_units::parse_size(t).map_err(|e| e.to_string()),
    }
}

/// Where a printed value is found: at a JSON pointer, or by a regex.
enum Found {
    Json(String),
    Regex(String),
}

/// What a `metric` key asks for, with its unit and direction declared.
fn metric(m: &MetricFile) -> Result<CommandMetric, String> {
    let p = match m {
        MetricFile::Name(n) if n == "wall" => return Ok(CommandMetric::Wall),
        MetricFile::Name(n) => {
            return Err(format!(
                "metric = {n:?}: \"wall\" (the wall time), or a table naming the value the \
                 command prints, e.g. {{ regex = \"rate: ([0-9.]+)\", unit = \"ops/s\", \
                 higher_is_better = true }}"
            ))
        }
        MetricFile::Printed(p) => p,
    };
    let (what, source) = match (&p.json, &p.regex) {
        (Some(_), Some(_)) => return Err("give either `json` or `regex`, not both".into()),
        (None, None) => {
            return Err(
                "a printed value needs `json` (a JSON pointer) or `regex` (with a capture \
                 group)"
                    .into(),
            )
        }
        (Some(pointer), None) => ("json", Found::Json(pointer.clone())),
        (None, Some(pattern)) => ("regex", Found::Regex(pattern.clone())),
    };
    let unit = match p.unit.as_deref().map(str::trim) {
        Some(u) if !u.is_empty() => u.to_string(),
        _ => {
            return Err(format!(
                "a {what} metric needs its `unit`, e.g. unit = \"ops/s\" (the results record \
                 it)"
            ))
        }
    };
    let Some(higher_is_better) = p.higher_is_better else {
        return Err(format!(
            "a {what} metric needs its direction: higher_is_better = true (a rate) or false \
             (a time)"
        ));
    };
    let stream = match p.stream.as_deref() {
        None | Some("stdout") => OutputStream::Stdout,
        Some("stderr") => OutputStream::Stderr,
        Some(s) => return Err(format!("stream = {s:?}: \"stdout\" or \"stderr\"")),
    };
    Ok(match source {
        Found::Json(pointer) => CommandMetric::Json {
            pointer,
            unit,
            higher_is_better,
            stream,
        },
        Found::Regex(pattern) => CommandMetric::Regex {
            pattern,
            unit,
            higher_is_better,
            stream,
        },
    })
}
