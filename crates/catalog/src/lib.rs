//! The EC2 instance catalog: what a dedicated host of each family holds and costs.
//!
//! A dedicated host runs one instance family (m5, m6g, ...); how many tenants of a
//! size fit on it, how many physical cores back its vCPUs and what it costs per hour
//! decide whether a noisy-neighbor plan fits and what it will cost. `nnb run --dry-run`
//! reads the prices, the EC2 provider checks capacity before creating anything, and
//! the analysis uses the bandwidths to predict throughput. The data lives in
//! `catalog.toml` next to this crate, with a source for every number; values that
//! DescribeHosts returns at run time win over it. It also holds the credit windows
//! (review item 42): how long a size's burst bandwidth lasts and the burstable (T)
//! types' CPU credits, which `nnb run` warns about and `nnb analyze` flags.

use std::fmt;
use std::sync::OnceLock;

use serde::Deserialize;

/// The built-in catalog's text, compiled into the binary.
const BUILTIN: &str = include_str!("../catalog.toml");

/// Every instance family nnb knows, as read from a catalog file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Catalog {
    /// The families, in file order (`[[family]]` tables).
    #[serde(rename = "family")]
    pub families: Vec<Family>,
    /// The burstable (T) instance types' CPU credits, in file order (`burstable`):
    /// not tied to a host family, so a tenant or endpoint of any such type has them.
    #[serde(default)]
    pub burstable: Vec<CpuCredits>,
}

/// How long a size's burst bandwidth lasts on its network I/O credits, seconds: AWS
/// documents a range ("typically from 5 to 60 minutes, depending on the instance
/// size"), written in the catalog as `burst_window_s = [shortest, longest]`.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(from = "[f64; 2]")]
pub struct BurstWindow {
    /// The shortest documented burst: past it the size may be back on its baseline
    /// bandwidth.
    pub shortest_s: f64,
    /// The longest documented burst: past it the credits of a size that sent above
    /// its baseline all along are spent.
    pub longest_s: f64,
}

impl From<[f64; 2]> for BurstWindow {
    fn from([shortest_s, longest_s]: [f64; 2]) -> BurstWindow {
        BurstWindow {
            shortest_s,
            longest_s,
        }
    }
}

/// A burstable (T) instance type's CPU credits (AWS's credit table). One credit is
/// one vCPU at 100% for one minute; the instance earns `credits_per_hour` and
/// spends what its vCPUs use; in standard mode (the only mode on a dedicated host)
/// it runs at its baseline once the balance is spent.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuCredits {
    /// Instance type, e.g. `t3.micro`.
    pub name: String,
    /// vCPUs of one instance.
    pub vcpus: u32,
    /// CPU architecture (t4g is arm64, t3 and t3a x86_64): which nnb binary the
    /// instance installs.
    pub arch: Arch,
    /// On-demand price of one instance (Linux, the catalog's price region), USD per
    /// hour: what a default-tenancy instance of the type costs.
    #[serde(default)]
    pub on_demand_usd_per_hour: Option<f64>,
    /// Credits earned per hour.
    pub credits_per_hour: f64,
    /// The utilisation per vCPU that spends what it earns, percent.
    pub baseline_pct: f64,
    /// The largest balance it can hold (24 hours of earned credits).
    pub max_balance: f64,
}

impl CpuCredits {
    /// The estimated balance `elapsed_s` seconds after a balance of `balance`, when
    /// the instance's CPUs were busy `busy_cpu_s` CPU-seconds in between (summed
    /// over its vCPUs): earned credits added, spent ones (one per busy CPU-minute)
    /// taken, held between zero (standard mode throttles to the baseline instead of
    /// borrowing) and the largest balance. An estimate: the clamp is applied once
    /// over the span, not minute by minute.
    pub fn balance_after(&self, balance: f64, elapsed_s: f64, busy_cpu_s: f64) -> f64 {
        let earned = self.credits_per_hour * elapsed_s.max(0.0) / 3600.0;
        let spent = busy_cpu_s.max(0.0) / 60.0;
        (balance + earned - spent).clamp(0.0, self.max_balance)
    }
}

/// CPU architecture of a family: decides which nnb binary a tenant installs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
pub enum Arch {
    /// 64-bit x86 (Intel, AMD).
    #[serde(rename = "x86_64")]
    X86_64,
    /// 64-bit ARM (AWS Graviton).
    #[serde(rename = "arm64")]
    Arm64,
}

impl Arch {
    /// The name EC2 uses for the architecture (`x86_64`, `arm64`).
    pub fn as_str(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Arm64 => "arm64",
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One instance family and the dedicated host that runs it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Family {
    /// Family name, e.g. `m5`; also the `InstanceFamily` of AllocateHosts.
    pub name: String,
    /// CPU architecture of the host and its instances.
    pub arch: Arch,
    /// Processor model(s) AWS uses for this family.
    pub cpu: String,
    /// CPU sockets of one dedicated host.
    pub sockets: u32,
    /// Physical cores of one dedicated host (all sockets).
    pub physical_cores: u32,
    /// vCPUs of one dedicated host: `physical_cores * threads_per_core`.
    pub host_vcpus: u32,
    /// Hardware threads per core: 2 with SMT (Intel, AMD), 1 without (Graviton).
    pub threads_per_core: u32,
    /// Network bandwidth of the whole host (its metal / largest size), bit/s.
    pub host_bandwidth_bps: f64,
    /// On-demand price of one dedicated host, USD per hour.
    pub host_price_usd_per_hour: f64,
    /// Region the price is for, e.g. `us-east-1`.
    pub price_region: String,
    /// When (and how) the price was read; prices change, so say how old it is.
    pub price_as_of: String,
    /// The instance sizes of the family, smallest first.
    pub sizes: Vec<Size>,
    /// Where the numbers come from: thesis tables and AWS documentation URLs.
    pub sources: Vec<String>,
}

impl Family {
    /// The size called `name` (e.g. `m5.large`), if the family has it.
    pub fn size(&self, name: &str) -> Option<&Size> {
        self.sizes.iter().find(|s| s.name == name)
    }
}

/// One instance size of a family and how many of it a dedicated host holds.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Size {
    /// Instance type, e.g. `m5.large`.
    pub name: String,
    /// vCPUs of one instance.
    pub vcpus: u32,
    /// On-demand price of one instance with default tenancy (Linux, the family's
    /// price region), USD per hour; `None` where the catalog does not know it.
    #[serde(default)]
    pub on_demand_usd_per_hour: Option<f64>,
    /// How many instances of this size alone fill one dedicated host.
    pub instances_per_host: u32,
    /// Bandwidth the instance keeps indefinitely, bit/s.
    pub baseline_bandwidth_bps: f64,
    /// Bandwidth reachable while network I/O credits last, bit/s; None when the
    /// size has a fixed bandwidth.
    #[serde(default)]
    pub burst_bandwidth_bps: Option<f64>,
    /// How long the burst bandwidth lasts (`burst_window_s`); given exactly when
    /// `burst_bandwidth_bps` is.
    #[serde(default, rename = "burst_window_s")]
    pub burst_window: Option<BurstWindow>,
}

/// Why a catalog file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The text is not valid TOML or does not have the catalog's shape.
    #[error("catalog line {line}: {message}")]
    Parse {
        /// 1-based line of the error (1 when TOML gives no position).
        line: usize,
        /// What is wrong there.
        message: String,
    },
    /// The file parses but a family contradicts itself.
    #[error("catalog family {family}: {message}")]
    Invalid {
        /// The family at fault.
        family: String,
        /// The violated rule, with the numbers.
        message: String,
    },
}

impl Catalog {
    /// The catalog compiled into nnb (`crates/catalog/catalog.toml`), parsed once.
    ///
    /// The file is checked by this crate's tests, so a parse failure is a build defect.
    pub fn builtin() -> &'static Catalog {
        static CATALOG: OnceLock<Catalog> = OnceLock::new();
        CATALOG.get_or_init(|| match Catalog::from_toml(BUILTIN) {
            Ok(catalog) => catalog,
            Err(e) => panic!("built-in catalog.toml is broken (a test catches this): {e}"),
        })
    }

    /// Parses and checks a catalog file's text; errors name the line or the family.
    pub fn from_toml(text: &str) -> Result<Catalog, CatalogError> {
        let catalog: Catalog = toml::from_str(text).map_err(|e| CatalogError::Parse {
            line: e.span().map_or(1, |span| line_of(text, span.start)),
            message: e.message().to_string(),
        })?;
        catalog.validate()?;
        Ok(catalog)
    }

    /// The family called `name` (e.g. `m5`).
    pub fn family(&self, name: &str) -> Option<&Family> {
        self.families.iter().find(|f| f.name == name)
    }

    /// The family and size of an instance type such as `m5.large`.
    pub fn size(&self, instance_type: &str) -> Option<(&Family, &Size)> {
        let (family, _) = instance_type.split_once('.')?;
        let family = self.family(family)?;
        Some((family, family.size(instance_type)?))
    }

    /// The CPU credits of a burstable instance type such as `t3.micro`; `None` for a
    /// type without them.
    pub fn cpu_credits(&self, instance_type: &str) -> Option<&CpuCredits> {
        self.burstable.iter().find(|c| c.name == instance_type)
    }

    /// The CPU architecture of an instance type of a catalog family or a burstable
    /// type (`t3.micro`, `t4g.large`); `None` for a type the catalog does not know.
    pub fn arch_of(&self, instance_type: &str) -> Option<Arch> {
        match (self.size(instance_type), self.cpu_credits(instance_type)) {
            (Some((family, _)), _) => Some(family.arch),
            (None, Some(credits)) => Some(credits.arch),
            (None, None) => None,
        }
    }

    /// The on-demand price of one instance of `instance_type` (a size of a family
    /// or a burstable type), USD per hour; `None` where the catalog has none.
    pub fn on_demand_usd_per_hour(&self, instance_type: &str) -> Option<f64> {
        match (self.size(instance_type), self.cpu_credits(instance_type)) {
            (Some((_, size)), _) => size.on_demand_usd_per_hour,
            (None, Some(credits)) => credits.on_demand_usd_per_hour,
            (None, None) => None,
        }
    }

    /// Checks the rules every family must follow, so callers can trust the numbers.
    fn validate(&self) -> Result<(), CatalogError> {
        for (i, family) in self.families.iter().enumerate() {
            if self.families[..i].iter().any(|f| f.name == family.name) {
                return Err(invalid(family, "listed twice".to_string()));
            }
            family.validate()?;
        }
        for (i, credits) in self.burstable.iter().enumerate() {
            if self.burstable[..i].iter().any(|c| c.name == credits.name) {
                return Err(invalid_burstable(credits, "listed twice".to_string()));
            }
            credits.validate()?;
        }
        Ok(())
    }
}

impl CpuCredits {
    /// Checks that the credit table's three numbers agree: the baseline is the
    /// earned credits spread over the vCPUs' minutes, the largest balance a day of
    /// them (a typo in one of them shows).
    fn validate(&self) -> Result<(), CatalogError> {
        let numbers = [self.credits_per_hour, self.baseline_pct, self.max_balance];
        if self.vcpus == 0 || !numbers.into_iter().all(positive) {
            return Err(invalid_burstable(
                self,
                "vcpus, credits_per_hour, baseline_pct and max_balance must be positive"
                    .to_string(),
            ));
        }
        let baseline = self.credits_per_hour / f64::from(self.vcpus) / 60.0 * 100.0;
        if (baseline - self.baseline_pct).abs() > 0.01 {
            return Err(invalid_burstable(
                self,
                format!(
                    "baseline_pct {} != credits_per_hour {} / {} vCPUs / 60 min = {baseline:.2}%",
                    self.baseline_pct, self.credits_per_hour, self.vcpus
                ),
            ));
        }
        if (self.max_balance - 24.0 * self.credits_per_hour).abs() > 0.01 {
            return Err(invalid_burstable(
                self,
                format!(
                    "max_balance {} != 24 h x credits_per_hour {}",
                    self.max_balance, self.credits_per_hour
                ),
            ));
        }
        Ok(())
    }
}

impl Family {
    /// Checks one family: host topology, prices, bandwidths, and that each size fits.
    fn validate(&self) -> Result<(), CatalogError> {
        if self.threads_per_core == 0 || self.sockets == 0 || self.physical_cores == 0 {
            return Err(invalid(
                self,
                "sockets, physical_cores and threads_per_core must be positive".to_string(),
            ));
        }
        if self.physical_cores * self.threads_per_core != self.host_vcpus {
            return Err(invalid(
                self,
                format!(
                    "host_vcpus {} != physical_cores {} x threads_per_core {}",
                    self.host_vcpus, self.physical_cores, self.threads_per_core
                ),
            ));
        }
        if !positive(self.host_price_usd_per_hour) || !positive(self.host_bandwidth_bps) {
            return Err(invalid(
                self,
                "host price and bandwidth must be positive".to_string(),
            ));
        }
        if self.sizes.is_empty() || self.sources.is_empty() {
            return Err(invalid(self, "needs sizes and sources".to_string()));
        }
        let prefix = format!("{}.", self.name);
        for size in &self.sizes {
            if !size.name.starts_with(&prefix) {
                return Err(invalid(
                    self,
                    format!("size {} does not start with {prefix}", size.name),
                ));
            }
            if size.vcpus == 0 || size.instances_per_host == 0 {
                return Err(invalid(
                    self,
                    format!(
                        "size {}: vcpus and instances_per_host must be positive",
                        size.name
                    ),
                ));
            }
            let used = size.vcpus * size.instances_per_host;
            if used > self.host_vcpus {
                return Err(invalid(
                    self,
                    format!(
                        "size {}: {} instances x {} vCPUs = {used} > host_vcpus {}",
                        size.name, size.instances_per_host, size.vcpus, self.host_vcpus
                    ),
                ));
            }
            let window_ok = match (size.burst_bandwidth_bps, size.burst_window) {
                (Some(_), Some(w)) => positive(w.shortest_s) && w.shortest_s <= w.longest_s,
                (None, None) => true,
                _ => false,
            };
            if !window_ok {
                return Err(invalid(
                    self,
                    format!(
                        "size {}: a burst bandwidth needs a burst_window_s = [shortest, longest] \
                         (0 < shortest <= longest, seconds) and a window needs a burst bandwidth",
                        size.name
                    ),
                ));
            }
            let burst_ok = !matches!(size.burst_bandwidth_bps,
                Some(b) if b < size.baseline_bandwidth_bps);
            if !positive(size.baseline_bandwidth_bps) || !burst_ok {
                return Err(invalid(
                    self,
                    format!(
                        "size {}: baseline bandwidth must be positive and at most the burst",
                        size.name
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// An [`CatalogError::Invalid`] for `family`.
fn invalid(family: &Family, message: String) -> CatalogError {
    CatalogError::Invalid {
        family: family.name.clone(),
        message,
    }
}

/// An [`CatalogError::Invalid`] for a burstable type (named as its family).
fn invalid_burstable(credits: &CpuCredits, message: String) -> CatalogError {
    CatalogError::Invalid {
        family: credits.name.clone(),
        message,
    }
}

/// True for a finite number above zero.
fn positive(x: f64) -> bool {
    x.is_finite() && x > 0.0
}

/// 1-based line number of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}
