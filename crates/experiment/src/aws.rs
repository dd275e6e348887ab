//! The `[provider] kind = "aws"` table, checked into an [`AwsSpec`].
//!
//! Instance types and host families are checked against the built-in catalog
//! (`nnb-catalog`), so a typo or a size that cannot share the host is reported at
//! its line before anything is created in the cloud. Whether the plan's tenants fit
//! the host is checked later, by the provider, against the catalog and the host's
//! own `AvailableCapacity`.

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

/// Where mirrored servers (`servers = "mirrored"`) run on aws.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServerTenancy {
    /// On a second dedicated host of the clients' family (the thesis' setup).
    #[default]
    DedicatedHost,
    /// Default tenancy instances, off any dedicated host.
    Default,
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

/// A checked AWS provider: one dedicated host and the tenants' instances on it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AwsSpec {
    /// Region; `None` = the standard AWS chain's.
    pub region: Option<String>,
    /// Availability zone of the host.
    pub availability_zone: String,
    /// The host to allocate.
    pub host: AwsHost,
    /// The host's instance family (catalog name), e.g. `m5`.
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
    /// there).
    pub fn tenant_vcpus(&self) -> usize {
        Catalog::builtin()
            .size(&self.instance_type)
            .map_or(1, |(_, s)| s.vcpus as usize)
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

    /// vCPUs of the whole dedicated host, from the catalog.
    pub fn host_vcpus(&self) -> usize {
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
        let host_v = need(
            &p.host,
            "an aws provider needs `host`: a host family (\"m5\") or instance type (\"m5.large\")",
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
        let (server_tenancy, server_instance_type) = self.aws_servers(p, &host, family)?;
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
        let subnet_id = optional(&p.subnet_id, "subnet_id")?;
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
        let install = self.install(p, family.arch)?;
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
            host,
            family: family.name.clone(),
            instance_type,
            endpoint_instance_type,
            server_tenancy,
            server_instance_type,
            image_id,
            subnet_id,
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
    fn aws_servers(
        &self,
        p: &ProviderFile,
        host: &AwsHost,
        family: &nnb_catalog::Family,
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
        let tenancy = match p.server_tenancy.as_ref().map(|t| *t.get_ref()) {
            None | Some(ServerTenancyFile::DedicatedHost) => ServerTenancy::DedicatedHost,
            Some(ServerTenancyFile::Default) => ServerTenancy::Default,
        };
        let Some(v) = &p.server_instance_type else {
            return Ok((tenancy, None));
        };
        let t = self.at(v, instance_type_name(v.get_ref()))?;
        if tenancy == ServerTenancy::DedicatedHost {
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
        assert_eq!(spec.host, AwsHost::Family("m5".into()));
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
