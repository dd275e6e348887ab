//! The `[campaign]` table, checked into a [`Campaign`]: the experiment repeated over
//! rounds, each round a run of its own on fresh instances (spatial) or on instances a
//! lane keeps (temporal), one lane per availability zone.
//!
//! Wang & Ng (seed 003, §III.C) measured 750 small and 150 medium pairs once each
//! (spatial) and 9 pairs every 10 minutes for 150 hours (temporal); the thesis (§5.2.1)
//! ran 50 m5.large with default tenancy across zones.

use std::time::Duration;

use serde::Serialize;

pub use nnb_format::campaign::CampaignKind;

use super::file::{CampaignFile, Spanned};
use super::{plan, values, Checker, Experiment, ExperimentError, Provider};

/// Most lanes (zones) a campaign may have.
pub const MAX_LANES: usize = 64;
/// Most rounds per lane.
pub const MAX_ROUNDS_PER_LANE: u32 = 100_000;
/// The lane of a local campaign that names none.
pub const LOCAL_LANE: &str = "local";

/// A checked campaign.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Campaign {
    /// Spatial or temporal.
    pub kind: CampaignKind,
    /// The lanes, in file order: availability zones on aws, labels locally.
    pub zones: Vec<String>,
    /// Rounds per lane.
    pub rounds: u32,
    /// Temporal: from one round's start to the next.
    #[serde(
        serialize_with = "values::serialize_opt_ms",
        rename = "interval_ms",
        skip_serializing_if = "Option::is_none"
    )]
    pub interval: Option<Duration>,
}

impl Campaign {
    /// Rounds in all: rounds per lane times lanes.
    pub fn total_rounds(&self) -> usize {
        self.rounds as usize * self.zones.len()
    }
}

impl Checker<'_> {
    /// Checks `[campaign]` of an experiment `exp` (everything else checked).
    pub(crate) fn campaign(
        &self,
        f: &CampaignFile,
        exp: &Experiment,
    ) -> Result<Campaign, ExperimentError> {
        let kind = self.at(
            &f.kind,
            CampaignKind::from_name(f.kind.get_ref()).ok_or_else(|| {
                format!(
                    "unknown campaign kind `{}`: expected spatial or temporal",
                    f.kind.get_ref()
                )
            }),
        )?;
        let zones = self.zones(f.zones.as_ref(), &exp.provider, &f.kind)?;
        let interval = match (kind, &f.interval) {
            (CampaignKind::Temporal, None) => return Err(self.error(
                f.kind.span(),
                "a temporal campaign needs an `interval` between its rounds' starts, e.g. \"10m\"",
            )),
            (CampaignKind::Spatial, Some(v)) => {
                return Err(self.error(
                    v.span(),
                    "`interval` is for temporal campaigns: a spatial round starts when the \
                     zone's previous round has released its instances",
                ))
            }
            (CampaignKind::Temporal, Some(v)) => {
                let d = self.at(v, values::duration(v.get_ref()))?;
                if d < Duration::from_secs(1) {
                    return Err(self.error(v.span(), "`interval` must be at least 1s"));
                }
                Some((d, v))
            }
            (CampaignKind::Spatial, None) => None,
        };
        let rounds = match (&f.rounds, &f.duration, interval) {
            (Some(_), Some(d), _) => {
                return Err(self.error(d.span(), "give `rounds` or `duration`, not both"))
            }
            (Some(r), None, _) => self.positive(r, "rounds")?,
            (None, Some(d), Some((every, _))) => {
                let total = self.at(d, values::duration(d.get_ref()))?;
                let n = total.as_nanos() / every.as_nanos().max(1);
                if n == 0 {
                    return Err(self.error(
                        d.span(),
                        format!("a duration of {total:?} holds no round of {every:?}"),
                    ));
                }
                u32::try_from(n).unwrap_or(u32::MAX)
            }
            (None, Some(d), None) => {
                return Err(self.error(
                    d.span(),
                    "`duration` is for temporal campaigns: give a spatial campaign `rounds`",
                ))
            }
            (None, None, _) => return Err(self.error(f.kind.span(), "the campaign needs `rounds`")),
        };
        if rounds > MAX_ROUNDS_PER_LANE {
            let at = f
                .rounds
                .as_ref()
                .map(Spanned::span)
                .or_else(|| f.duration.as_ref().map(Spanned::span))
                .unwrap_or(f.kind.span());
            return Err(self.error(
                at,
                format!("{rounds} rounds per zone is above the limit of {MAX_ROUNDS_PER_LANE}"),
            ));
        }
        if let Some((every, at)) = interval {
            let (round, _) =
                plan::expand(exp, exp.provider.host_vcpus().unwrap_or(1)).estimate(exp.settle);
            if round > every {
                return Err(self.error(
                    at.span(),
                    format!(
                        "one round takes about {}, longer than the interval of {}: rounds \
                         of a lane never overlap",
                        nnb_units::format_duration(round),
                        nnb_units::format_duration(every)
                    ),
                ));
            }
        }
        Ok(Campaign {
            kind,
            zones,
            rounds,
            interval: interval.map(|(d, _)| d),
        })
    }

    /// The campaign's lanes: the file's `zones`, else the provider's zone (aws) or
    /// one local lane; each zone at most once, of the provider's region.
    fn zones(
        &self,
        written: Option<&Spanned<Vec<String>>>,
        provider: &Provider,
        kind_at: &Spanned<String>,
    ) -> Result<Vec<String>, ExperimentError> {
        let zones = match (written, provider) {
            (_, Provider::Static { .. }) => {
                return Err(self.error(
                    kind_at.span(),
                    "a campaign starts fresh tenants each round or keeps them for its \
                     duration: the static provider's agents are yours, not nnb's to start \
                     (use the local or aws provider)",
                ))
            }
            (Some(z), _) => z,
            (None, Provider::Aws(a)) => return Ok(vec![a.availability_zone.clone()]),
            (None, Provider::Local) => return Ok(vec![LOCAL_LANE.to_string()]),
        };
        let list: Vec<String> = zones
            .get_ref()
            .iter()
            .map(|z| z.trim().to_string())
            .collect();
        if list.is_empty() {
            return Err(self.error(zones.span(), "`zones` names no zone"));
        }
        if list.len() > MAX_LANES {
            return Err(self.error(
                zones.span(),
                format!("{} zones is above the limit of {MAX_LANES}", list.len()),
            ));
        }
        for (i, z) in list.iter().enumerate() {
            if z.is_empty()
                || !z
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err(self.error(
                    zones.span(),
                    format!("zone `{z}`: use letters, digits, `-` and `_` only"),
                ));
            }
            if list[..i].contains(z) {
                return Err(self.error(zones.span(), format!("zone `{z}` is named twice")));
            }
            if let Provider::Aws(a) = provider {
                if !a.subnets.is_empty() && !a.subnets.contains_key(z) {
                    return Err(self.error(
                        zones.span(),
                        format!("zone `{z}` has no subnet in [provider] subnets: add \"{z}\" = \"subnet-...\""),
                    ));
                }
                if let Some(region) = &a.region {
                    if !z.starts_with(region.as_str()) || z.len() == region.len() {
                        return Err(self.error(
                            zones.span(),
                            format!("zone `{z}` is not an availability zone of {region}"),
                        ));
                    }
                }
            }
        }
        Ok(list)
    }
}

impl Experiment {
    /// This experiment as one round of its campaign runs it in lane `zone`: on aws,
    /// its instances in that availability zone (in the zone's subnet of [provider]
    /// `subnets`, else the default VPC's subnet of the zone unless the file's subnet
    /// is in it); locally, unchanged (a lane is a label).
    pub fn in_zone(&self, zone: &str) -> Experiment {
        let mut exp = self.clone();
        if let Provider::Aws(a) = &mut exp.provider {
            if a.availability_zone != zone {
                a.availability_zone = zone.to_string();
                a.subnet_id = a.subnets.get(zone).cloned();
            }
        }
        exp
    }
}
