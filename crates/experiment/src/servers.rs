//! `[provider] servers`: one endpoint for every tenant, or a server per client
//! (the thesis' mirrored servers), checked against the provider and the scenario.

use super::file::{ProviderFile, ServersFile};
use super::{Checker, ExperimentError, Provider, Scenario, Servers};

impl Checker<'_> {
    /// The file's `servers` (`shared` when absent). Mirrored servers need agents nnb
    /// starts (not the static provider's) and a scenario whose tenants send or probe
    /// a target of their own (not a pair suite, which measures the endpoint itself).
    pub(super) fn servers(
        &self,
        p: Option<&ProviderFile>,
        provider: &Provider,
        scenario: &Scenario,
    ) -> Result<Servers, ExperimentError> {
        let Some(v) = p.and_then(|p| p.servers.as_ref()) else {
            return Ok(Servers::Shared);
        };
        match (v.get_ref(), provider, scenario) {
            (ServersFile::Shared, _, _) => Ok(Servers::Shared),
            (ServersFile::Mirrored, Provider::Static { .. }, _) => Err(self.error(
                v.span(),
                "mirrored servers are agents nnb starts, one per client: use the local or aws \
                 provider (a static fleet has one `endpoint` line)",
            )),
            (ServersFile::Mirrored, _, Scenario::PairSuite(_)) => Err(self.error(
                v.span(),
                "a pair suite measures the test tenant and the endpoint, its pair: it has no \
                 clients to give servers of their own; remove `servers`",
            )),
            (ServersFile::Mirrored, _, _) => Ok(Servers::Mirrored),
        }
    }

    /// `[provider] sink_threads`: the sink sockets of every server, checked as
    /// `nnb serve --sink-threads` checks them.
    pub(super) fn sink_threads(
        &self,
        p: Option<&ProviderFile>,
    ) -> Result<Option<usize>, ExperimentError> {
        p.and_then(|p| p.sink_threads.as_ref())
            .map(|n| {
                let v = *n.get_ref();
                self.at(n, nnb_netlat::serve::check_sink_threads(v).map(|()| v))
            })
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::super::plan::{self, Serving};
    use super::super::{parse, Experiment, ServerTenancy};

    /// Load steps (a probing test tenant and two loading neighbors) with
    /// `provider` as the `[provider]` table's lines.
    fn load_steps(provider: &str) -> String {
        format!(
            "name = \"x\"\n[provider]\n{provider}\n\
             [[tenants]]\nname = \"test\"\nrole = \"test\"\n\
             [[tenants]]\nname = \"nb\"\ncount = 2\nrole = \"neighbor\"\n\
             [scenario]\nkind = \"load-steps\"\nlevels = \"0:100M:100M\"\n"
        )
    }

    fn experiment(src: &str) -> Experiment {
        parse("e.toml", src, Some(8)).unwrap_or_else(|e| panic!("{e}"))
    }

    fn error(src: &str) -> (usize, String) {
        match parse("e.toml", src, Some(8)) {
            Ok(_) => (0, "accepted".to_string()),
            Err(e) => e
                .diagnostic()
                .map_or((0, e.to_string()), |d| (d.line, d.message.clone())),
        }
    }

    /// Every client is paired with a server of its own, by hand: the test tenant
    /// (it probes from level 0) first, then the neighbors (they load from 100M);
    /// no two share one, and shared servers send all of them to the endpoint.
    #[test]
    fn mirrored_servers_pair_every_client_with_its_own() {
        let exp = experiment(&load_steps("kind = \"local\"\nservers = \"mirrored\""));
        let p = plan::expand(&exp, 8);
        let serving = p.serving(exp.servers);
        assert_eq!(
            serving,
            Serving::Mirrored(vec!["test".into(), "nb-1".into(), "nb-2".into()])
        );
        let servers: Vec<Option<String>> = ["test", "nb-1", "nb-2", "nobody"]
            .iter()
            .map(|t| serving.server_of(t))
            .collect();
        assert_eq!(
            servers,
            [
                Some("endpoint@test".to_string()),
                Some("endpoint@nb-1".to_string()),
                Some("endpoint@nb-2".to_string()),
                None
            ]
        );
        let shared = experiment(&load_steps("kind = \"local\""));
        let serving = plan::expand(&shared, 8).serving(shared.servers);
        assert_eq!(serving, Serving::Shared);
        assert_eq!(serving.server_of("nb-2").as_deref(), Some("endpoint"));
    }

    const AWS: &str = "kind = \"aws\"\navailability_zone = \"us-east-1a\"\nhost = \"m5\"\n\
        instance_type = \"m5.large\"\nimage_id = \"ami-1\"\nsubnet_id = \"subnet-1\"\n\
        allowed_cidrs = [\"10.0.0.0/16\"]\npreinstalled = \"/usr/local/bin/nnb\"";

    #[test]
    fn the_servers_type_and_tenancy_on_aws() {
        let exp = experiment(&load_steps(&format!("{AWS}\nservers = \"mirrored\"")));
        let super::super::Provider::Aws(spec) = &exp.provider else {
            panic!("{:?}", exp.provider)
        };
        assert_eq!(
            (spec.server_tenancy, spec.server_type()),
            (ServerTenancy::DedicatedHost, "m5.large")
        );
        let bigger = experiment(&load_steps(&format!(
            "{AWS}\nservers = \"mirrored\"\nserver_instance_type = \"m5.4xlarge\""
        )));
        let super::super::Provider::Aws(spec) = &bigger.provider else {
            panic!()
        };
        assert_eq!(spec.server_type(), "m5.4xlarge");
        let off_host = experiment(&load_steps(&format!(
            "{AWS}\nservers = \"mirrored\"\nserver_tenancy = \"default\"\n\
             server_instance_type = \"c5n.9xlarge\""
        )));
        let super::super::Provider::Aws(spec) = &off_host.provider else {
            panic!()
        };
        assert_eq!(
            (spec.server_tenancy, spec.server_type()),
            (ServerTenancy::Default, "c5n.9xlarge")
        );
    }

    /// Mistakes point at their line: the server keys without mirrored servers, a
    /// server type off the second host's family, mirrored servers on a static fleet
    /// and in a pair suite.
    #[test]
    fn mirrored_server_mistakes_point_at_their_line() {
        let cases = [
            (
                load_steps(&format!("{AWS}\nserver_tenancy = \"default\"")),
                11,
                "applies to servers = \"mirrored\"",
            ),
            (
                load_steps(&format!(
                    "{AWS}\nservers = \"mirrored\"\nserver_instance_type = \"c5n.9xlarge\""
                )),
                12,
                "not one of its sizes",
            ),
            (
                load_steps(
                    "kind = \"static\"\nhosts = \"h\"\ntoken_file = \"t\"\nservers = \"mirrored\"",
                ) + "unused_neighbors = \"idle\"\n",
                6,
                "use the local or aws provider",
            ),
            (
                "name = \"x\"\n[provider]\nkind = \"local\"\nservers = \"mirrored\"\n\
                 [[tenants]]\nrole = \"test\"\n[scenario]\nkind = \"pair-suite\"\n"
                    .to_string(),
                4,
                "a pair suite measures",
            ),
        ];
        for (src, line, msg) in cases {
            let (got_line, got) = error(&src);
            assert!(got.contains(msg), "{msg:?} not in {got:?}");
            assert_eq!(got_line, line, "{got}");
        }
    }

    /// `sink_threads` reaches the experiment (unset: the serve job's default); a
    /// count `nnb serve --sink-threads` would refuse is refused at its line.
    #[test]
    fn sink_threads_are_read_and_checked_at_their_line() {
        let two = experiment(&load_steps("kind = \"local\"\nsink_threads = 2"));
        assert_eq!(two.sink_threads, Some(2));
        assert_eq!(
            experiment(&load_steps("kind = \"local\"")).sink_threads,
            None
        );
        for bad in [0, 257] {
            let (line, msg) = error(&load_steps(&format!(
                "kind = \"local\"\nsink_threads = {bad}"
            )));
            assert_eq!(line, 4, "{msg}");
            assert!(msg.contains("sink threads must be 1 to 256"), "{msg}");
        }
    }
}
