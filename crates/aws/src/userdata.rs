//! The cloud-init user data that installs nnb on a tenant and starts `nnb agent`.
//!
//! The template is `infra/cloud-init.yaml`, written for Terraform's `templatefile()` (`${name}`
//! placeholders, `$${` for a literal `${`) so that infra/terraform and nnb launch tenants the
//! same way. Values are checked instead of escaped: each lands in a shell single-quoted
//! string, a YAML block scalar or a systemd unit line, and the allowed characters are safe in
//! all three.

/// The template, compiled in.
const TEMPLATE: &str = include_str!("../../../infra/cloud-init.yaml");

/// Where a tenant gets its nnb binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Install {
    /// Download over HTTP(S) with curl; one URL per CPU architecture.
    Url {
        /// Binary for x86_64 tenants.
        x86_64: String,
        /// Binary for arm64 (Graviton) tenants.
        aarch64: String,
    },
    /// Copy with `aws s3 cp` (the tenant needs the AWS CLI and an instance profile); one
    /// `s3://bucket/key` per CPU architecture.
    S3 {
        /// Binary for x86_64 tenants.
        x86_64: String,
        /// Binary for arm64 (Graviton) tenants.
        aarch64: String,
    },
    /// The image already has nnb at this absolute path.
    Preinstalled {
        /// Path of the binary on the image.
        path: String,
    },
}

/// Everything the template needs for one tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserDataParams {
    /// How nnb gets onto the tenant.
    pub install: Install,
    /// TCP port `nnb agent` listens on (all interfaces; the security group limits who connects).
    pub agent_port: u16,
    /// The run's bearer token, written to /etc/nnb/token with mode 0600.
    pub token: String,
    /// Tenant label (systemd unit description).
    pub tenant: String,
    /// Run id label (systemd unit description).
    pub run_id: String,
}

/// Why user data could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UserDataError {
    /// A value contains characters that are unsafe where the template puts it.
    #[error("user data: {field} {value:?} is not allowed: {why}")]
    Value {
        /// Which parameter.
        field: &'static str,
        /// The offending value.
        value: String,
        /// What is allowed.
        why: &'static str,
    },
    /// The template names a placeholder nnb does not fill, or is malformed.
    #[error("user data template: {0}")]
    Template(String),
}

/// The user data for `p`: the template with every placeholder filled.
pub fn render(p: &UserDataParams) -> Result<String, UserDataError> {
    let (method, x86_64, aarch64) = match &p.install {
        Install::Url { x86_64, aarch64 } => {
            for v in [x86_64, aarch64] {
                source("install url", v, &["https://", "http://"])?;
            }
            ("url", x86_64, aarch64)
        }
        Install::S3 { x86_64, aarch64 } => {
            for v in [x86_64, aarch64] {
                source("install s3 object", v, &["s3://"])?;
            }
            ("s3", x86_64, aarch64)
        }
        Install::Preinstalled { path } => {
            source("preinstalled path", path, &["/"])?;
            ("preinstalled", path, path)
        }
    };
    if p.agent_port == 0 {
        return Err(UserDataError::Value {
            field: "agent port",
            value: "0".into(),
            why: "the agent needs a fixed port",
        });
    }
    let token_ok = !p.token.is_empty() && p.token.bytes().all(|b| b.is_ascii_graphic());
    if !token_ok {
        return Err(UserDataError::Value {
            field: "token",
            value: "(hidden)".into(),
            why: "non-empty printable ASCII without spaces",
        });
    }
    label("tenant", &p.tenant)?;
    label("run id", &p.run_id)?;
    let port = p.agent_port.to_string();
    fill(TEMPLATE, |name| match name {
        "install_method" => Some(method),
        "nnb_x86_64" => Some(x86_64),
        "nnb_aarch64" => Some(aarch64),
        "agent_port" => Some(&port),
        "token" => Some(&p.token),
        "tenant" => Some(&p.tenant),
        "run_id" => Some(&p.run_id),
        _ => None,
    })
}

/// An install source: one of `prefixes`, then no quote, space or control character (it sits
/// in a single-quoted shell string).
fn source(field: &'static str, value: &str, prefixes: &[&str]) -> Result<(), UserDataError> {
    let ok = prefixes
        .iter()
        .any(|p| value.len() > p.len() && value.starts_with(p))
        && value.bytes().all(|b| b.is_ascii_graphic() && b != b'\'');
    if ok {
        Ok(())
    } else {
        Err(UserDataError::Value {
            field,
            value: value.into(),
            why: "must start with the expected scheme or '/', and hold no quote, space or control character",
        })
    }
}

/// A label: letters, digits, '.', '_' and '-' (safe in a systemd unit, where '%' is special).
fn label(field: &'static str, value: &str) -> Result<(), UserDataError> {
    let ok = !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(UserDataError::Value {
            field,
            value: value.into(),
            why: "letters, digits, '.', '_' and '-' only",
        })
    }
}

/// Terraform-`templatefile` substitution: `${name}` becomes `lookup(name)`, `$${` a literal
/// `${`. An unknown name or an unclosed placeholder is an error, so no placeholder survives.
fn fill<'a>(
    template: &str,
    lookup: impl Fn(&str) -> Option<&'a str>,
) -> Result<String, UserDataError> {
    let mut out = String::with_capacity(template.len() + 256);
    let mut rest = template;
    while let Some(at) = rest.find("${") {
        if rest[..at].ends_with('$') {
            out.push_str(&rest[..at - 1]);
            out.push_str("${");
            rest = &rest[at + 2..];
            continue;
        }
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let end = after.find('}').ok_or_else(|| {
            UserDataError::Template(format!("unclosed placeholder at {after:.20?}"))
        })?;
        let name = after[..end].trim();
        let value = lookup(name)
            .ok_or_else(|| UserDataError::Template(format!("unknown placeholder {name:?}")))?;
        out.push_str(value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(install: Install) -> UserDataParams {
        UserDataParams {
            install,
            agent_port: 7070,
            token: "0123abcdef".into(),
            tenant: "neighbor-3".into(),
            run_id: "run-20261122".into(),
        }
    }

    #[test]
    fn render_fills_every_placeholder() {
        let url = Install::Url {
            x86_64: "https://example.com/nnb-x86_64".into(),
            aarch64: "https://example.com/nnb-aarch64".into(),
        };
        let text = render(&params(url)).unwrap();
        assert!(!text.contains("${"), "unreplaced placeholder:\n{text}");
        assert!(text.starts_with("#cloud-config\n"));
        assert!(text.contains("METHOD='url'"));
        assert!(text.contains("x86_64|amd64) SOURCE='https://example.com/nnb-x86_64'"));
        assert!(text.contains("aarch64|arm64) SOURCE='https://example.com/nnb-aarch64'"));
        assert!(text.contains("      0123abcdef\n"));
        assert!(text.contains("permissions: '0600'"));
        assert!(text.contains(
            "ExecStart=/usr/local/bin/nnb agent --listen 0.0.0.0:7070 --token-file /etc/nnb/token"
        ));
        assert!(text.contains("Description=nnb agent (run run-20261122, tenant neighbor-3)"));
    }

    #[test]
    fn s3_and_preinstalled_pick_their_method() {
        let s3 = Install::S3 {
            x86_64: "s3://b/nnb-x86_64".into(),
            aarch64: "s3://b/nnb-aarch64".into(),
        };
        let text = render(&params(s3)).unwrap();
        assert!(text.contains("METHOD='s3'") && text.contains("SOURCE='s3://b/nnb-aarch64'"));
        let pre = Install::Preinstalled {
            path: "/opt/nnb/bin/nnb".into(),
        };
        let text = render(&params(pre)).unwrap();
        assert!(text.contains("METHOD='preinstalled'"));
        assert_eq!(text.matches("SOURCE='/opt/nnb/bin/nnb'").count(), 2);
    }

    #[test]
    fn unsafe_values_are_refused() {
        let url = |u: &str| Install::Url {
            x86_64: u.into(),
            aarch64: "https://ok/nnb".into(),
        };
        for bad in [
            "https://x/'; rm -rf /",
            "https://a b",
            "ftp://x/nnb",
            "https://",
        ] {
            assert!(render(&params(url(bad))).is_err(), "{bad}");
        }
        let s3_with_url = Install::S3 {
            x86_64: "https://x/nnb".into(),
            aarch64: "s3://b/k".into(),
        };
        assert!(render(&params(s3_with_url)).is_err());
        let ok = url("https://ok/nnb");
        let mut p = params(ok);
        p.token = "two words".into();
        assert!(render(&p).is_err());
        p.token = "t".into();
        p.tenant = "a%n".into();
        assert!(render(&p).is_err());
        p.tenant = "a".into();
        p.agent_port = 0;
        assert!(render(&p).is_err());
    }

    #[test]
    fn fill_handles_escapes_and_rejects_unknown_or_unclosed_placeholders() {
        let look = |n: &str| (n == "a").then_some("1");
        assert_eq!(fill("x${a}y$${a}z${ a }", look).unwrap(), "x1y${a}z1");
        assert!(matches!(
            fill("${b}", look),
            Err(UserDataError::Template(_))
        ));
        assert!(matches!(fill("${a", look), Err(UserDataError::Template(_))));
    }
}
