//! What a provider says of a run before anything is started or created: where the
//! tenants would sit ([`Placement`], for a dry run), what a real run would create
//! and cost, and whether it may start ([`Preflight`]).
//!
//! Each provider decides these ([`Provider::placement`], [`Provider::preflight`]);
//! the command line only shows them: it prints the placement and the resources,
//! says the verdict's notes and turns a refusal into a usage error (exit 2). So the
//! command line names no provider, and a new provider brings its own checks.
//!
//! [`Provider::placement`]: super::Provider::placement
//! [`Provider::preflight`]: super::Provider::preflight

use nnb_burn::topology::Topology;
use nnb_experiment::Experiment;

use super::upload;

/// The CPUs of the machine nnb runs on, as a dry run places local tenants on them.
#[derive(Debug, Clone, Copy)]
pub struct HostCpus<'a> {
    /// The machine's CPU topology (or a sysfs fixture's).
    pub topology: &'a Topology,
    /// The online CPUs tenants may use (this process' affinity; every online CPU
    /// of a fixture).
    pub allowed: &'a [usize],
}

/// Where each tenant would run, as a dry run shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Per tenant, in the order of the specs: the CPUs it would be pinned to, or
    /// `None` where the provider does not pick CPUs (a static host, an instance).
    pub cpus: Vec<Option<Vec<usize>>>,
    /// What the dry run shows for a tenant without CPUs: where it runs instead,
    /// e.g. `(static host)` or `(m5.large)`.
    pub elsewhere: String,
    /// What the placement had to give up (CPUs shared between tenants).
    pub warnings: Vec<String>,
}

impl Placement {
    /// `tenants` tenants, each shown as running at `elsewhere`.
    pub fn elsewhere(tenants: usize, elsewhere: impl Into<String>) -> Placement {
        Placement {
            cpus: vec![None; tenants],
            elsewhere: elsewhere.into(),
            warnings: Vec::new(),
        }
    }
}

/// What a provider says of a run before anything is created.
#[derive(Debug, Clone, PartialEq)]
pub struct Preflight {
    /// What a real run creates and what it costs, for a dry run to show; `None`
    /// when the provider creates nothing but the tenants' agents.
    pub resources: Option<Resources>,
    /// Whether a real run may start.
    pub verdict: Verdict,
}

impl Preflight {
    /// A run that creates nothing and costs nothing: it may start, unless it names
    /// a `results_s3` this build cannot upload to.
    pub fn free(exp: &Experiment) -> Preflight {
        let verdict = match (&exp.results_s3, upload::available()) {
            (Some(_), Err(e)) => Verdict::Refused(e.to_string()),
            _ => Verdict::Go { notes: Vec::new() },
        };
        Preflight {
            resources: None,
            verdict,
        }
    }
}

/// Whether a real run may start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It may: each note is said once (on stderr) before the run starts, e.g. the
    /// estimated cost.
    Go {
        /// What to say first.
        notes: Vec<String>,
    },
    /// The plan cannot run where the provider would put it (the tenants do not
    /// fit the host): a real run and a dry run both refuse it (exit 2).
    Unfit {
        /// What a real run says.
        refusal: String,
        /// What a dry run says, after the resources that show why.
        dry_run_refusal: String,
    },
    /// A real run needs the user's consent or a change to the file first (a cost
    /// not accepted, above the file's cap): the message says which (exit 2). A
    /// dry run goes ahead.
    Refused(String),
}

/// What a real run creates, as a dry run shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Resources {
    /// The line above the table, e.g. where the resources would be.
    pub heading: String,
    /// One row per kind of resource.
    pub rows: Vec<Resource>,
    /// Lines below the table: the capacity check, the estimated cost, the cap.
    pub notes: Vec<String>,
    /// All of it for `--json` (the dry run's `cloud`).
    pub json: serde_json::Value,
    /// The whole fleet's price per hour, USD, from the catalog: its dedicated hosts
    /// and its default-tenancy instances (a campaign's dry run multiplies it by the
    /// rounds' hours); `None` when the provider does not price it.
    pub hourly_usd: Option<f64>,
    /// Instances the fleet launches (tenants, endpoint, servers).
    pub instances: usize,
}

/// One kind of resource a real run creates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    /// What it is, e.g. `dedicated host`.
    pub resource: String,
    /// Which, e.g. `m5 (family host)`.
    pub what: String,
    /// How many.
    pub count: usize,
}
