//! The static provider: agents a user already runs, named in a hosts file.
//!
//! Hosts file format: one agent per line, `NAME ROLE ADDR`, separated by
//! whitespace; `#` starts a comment; blank lines are ignored. ROLE is `test`,
//! `neighbor` or `endpoint` (at most one test and one endpoint). ADDR is the
//! agent's `ip:port`. Example:
//!
//! ```text
//! # name   role      address
//! vm-test  test      10.0.1.10:7700
//! vm-n1    neighbor  10.0.1.11:7700
//! sink     endpoint  10.0.2.5:7700
//! ```
//!
//! The token file's first line is the bearer token all these agents accept.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use super::{
    Fleet, HostCpus, Placement, Provider, ProviderError, Role, Serving, Tenant, TenantSpec,
};
use crate::client::BoxFuture;
use nnb_agent::Token;
use nnb_format::ProviderKind;

/// The static provider: the hosts file's agents, which must be the experiment's
/// tenants with the same roles. They are not nnb's to start or stop.
#[derive(Debug, Clone)]
pub struct StaticProvider {
    hosts: PathBuf,
    token_file: PathBuf,
}

impl StaticProvider {
    /// A provider of the agents in `hosts`, reached with the token in `token_file`.
    pub fn new(hosts: &Path, token_file: &Path) -> StaticProvider {
        StaticProvider {
            hosts: hosts.to_path_buf(),
            token_file: token_file.to_path_buf(),
        }
    }
}

impl Provider for StaticProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Static
    }

    /// The agents are placed already, each on its host.
    fn placement(
        &self,
        specs: &[TenantSpec],
        _host: &HostCpus<'_>,
    ) -> Result<Placement, ProviderError> {
        Ok(Placement::elsewhere(specs.len(), "(static host)"))
    }

    /// Reads the hosts file and checks that every tenant is in it with its role
    /// (whether an endpoint is needed is checked by the controller). Mirrored servers
    /// are agents nnb would start: refused (the checker refuses them first).
    fn launch<'a>(
        &'a mut self,
        specs: &'a [TenantSpec],
        serving: &'a Serving,
    ) -> BoxFuture<'a, Result<Fleet, ProviderError>> {
        Box::pin(async move {
            if let Serving::Mirrored(_) = serving {
                return Err(ProviderError::Unsupported(
                    "a static fleet has one endpoint: mirrored servers need the local or aws \
                     provider"
                        .to_string(),
                ));
            }
            let fleet = load_static(&self.hosts, &self.token_file)?;
            let hosts = self.hosts.display();
            for t in specs {
                match fleet.tenants.iter().find(|f| f.name == t.name) {
                    Some(f) if f.role == t.role => {}
                    Some(_) => {
                        return Err(ProviderError::Invalid(format!(
                            "tenant {} has another role in {hosts}",
                            t.name
                        )))
                    }
                    None => {
                        return Err(ProviderError::Invalid(format!(
                            "tenant {} is not in {hosts}",
                            t.name
                        )))
                    }
                }
            }
            Ok(fleet)
        })
    }
}

/// Reads a hosts file and a token file into a fleet. Nothing is started or checked
/// over the network here; ask each tenant's `/health` to verify.
pub fn load_static(hosts_file: &Path, token_file: &Path) -> Result<Fleet, ProviderError> {
    let token = Token::from_file(token_file)
        .map_err(|e| ProviderError::Invalid(e.to_string()))?
        .secret()
        .to_string();
    let text = std::fs::read_to_string(hosts_file).map_err(ProviderError::io(format!(
        "reading hosts file {}",
        hosts_file.display()
    )))?;
    let file = hosts_file.display().to_string();
    let bad = |line: usize, message: String| ProviderError::HostsFile {
        file: file.clone(),
        line,
        message,
    };
    let mut fleet = Fleet::of(Vec::new(), None);
    for (k, raw) in text.lines().enumerate() {
        let line = k + 1;
        let content = raw.split('#').next().unwrap_or("").trim();
        if content.is_empty() {
            continue;
        }
        let fields: Vec<&str> = content.split_whitespace().collect();
        let [name, role, addr] = fields[..] else {
            return Err(bad(
                line,
                format!(
                    "expected `NAME ROLE ADDR`, found {} field(s): {content:?}",
                    fields.len()
                ),
            ));
        };
        let addr: SocketAddr = addr.parse().map_err(|_| {
            bad(
                line,
                format!("{addr:?} is not an address like 10.0.0.5:7700"),
            )
        })?;
        let taken = fleet
            .tenants
            .iter()
            .chain(fleet.endpoint.as_ref())
            .any(|t| t.name == name);
        if taken {
            return Err(bad(line, format!("host name {name:?} appears twice")));
        }
        let role = Role::from_name(role).ok_or_else(|| {
            let roles: Vec<&str> = Role::ALL.iter().map(|r| r.name()).collect();
            bad(
                line,
                format!("unknown role {role:?}: expected {}", roles.join(", ")),
            )
        })?;
        let tenant = Tenant {
            name: name.to_string(),
            role,
            addr,
            token: token.clone(),
            cpus: Vec::new(),
            netns: None,
            ip: Some(addr.ip()),
            runtime: None,
        };
        match role {
            Role::Test | Role::Neighbor => {
                if role == Role::Test && fleet.test().is_some() {
                    return Err(bad(line, "a second test host: there is exactly one".into()));
                }
                fleet.tenants.push(tenant);
            }
            Role::Endpoint => {
                if fleet.endpoint.is_some() {
                    return Err(bad(
                        line,
                        "a second endpoint host: there is at most one".into(),
                    ));
                }
                fleet.endpoint = Some(tenant);
            }
        }
    }
    if fleet.tenants.is_empty() {
        return Err(ProviderError::Invalid(format!(
            "hosts file {file} names no test or neighbor host"
        )));
    }
    Ok(fleet)
}
