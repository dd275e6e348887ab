//! The `[provider] kind = "aws"` table, checked into an [`AwsSpec`].
//!
//! Instance types and host families are checked against the built-in catalog
//! (`nnb-catalog`), so a typo or a size that cannot share the host is reported at
//! its line before anything is created in the cloud. Whether the plan's tenants fit
//! the host is checked later, by the provider, against the catalog and the host's
//! own `AvailableCapacity`.

use std::collections::BTreeMap;
use std::time::Duration;

use nnb_catalog::{Arch, Catalog};
use serde::Serialize;

use super::file::{InstallFile, ProviderFile, ServerTenancyFile, ServersFile, Spanned};
use super::{values, Checker, ExperimentError};

/// Default TCP port of the tenants' agents.
pub const DEFAULT_AGENT_PORT: u16 = 7700;
/// Default time the tenants get to boot, install nnb and answer their health check.
const DEFAULT_HEALTH_TIMEOUT: Duration = Duration::from_secs(600);
/// Default lifetime written into the resources' expiry tag.
const DEFAULT_EXPIRES_AFTER: Duration = Duration::from_secs(6 * 3600);

/// The dedicated host to allocate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "name", rename_all = "kebab-case")]
pub enum AwsHost {
    /// A host of an instance family ("m5"): instances of any of its sizes.
    Family(String),
    /// A host of one instance type ("m5.large"): instances of that size only.
    Type(String),
}

impl AwsHost {
    /// The family or type as written.
    pub fn name(&self) -> &str {
        match self {
            AwsHost::Family(n) | AwsHost::Type(n) => n,
        }
    }
}

/// Where instances run on aws: the tenants (`tenancy`) or the mirrored servers
/// (`server_tenancy`, with `servers = "mirrored"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServerTenancy {
    /// On a dedicated host: the tenants on the run's host (one family's sizes); the
    /// mirrored servers on a second host of the clients' family (the thesis' setup).
    #[default]
    DedicatedHost,
    /// Default tenancy instances, off any dedicated host: where a user's instance
    /// lands (the thesis' §5.2.1, Wang & Ng's pairs).
    Default,
}

/// Most partitions of a partition placement group (AWS: 7 per availability zone).
pub const MAX_PARTITIONS: u32 = 7;
/// Partitions of a partition placement group unless `partitions` says.
pub const DEFAULT_PARTITIONS: u32 = 2;
/// Most running instances of a spread placement group in one availability zone
/// (AWS: 7 per zone per group).
pub const SPREAD_MAX_INSTANCES: usize = 7;

/// The placement group nnb creates for a default-tenancy run (`placement_group`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "strategy", rename_all = "kebab-case")]
pub enum PlacementGroup {
    /// Packed close together in one zone (low latency, 10 Gbit/s single flows; the
    /// thesis names it for those).
    Cluster,
    /// Each instance on distinct hardware (the thesis names spread as a mitigation);
    /// at most [`SPREAD_MAX_INSTANCES`] per zone.
    Spread,
    /// Instances spread over `partitions` partitions, each its own racks.
    Partition {
        /// How many partitions, 1 to [`MAX_PARTITIONS`].
        partitions: u32,
    },
}

impl PlacementGroup {
    /// EC2's name of the strategy (`cluster`, `spread`, `partition`).
    pub fn strategy(&self) -> &'static str {
        match self {
            PlacementGroup::Cluster => "cluster",
            PlacementGroup::Spread => "spread",
            PlacementGroup::Partition { .. } => "partition",
        }
    }
}

/// Where the tenants get the `nnb` binary that runs their agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum AgentInstall {
    /// Downloaded at boot: an https:// URL or an s3:// object per architecture
    /// (only the host's architecture is needed).
    Download {
        /// For x86_64 hosts.
        x86_64: Option<String>,
        /// For arm64 (Graviton) hosts.
        aarch64: Option<String>,
    },
    /// Already in the image at this path.
    Preinstalled {
        /// Path of the nnb binary.
        path: String,
    },
}

/// A checked AWS provider: the tenants' instances on one dedicated host, or with
/// default tenancy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AwsSpec {
    /// Region; `None` = the standard AWS chain's.
    pub region: Option<String>,
    /// Availability zone of the host, or of the default-tenancy instances.
    pub availability_zone: String,
    /// The tenants' tenancy: on the dedicated `host`, or default.
    pub tenancy: ServerTenancy,
    /// The host to allocate; `None` with default tenancy.
    pub host: Option<AwsHost>,
    /// The instance family of the tenants' type, e.g. `m5` (`t3` for t3.micro).
    pub family: String,
    /// Every tenant's instance type.
    pub instance_type: String,
    /// The endpoint's instance type (off the host, default tenancy).
    pub endpoint_instance_type: String,
    /// Where mirrored servers run (read only with `servers = "mirrored"`).
    pub server_tenancy: ServerTenancy,
    /// The mirrored servers' instance type; `None`: each server is its client's
    /// type (`instance_type`).
    pub server_instance_type: Option<String>,
    /// The AMI.
    pub image_id: String,
    /// Subnet; `None` = the default VPC's subnet in the zone.
    pub subnet_id: Option<String>,
    /// The subnet of each zone (`subnets`): a campaign's round in a zone launches
    /// into its subnet ([`crate::Experiment::in_zone`]); empty when not given.
    pub subnets: BTreeMap<String, String>,
    /// The placement group nnb creates for the run (default tenancy only).
    pub placement_group: Option<PlacementGroup>,
    /// Existing security groups; empty = nnb creates one.
    pub security_group_ids: Vec<String>,
    /// CIDRs the created security group lets reach the agents.
    pub allowed_cidrs: Vec<String>,
    /// EC2 key pair.
    pub key_name: Option<String>,
    /// Instance profile.
    pub iam_instance_profile: Option<String>,
    /// Where the agents' nnb comes from.
    pub install: AgentInstall,
    /// The agents' TCP port.
    pub agent_port: u16,
    /// How long the tenants may take to answer their health check.
    #[serde(serialize_with = "values::serialize_ms", rename = "health_timeout_ms")]
    pub health_timeout: Duration,
    /// Lifetime written into the expiry tags.
    #[serde(serialize_with = "values::serialize_ms", rename = "expires_after_ms")]
    pub expires_after: Duration,
    /// Most the run may cost, USD.
    pub max_cost_usd: Option<f64>,
}

impl AwsSpec {
    /// The instance type's vCPUs, from the catalog (validation guarantees it is
    /// there: a size of a family, or a burstable type).
    pub fn tenant_vcpus(&self) -> usize {
        let catalog = Catalog::builtin();
        match catalog.size(&self.instance_type) {
            Some((_, s)) => s.vcpus as usize,
            None => catalog
                .cpu_credits(&self.instance_type)
                .map_or(1, |c| c.vcpus as usize),
        }
    }

    /// The tenants' CPU architecture, from the catalog: which nnb binary they
    /// install.
    pub fn arch(&self) -> Arch {
        Catalog::builtin()
            .arch_of(&self.instance_type)
            .unwrap_or(Arch::X86_64)
    }

    /// Whether the tenants run with default tenancy (no dedicated host).
    pub fn default_tenancy(&self) -> bool {
        self.tenancy == ServerTenancy::Default
    }

    /// The instance type of a mirrored server: `server_instance_type`, else its
    /// client's (every client is an `instance_type`).
    pub fn server_type(&self) -> &str {
        self.server_instance_type
            .as_deref()
            .unwrap_or(&self.instance_type)
    }

    /// The endpoint's UDP reflector and sink ports: the two after the agent's.
    pub fn serve_ports(&self) -> (u16, u16) {
        (
            self.agent_port.saturating_add(1),
            self.agent_port.saturating_add(2),
        )
    }

    /// How many instances of the tenants' type one host holds, from the catalog.
    pub fn instances_per_host(&self) -> u32 {
        Catalog::builtin()
            .size(&self.instance_type)
            .map_or(0, |(_, s)| s.instances_per_host)
    }

    /// vCPUs of the whole dedicated host, from the catalog; with default tenancy
    /// (no host of the run's) the tenant instance's own.
    pub fn host_vcpus(&self) -> usize {
        if self.default_tenancy() {
            return self.tenant_vcpus();
        }
        Catalog::builtin()
            .family(&self.family)
            .map_or(1, |f| f.host_vcpus as usize)
    }
}

impl Checker<'_> {
    /// Checks the aws keys of `p` (kind = "aws").
    pub(super) fn aws(&self, p: &ProviderFile) -> Result<AwsSpec, ExperimentError> {
        let catalog = Catalog::builtin();
        let known = || {
            catalog
                .families
                .iter()
                .map(|f| f.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let need = |v: &Option<Spanned<String>>, msg: &str| match v {
            Some(v) if !v.get_ref().trim().is_empty() => Ok(v.get_ref().trim().to_string()),
            Some(v) => Err(self.error(v.span(), format!("{msg} (it is empty)"))),
            None => Err(self.error(p.kind.span(), msg.to_string())),
        };
        let tenancy = match p.tenancy.as_ref().map(|t| *t.get_ref()) {
            None | Some(ServerTenancyFile::DedicatedHost) => ServerTenancy::DedicatedHost,
            Some(ServerTenancyFile::Default) => ServerTenancy::Default,
        };
        if tenancy == ServerTenancy::Default {
            return self.aws_default_tenancy(p);
        }
        if let Some(v) = &p.instance_type {
            if catalog.cpu_credits(v.get_ref().trim()).is_some() {
                return Err(self.error(
                    v.span(),
                    format!(
                        "`{}` is a burstable type: nnb runs burstable types with default \
                         tenancy only (a dedicated host here runs one fixed-performance \
                         family of the catalog): set tenancy = \"default\" and remove `host`",
                        v.get_ref().trim()
                    ),
                ));
            }
        }
        self.aws_placement_keys(p, tenancy, None)?;
        let host_v = need(
            &p.host,
            "an aws provider needs `host`: a host family (\"m5\") or instance type (\"m5.large\"), \
             or tenancy = \"default\"",
        )?;
        let host_span = p.host.as_ref().map_or(p.kind.span(), Spanned::span);
        let (host, family) = if host_v.contains('.') {
            match catalog.size(&host_v) {
                Some((f, _)) => (AwsHost::Type(host_v.clone()), f),
                None => {
                    return Err(self.error(
                        host_span,
                        format!(
                            "unknown instance type `{host_v}`: the catalog has families {}",
                            known()
                        ),
                    ))
                }
            }
        } else {
            match catalog.family(&host_v) {
                Some(f) => (AwsHost::Family(host_v.clone()), f),
                None => {
                    return Err(self.error(
                        host_span,
                        format!(
                            "unknown host family `{host_v}`: expected one of {}",
                            known()
                        ),
                    ))
                }
            }
        };
        let instance_type = match (&p.instance_type, &host) {
            (None, AwsHost::Type(t)) => t.clone(),
            (None, AwsHost::Family(f)) => {
                return Err(self.error(
                    p.kind.span(),
                    format!("an aws provider on a `{f}` host needs `instance_type`, the tenants' size, e.g. \"{f}.large\""),
                ))
            }
            (Some(v), _) => {
                let t = v.get_ref().trim().to_string();
                let sizes = || {
                    family
                        .sizes
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                if family.size(&t).is_none() {
                    return Err(self.error(
                        v.span(),
                        format!("`{t}` is not a size of the {} family: expected one of {}", family.name, sizes()),
                    ));
                }
                if let AwsHost::Type(h) = &host {
                    if *h != t {
                        return Err(self.error(
                            v.span(),
                            format!("a `{h}` host runs only {h} instances: set instance_type = \"{h}\" or host = \"{}\"", family.name),
                        ));
                    }
                }
                t
            }
        };
        let endpoint_instance_type = match &p.endpoint_instance_type {
            Some(v) => self.at(v, instance_type_name(v.get_ref()))?,
            None => instance_type.clone(),
        };
        let (server_tenancy, server_instance_type) = self.aws_servers(p, Some((&host, family)))?;
        let mut spec = self.aws_common(p, family.arch)?;
        spec.host = Some(host);
        spec.family = family.name.clone();
        spec.instance_type = instance_type;
        spec.endpoint_instance_type = endpoint_instance_type;
        spec.server_tenancy = server_tenancy;
        spec.server_instance_type = server_instance_type;
        Ok(spec)
    }

    /// The keys of `tenancy = "default"`: `instance_type` (any type of the catalog,
    /// burstable ones included) instead of `host`, and the placement group.
    fn aws_default_tenancy(&self, p: &ProviderFile) -> Result<AwsSpec, ExperimentError> {
        let catalog = Catalog::builtin();
        if let Some(h) = &p.host {
            return Err(self.error(
                h.span(),
                "`host` names a dedicated host: with tenancy = \"default\" the tenants run \
                 on none (remove `host`, or set tenancy = \"dedicated-host\")",
            ));
        }
        let at = p.tenancy.as_ref().map_or(p.kind.span(), Spanned::span);
        let Some(v) = &p.instance_type else {
            return Err(self.error(
                at,
                "tenancy = \"default\" needs `instance_type`, the tenants' type, e.g. \"m5.large\" \
                 or \"t3.micro\"",
            ));
        };
        let instance_type = v.get_ref().trim().to_string();
        let Some(arch) = catalog.arch_of(&instance_type) else {
            let burstable: Vec<&str> = catalog.burstable.iter().map(|c| c.name.as_str()).collect();
            let families: Vec<&str> = catalog.families.iter().map(|f| f.name.as_str()).collect();
            return Err(self.error(
                v.span(),
                format!(
                    "unknown instance type `{instance_type}`: the catalog (which prices it) has \
                     the sizes of the families {} and the burstable types {}",
                    families.join(", "),
                    burstable.join(", ")
                ),
            ));
        };
        let placement_group =
            self.aws_placement_keys(p, ServerTenancy::Default, Some(&instance_type))?;
        let endpoint_instance_type = match &p.endpoint_instance_type {
            Some(v) => self.at(v, instance_type_name(v.get_ref()))?,
            None => instance_type.clone(),
        };
        let (server_tenancy, server_instance_type) = self.aws_servers(p, None)?;
        let mut spec = self.aws_common(p, arch)?;
        spec.tenancy = ServerTenancy::Default;
        spec.family = instance_type
            .split_once('.')
            .map_or(instance_type.as_str(), |(f, _)| f)
            .to_string();
        spec.instance_type = instance_type;
        spec.endpoint_instance_type = endpoint_instance_type;
        spec.server_tenancy = server_tenancy;
        spec.server_instance_type = server_instance_type;
        spec.placement_group = placement_group;
        Ok(spec)
    }

    /// `placement_group` and `partitions`: only with default tenancy, a partition
    /// group's partitions within AWS's limit, no cluster group of a burstable type
    /// (`instance_type`, when default tenancy).
    fn aws_placement_keys(
        &self,
        p: &ProviderFile,
        tenancy: ServerTenancy,
        instance_type: Option<&str>,
    ) -> Result<Option<PlacementGroup>, ExperimentError> {
        if let Some(n) = &p.partitions {
            let partition = p
                .placement_group
                .as_ref()
                .is_some_and(|g| g.get_ref().trim() == "partition");
            if !partition {
                return Err(self.error(
                    n.span(),
                    "`partitions` applies to placement_group = \"partition\"",
                ));
            }
            if !(1..=MAX_PARTITIONS).contains(n.get_ref()) {
                return Err(self.error(
                    n.span(),
                    format!("partitions must be 1 to {MAX_PARTITIONS} (AWS's limit per zone)"),
                ));
            }
        }
        let Some(g) = &p.placement_group else {
            return Ok(None);
        };
        if tenancy != ServerTenancy::Default {
            return Err(self.error(
                g.span(),
                "a placement group places default-tenancy instances: set tenancy = \"default\" \
                 (the tenants of a dedicated host are all on it already)",
            ));
        }
        let group = match g.get_ref().trim() {
            "cluster" => PlacementGroup::Cluster,
            "spread" => PlacementGroup::Spread,
            "partition" => PlacementGroup::Partition {
                partitions: p
                    .partitions
                    .as_ref()
                    .map_or(DEFAULT_PARTITIONS, |n| *n.get_ref()),
            },
            other => {
                return Err(self.error(
                    g.span(),
                    format!(
                        "unknown placement group `{other}`: expected cluster, spread or partition"
                    ),
                ))
            }
        };
        if let (PlacementGroup::Cluster, Some(t)) = (group, instance_type) {
            if Catalog::builtin().cpu_credits(t).is_some() {
                return Err(self.error(
                    g.span(),
                    format!("AWS does not launch burstable instances ({t}) into a cluster placement group: use spread or partition"),
                ));
            }
        }
        Ok(Some(group))
    }

    /// The keys both tenancies read (zone, image, network, install, limits), the
    /// tenants' architecture given; the tenancy's own fields are the caller's to set.
    fn aws_common(&self, p: &ProviderFile, arch: Arch) -> Result<AwsSpec, ExperimentError> {
        let need = |v: &Option<Spanned<String>>, msg: &str| match v {
            Some(v) if !v.get_ref().trim().is_empty() => Ok(v.get_ref().trim().to_string()),
            Some(v) => Err(self.error(v.span(), format!("{msg} (it is empty)"))),
            None => Err(self.error(p.kind.span(), msg.to_string())),
        };
        let availability_zone = need(
            &p.availability_zone,
            "an aws provider needs `availability_zone`, e.g. \"us-east-1a\"",
        )?;
        let image_id = need(
            &p.image_id,
            "an aws provider needs `image_id`, the AMI the tenants boot, e.g. \"ami-0abcdef1234567890\"",
        )?;
        let optional = |v: &Option<Spanned<String>>, what: &str| match v {
            Some(v) if v.get_ref().trim().is_empty() => Err(self.error(
                v.span(),
                format!("{what} is empty: remove it or give a value"),
            )),
            Some(v) => Ok(Some(v.get_ref().trim().to_string())),
            None => Ok(None),
        };
        let region = optional(&p.region, "region")?;
        let mut subnet_id = optional(&p.subnet_id, "subnet_id")?;
        let subnets = self.aws_subnets(p, &availability_zone, &mut subnet_id)?;
        let key_name = optional(&p.key_name, "key_name")?;
        let iam_instance_profile = optional(&p.iam_instance_profile, "iam_instance_profile")?;
        let security_group_ids = p
            .security_group_ids
            .as_ref()
            .map_or_else(Vec::new, |v| v.get_ref().clone());
        let allowed_cidrs = match &p.allowed_cidrs {
            Some(v) => {
                for c in v.get_ref() {
                    self.at(v, cidr(c))?;
                }
                v.get_ref().clone()
            }
            None => Vec::new(),
        };
        if security_group_ids.is_empty() && allowed_cidrs.is_empty() {
            return Err(self.error(
                p.kind.span(),
                "give `allowed_cidrs` (who may reach the agents, e.g. the controller's \
                 [\"203.0.113.7/32\"] or the VPC's [\"10.0.0.0/16\"]) or `security_group_ids`",
            ));
        }
        if security_group_ids.is_empty() && subnet_id.is_none() {
            return Err(self.error(
                p.kind.span(),
                "nnb creates the tenants' security group in the subnet's VPC: give `subnet_id` \
                 (or existing `security_group_ids`)",
            ));
        }
        let install = self.install(p, arch)?;
        let agent_port =
            match &p.agent_port {
                Some(v) if !(1..=65533).contains(v.get_ref()) => return Err(self.error(
                    v.span(),
                    "agent_port must be a port from 1 to 65533 (the next two are the endpoint's)",
                )),
                Some(v) => *v.get_ref(),
                None => DEFAULT_AGENT_PORT,
            };
        let max_cost_usd = match &p.max_cost_usd {
            Some(v) if !(v.get_ref().is_finite() && *v.get_ref() >= 0.0) => {
                return Err(self.error(
                    v.span(),
                    "max_cost_usd must be a number of dollars, 0 or more",
                ))
            }
            Some(v) => Some(*v.get_ref()),
            None => None,
        };
        Ok(AwsSpec {
            region,
            availability_zone,
            tenancy: ServerTenancy::DedicatedHost,
            host: None,
            family: String::new(),
            instance_type: String::new(),
            endpoint_instance_type: String::new(),
            server_tenancy: ServerTenancy::DedicatedHost,
            server_instance_type: None,
            image_id,
            subnet_id,
            subnets,
            placement_group: None,
            security_group_ids,
            allowed_cidrs,
            key_name,
            iam_instance_profile,
            install,
            agent_port,
            health_timeout: self.nonzero_duration(
                &p.health_timeout,
                DEFAULT_HEALTH_TIMEOUT,
                "health_timeout",
            )?,
            expires_after: self.nonzero_duration(
                &p.expires_after,
                DEFAULT_EXPIRES_AFTER,
                "expires_after",
            )?,
            max_cost_usd,
        })
    }

    /// `server_tenancy` and `server_instance_type`, which only mirrored servers read:
    /// a server on the second dedicated host is a size of its `family` (of the
    /// `host`'s one type on a single-type host), one of default tenancy any type.
    /// `on_host` is the clients' host and family; `None` with default tenancy, whose
    /// servers have default tenancy too.
    fn aws_servers(
        &self,
        p: &ProviderFile,
        on_host: Option<(&AwsHost, &nnb_catalog::Family)>,
    ) -> Result<(ServerTenancy, Option<String>), ExperimentError> {
        let mirrored = p
            .servers
            .as_ref()
            .is_some_and(|s| *s.get_ref() == ServersFile::Mirrored);
        let tenancy_at = p.server_tenancy.as_ref().map(Spanned::span);
        let type_at = p.server_instance_type.as_ref().map(Spanned::span);
        if let (false, Some(at)) = (mirrored, tenancy_at.clone().or(type_at.clone())) {
            return Err(self.error(at, "this key applies to servers = \"mirrored\""));
        }
        let written = p.server_tenancy.as_ref().map(|t| (*t.get_ref(), t.span()));
        let tenancy = match (written, on_host) {
            (Some((ServerTenancyFile::DedicatedHost, at)), None) => {
                return Err(self.error(
                    at,
                    "with tenancy = \"default\" the servers have default tenancy too: remove \
                     server_tenancy",
                ))
            }
            (Some((ServerTenancyFile::Default, _)), _) | (_, None) => ServerTenancy::Default,
            (_, Some(_)) => ServerTenancy::DedicatedHost,
        };
        let Some(v) = &p.server_instance_type else {
            return Ok((tenancy, None));
        };
        let t = self.at(v, instance_type_name(v.get_ref()))?;
        if let (ServerTenancy::DedicatedHost, Some((host, family))) = (tenancy, on_host) {
            let sizes = family
                .sizes
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", ");
            if family.size(&t).is_none() {
                return Err(self.error(
                    v.span(),
                    format!(
                        "the servers' second dedicated host is a {} host: `{t}` is not one of \
                         its sizes ({sizes}); set server_tenancy = \"default\" for another type",
                        family.name
                    ),
                ));
            }
            if let AwsHost::Type(h) = host {
                if *h != t {
                    return Err(self.error(
                        v.span(),
                        format!(
                            "the servers' second host is a `{h}` host like the clients', which \
                             runs only {h} instances: set host = \"{}\" or server_tenancy = \
                             \"default\"",
                            family.name
                        ),
                    ));
                }
            }
        }
        Ok((tenancy, Some(t)))
    }

    /// `subnets`: each zone's subnet. The provider's zone takes its subnet from it
    /// when `subnet_id` is not given (and must agree with it when both are).
    fn aws_subnets(
        &self,
        p: &ProviderFile,
        zone: &str,
        subnet_id: &mut Option<String>,
    ) -> Result<BTreeMap<String, String>, ExperimentError> {
        let Some(v) = &p.subnets else {
            return Ok(BTreeMap::new());
        };
        let mut subnets = BTreeMap::new();
        for (z, s) in v.get_ref() {
            let (z, s) = (z.trim(), s.trim());
            if z.is_empty() || !s.starts_with("subnet-") || s.len() == "subnet-".len() {
                return Err(self.error(
                    v.span(),
                    format!("subnets: `{z}` = `{s}` is not a zone and its subnet, e.g. \"us-east-1a\" = \"subnet-0abc\""),
                ));
            }
            subnets.insert(z.to_string(), s.to_string());
        }
        match (subnet_id.as_deref(), subnets.get(zone)) {
            (Some(given), Some(mapped)) if given != mapped => {
                let at = p.subnet_id.as_ref().map_or(v.span(), Spanned::span);
                return Err(self.error(
                    at,
                    format!("subnet_id {given} is not the subnet `subnets` gives {zone} ({mapped}): give one of them"),
                ));
            }
            (None, Some(mapped)) => *subnet_id = Some(mapped.clone()),
            _ => {}
        }
        Ok(subnets)
    }

    /// `install` or `preinstalled` (exactly one), with the host's architecture given.
    fn install(&self, p: &ProviderFile, arch: Arch) -> Result<AgentInstall, ExperimentError> {
        match (&p.install, &p.preinstalled) {
            (Some(_), Some(pre)) => Err(self.error(
                pre.span(),
                "give either `install` (download nnb at boot) or `preinstalled` (nnb in the image), not both",
            )),
            (None, Some(pre)) => {
                let path = pre.get_ref().trim();
                if path.starts_with('/') {
                    Ok(AgentInstall::Preinstalled {
                        path: path.to_string(),
                    })
                } else {
                    Err(self.error(pre.span(), "preinstalled must be an absolute path, e.g. \"/usr/local/bin/nnb\""))
                }
            }
            (None, None) => Err(self.error(
                p.kind.span(),
                "an aws provider needs `install = { x86_64 = \"https://...\" }` (where tenants \
                 download nnb) or `preinstalled = \"/usr/local/bin/nnb\"`",
            )),
            (Some(inst), None) => {
                let f: &InstallFile = inst.get_ref();
                let source = |v: &Option<Spanned<String>>| {
                    v.as_ref()
                        .map(|v| self.at(v, download_source(v.get_ref())))
                        .transpose()
                };
                let x86_64 = source(&f.x86_64)?;
                let aarch64 = source(&f.aarch64)?;
                let (needed, key) = match arch {
                    Arch::X86_64 => (&x86_64, "x86_64"),
                    Arch::Arm64 => (&aarch64, "aarch64"),
                };
                if needed.is_none() {
                    return Err(self.error(
                        inst.span(),
                        format!("this host is {arch}: `install` needs `{key}`, the nnb binary for it"),
                    ));
                }
                Ok(AgentInstall::Download { x86_64, aarch64 })
            }
        }
    }
}

/// An EC2 instance type name such as `c5n.9xlarge` (any family: the endpoint is
/// not on the host, so the catalog need not know it).
fn instance_type_name(s: &str) -> Result<String, String> {
    let s = s.trim();
    let ok = s.split_once('.').is_some_and(|(f, size)| {
        !f.is_empty()
            && !size.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
    });
    if ok {
        Ok(s.to_string())
    } else {
        Err(format!(
            "`{s}` is not an instance type like \"c5n.9xlarge\""
        ))
    }
}

/// An https://, http:// or s3:// location of a binary.
fn download_source(s: &str) -> Result<String, String> {
    let s = s.trim();
    let ok = ["https://", "http://", "s3://"]
        .iter()
        .any(|p| s.len() > p.len() && s.starts_with(p));
    if ok {
        Ok(s.to_string())
    } else {
        Err(format!(
            "`{s}` is not a download location: give an https:// URL or an s3://bucket/key"
        ))
    }
}

/// `s3://bucket[/prefix]`.
pub(super) fn s3_location(s: &str) -> Result<String, String> {
    let s = s.trim().trim_end_matches('/');
    match s.strip_prefix("s3://") {
        Some(rest) if !rest.is_empty() && !rest.starts_with('/') => Ok(s.to_string()),
        _ => Err(format!(
            "`{s}` is not an S3 location: write s3://bucket or s3://bucket/prefix"
        )),
    }
}

/// An IPv4 or IPv6 CIDR block such as `10.0.0.0/16`.
fn cidr(s: &str) -> Result<(), String> {
    let bad = || format!("`{s}` is not a CIDR block like \"203.0.113.7/32\" or \"10.0.0.0/16\"");
    let (addr, len) = s.split_once('/').ok_or_else(bad)?;
    let addr: std::net::IpAddr = addr.parse().map_err(|_| bad())?;
    let len: u8 = len.parse().map_err(|_| bad())?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    if len > max {
        return Err(bad());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{parse, Provider};
    use super::*;

    /// An aws staircase file with `provider` as its [provider] table's lines after
    /// `kind`, and `tenant` as the neighbor entry's extra lines.
    fn file(provider: &str, tenant: &str) -> String {
        format!(
            "name = \"x\"\n[provider]\nkind = \"aws\"\n{provider}\n\
             [[tenants]]\nrole = \"test\"\n[[tenants]]\nrole = \"neighbor\"\n{tenant}\n\
             [scenario]\nkind = \"neighbor-staircase\"\n[scenario.test]\nops = 10\n"
        )
    }

    const GOOD: &str = "availability_zone = \"us-east-1a\"\nhost = \"m5\"\n\
        instance_type = \"m5.large\"\nimage_id = \"ami-1\"\nsubnet_id = \"subnet-1\"\n\
        allowed_cidrs = [\"10.0.0.0/16\"]\npreinstalled = \"/usr/local/bin/nnb\"";

    fn error_line(src: &str) -> (usize, String) {
        match parse("e.toml", src, Some(2)) {
            Ok(_) => (0, "accepted".to_string()),
            Err(e) => e
                .diagnostic()
                .map_or((0, e.to_string()), |d| (d.line, d.message.clone())),
        }
    }

    #[test]
    fn a_good_file_sizes_tenants_by_the_instance_type() {
        let exp = parse("e.toml", &file(GOOD, ""), Some(2));
        let Ok(exp) = exp else { panic!("{exp:?}") };
        let Provider::Aws(spec) = &exp.provider else {
            panic!("{:?}", exp.provider)
        };
        assert_eq!(spec.host, Some(AwsHost::Family("m5".into())));
        assert_eq!(spec.tenancy, ServerTenancy::DedicatedHost);
        assert_eq!(spec.agent_port, DEFAULT_AGENT_PORT);
        assert!(
            exp.tenants.iter().all(|t| t.vcpus == 2),
            "{:?}",
            exp.tenants
        );
        assert_eq!(exp.provider.host_vcpus(), Some(96));
    }

    #[test]
    fn mistakes_point_at_their_line() {
        let cases = [
            (
                GOOD.replace("\"m5\"", "\"m55\""),
                "",
                5,
                "unknown host family",
            ),
            (
                GOOD.replace("host = \"m5\"", "host = \"m5.xlarge\""),
                "",
                6,
                "runs only m5.xlarge",
            ),
            (
                GOOD.replace("\"m5.large\"", "\"m6g.large\""),
                "",
                6,
                "not a size of the m5 family",
            ),
            (
                GOOD.replace(
                    "preinstalled = \"/usr/local/bin/nnb\"",
                    "install = { aarch64 = \"https://x/nnb\" }",
                ),
                "",
                10,
                "needs `x86_64`",
            ),
            (
                GOOD.to_string(),
                "vcpus = 4",
                15,
                "every tenant is a m5.large",
            ),
            (
                GOOD.replace("10.0.0.0/16", "10.0.0.0/99"),
                "",
                9,
                "not a CIDR block",
            ),
            (
                GOOD.replace("\nsubnet_id = \"subnet-1\"", ""),
                "",
                3,
                "give `subnet_id`",
            ),
        ];
        for (provider, tenant, line, msg) in cases {
            let (got_line, got) = error_line(&file(&provider, tenant));
            assert!(got.contains(msg), "{msg:?} not in {got:?}");
            assert_eq!(got_line, line, "{got}");
        }
        let local = "name = \"x\"\n[provider]\nkind = \"local\"\nhost = \"m5\"\n\
            [[tenants]]\nrole = \"test\"\n[scenario]\nkind = \"thread-sweep\"\nthreads = [1]\n\
            [scenario.test]\nops = 10\n";
        let (line, msg) = error_line(local);
        assert_eq!(line, 4);
        assert!(msg.contains("applies to kind = \"aws\""), "{msg}");
    }

    /// A default-tenancy provider: a burstable type, no host, a spread group.
    const DEFAULT: &str = "availability_zone = \"us-east-1a\"\ntenancy = \"default\"\n\
        instance_type = \"t3.micro\"\nimage_id = \"ami-1\"\nsubnet_id = \"subnet-1\"\n\
        allowed_cidrs = [\"10.0.0.0/16\"]\npreinstalled = \"/usr/local/bin/nnb\"";

    #[test]
    fn default_tenancy_takes_any_catalog_type_and_no_host() {
        let src = file(&format!("{DEFAULT}\nplacement_group = \"partition\""), "");
        let exp = parse("e.toml", &src, Some(2));
        let Ok(exp) = exp else { panic!("{exp:?}") };
        let Provider::Aws(spec) = &exp.provider else {
            panic!("{:?}", exp.provider)
        };
        assert_eq!(spec.tenancy, ServerTenancy::Default);
        assert_eq!(spec.host, None);
        assert_eq!(spec.family, "t3");
        assert_eq!(spec.arch(), Arch::X86_64);
        assert_eq!(
            spec.placement_group,
            Some(PlacementGroup::Partition {
                partitions: DEFAULT_PARTITIONS
            })
        );
        assert!(
            exp.tenants.iter().all(|t| t.vcpus == 2),
            "{:?}",
            exp.tenants
        );
        // The servers of a default-tenancy run have default tenancy too.
        assert_eq!(spec.server_tenancy, ServerTenancy::Default);
        let graviton = file(
            &DEFAULT
                .replace(
                    "t3.micro\"",
                    "t4g.large\"\ninstall = { aarch64 = \"https://x/nnb\" }",
                )
                .replace("\npreinstalled = \"/usr/local/bin/nnb\"", ""),
            "",
        );
        let exp = parse("e.toml", &graviton, Some(2));
        let Ok(exp) = exp else { panic!("{exp:?}") };
        let Provider::Aws(spec) = &exp.provider else {
            panic!("{:?}", exp.provider)
        };
        assert_eq!(spec.arch(), Arch::Arm64);
    }

    #[test]
    fn burstable_types_are_refused_on_a_dedicated_host_at_their_line() {
        let src = file(&GOOD.replace("\"m5.large\"", "\"t3.micro\""), "");
        let (line, msg) = error_line(&src);
        assert_eq!(line, 6, "{msg}");
        assert!(
            msg.contains("burstable") && msg.contains("tenancy = \"default\""),
            "{msg}"
        );
    }

    #[test]
    fn default_tenancy_mistakes_point_at_their_line() {
        let cases = [
            (
                DEFAULT.replace(
                    "tenancy = \"default\"",
                    "tenancy = \"default\"\nhost = \"m5\"",
                ),
                6,
                "`host` names a dedicated host",
            ),
            (
                DEFAULT.replace("t3.micro", "c5n.9xlarge"),
                6,
                "unknown instance type",
            ),
            (
                format!("{DEFAULT}\nplacement_group = \"ring\""),
                11,
                "unknown placement group",
            ),
            (
                format!("{DEFAULT}\nplacement_group = \"cluster\""),
                11,
                "burstable instances (t3.micro) into a cluster",
            ),
            (
                format!("{DEFAULT}\npartitions = 3"),
                11,
                "applies to placement_group = \"partition\"",
            ),
            (
                format!("{DEFAULT}\nplacement_group = \"partition\"\npartitions = 8"),
                12,
                "partitions must be 1 to 7",
            ),
            (
                format!("{GOOD}\nplacement_group = \"spread\""),
                11,
                "set tenancy = \"default\"",
            ),
            (
                format!("{DEFAULT}\nservers = \"mirrored\"\nserver_tenancy = \"dedicated-host\""),
                12,
                "remove server_tenancy",
            ),
            (
                format!("{DEFAULT}\nsubnets = {{ \"us-east-1a\" = \"subnet-2\" }}"),
                8,
                "not the subnet `subnets` gives us-east-1a",
            ),
            (
                format!("{DEFAULT}\nsubnets = {{ \"us-east-1a\" = \"sn-2\" }}"),
                11,
                "is not a zone and its subnet",
            ),
        ];
        for (provider, line, msg) in cases {
            let (got_line, got) = error_line(&file(&provider, ""));
            assert!(got.contains(msg), "{msg:?} not in {got:?}");
            assert_eq!(got_line, line, "{got}");
        }
    }

    /// `subnets` gives each campaign zone its subnet: a zone without one is refused
    /// at the `zones` line, and a round in a zone launches into the zone's subnet.
    #[test]
    fn campaign_zones_take_their_subnets() {
        let provider = DEFAULT.replace(
            "subnet_id = \"subnet-1\"",
            "subnets = { \"us-east-1a\" = \"subnet-a\", \"us-east-1b\" = \"subnet-b\" }",
        );
        let campaign = |zones: &str| {
            format!(
                "{}[campaign]\nkind = \"spatial\"\nzones = [{zones}]\nrounds = 2\n",
                file(&provider, "")
            )
        };
        let exp = parse(
            "e.toml",
            &campaign("\"us-east-1a\", \"us-east-1b\""),
            Some(2),
        );
        let Ok(exp) = exp else { panic!("{exp:?}") };
        let Provider::Aws(spec) = &exp.provider else {
            panic!("{:?}", exp.provider)
        };
        assert_eq!(spec.subnet_id.as_deref(), Some("subnet-a"));
        let Provider::Aws(b) = exp.in_zone("us-east-1b").provider else {
            panic!("aws")
        };
        assert_eq!(
            (b.availability_zone.as_str(), b.subnet_id.as_deref()),
            ("us-east-1b", Some("subnet-b"))
        );
        let src = campaign("\"us-east-1a\", \"us-east-1c\"");
        let (line, msg) = error_line(&src);
        assert!(msg.contains("zone `us-east-1c` has no subnet"), "{msg}");
        assert_eq!(
            line,
            src.lines().position(|l| l.starts_with("zones")).unwrap() + 1
        );
    }

    #[test]
    fn locations_and_cidrs() {
        assert!(download_source("https://x/nnb").is_ok());
        assert!(download_source("s3://b/k").is_ok());
        assert!(download_source("ftp://x").is_err());
        assert_eq!(s3_location("s3://b/p/"), Ok("s3://b/p".to_string()));
        assert!(s3_location("b/p").is_err());
        assert!(cidr("10.0.0.0/16").is_ok());
        assert!(cidr("10.0.0.0/33").is_err());
        assert!(cidr("10.0.0.0").is_err());
    }
}
