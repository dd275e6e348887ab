//! Issue 26: the `[campaign]` table. Spatial campaigns take `rounds` per zone;
//! temporal ones an `interval` and `rounds` or a `duration` (150 h every 10 min is
//! 900 rounds); zones default to the aws zone or one local lane; every mistake is
//! reported at its line.

use std::time::Duration;

use nnb_experiment::campaign::{CampaignKind, LOCAL_LANE};
use nnb_experiment::{parse, Experiment};

/// A short local CPU staircase (one neighbor) with `campaign` as its `[campaign]`
/// table's lines; `provider` as its `[provider]` table's.
fn file(provider: &str, campaign: &str) -> String {
    format!(
        "name = \"c\"\nrepetitions = 1\nsettle = \"0s\"\n\
         [provider]\n{provider}\n\
         [[tenants]]\nname = \"test\"\nrole = \"test\"\n\
         [[tenants]]\nname = \"nb\"\nrole = \"neighbor\"\n\
         [scenario]\nkind = \"neighbor-staircase\"\n\
         [scenario.test]\nworkload = \"fpadd\"\nops = 1000\n\
         [campaign]\n{campaign}\n"
    )
}

const AWS: &str = "kind = \"aws\"\nregion = \"us-east-1\"\navailability_zone = \"us-east-1a\"\n\
host = \"m5\"\ninstance_type = \"m5.large\"\nimage_id = \"ami-0123456789abcdef0\"\n\
preinstalled = \"/usr/local/bin/nnb\"\nsecurity_group_ids = [\"sg-0123456789abcdef0\"]";

fn ok(src: &str) -> Experiment {
    parse("c.toml", src, Some(8)).unwrap_or_else(|e| panic!("{e}"))
}

/// (line, message) of the error `src` gets.
fn error(src: &str) -> (usize, String) {
    match parse("c.toml", src, Some(8)) {
        Ok(_) => panic!("accepted:\n{src}"),
        Err(e) => e
            .diagnostic()
            .map_or((0, e.to_string()), |d| (d.line, d.message.clone())),
    }
}

/// The line of `needle` in `src` (1-based).
fn line_of(src: &str, needle: &str) -> usize {
    src.lines()
        .position(|l| l.contains(needle))
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("{needle} not in the file"))
}

#[test]
fn a_file_without_a_campaign_is_one_run() {
    let src = file("kind = \"local\"", "").replace("[campaign]\n", "");
    assert_eq!(ok(&src).campaign, None);
}

#[test]
fn a_local_spatial_campaign_has_one_local_lane_by_default() {
    let c = ok(&file("kind = \"local\"", "kind = \"spatial\"\nrounds = 4"))
        .campaign
        .unwrap_or_else(|| panic!("no campaign"));
    assert_eq!(c.kind, CampaignKind::Spatial);
    assert_eq!(c.zones, [LOCAL_LANE]);
    assert_eq!((c.rounds, c.total_rounds(), c.interval), (4, 4, None));
}

#[test]
fn an_aws_campaign_defaults_to_the_providers_zone_and_spreads_over_the_named_ones() {
    let one = ok(&file(AWS, "kind = \"spatial\"\nrounds = 2")).campaign;
    assert_eq!(one.map(|c| c.zones), Some(vec!["us-east-1a".to_string()]));
    let three = ok(&file(
        AWS,
        "kind = \"spatial\"\nrounds = 17\nzones = [\"us-east-1a\", \"us-east-1b\", \"us-east-1c\"]",
    ))
    .campaign
    .unwrap_or_else(|| panic!("no campaign"));
    // 17 per zone in 3 zones: the thesis' 50 m5.large, give or take one.
    assert_eq!(three.total_rounds(), 51);
}

#[test]
fn a_temporal_duration_is_divided_into_rounds_of_the_interval() {
    // Wang & Ng: every 10 minutes for 150 hours = 150 * 6 = 900 rounds.
    let c = ok(&file(
        "kind = \"local\"",
        "kind = \"temporal\"\ninterval = \"10m\"\nduration = \"150h\"",
    ))
    .campaign
    .unwrap_or_else(|| panic!("no campaign"));
    assert_eq!(c.rounds, 900);
    assert_eq!(c.interval, Some(Duration::from_secs(600)));
    // 25 minutes every 10: two whole rounds.
    let c = ok(&file(
        "kind = \"local\"",
        "kind = \"temporal\"\ninterval = \"10m\"\nduration = \"25m\"",
    ))
    .campaign;
    assert_eq!(c.map(|c| c.rounds), Some(2));
}

#[test]
fn a_campaigns_mistakes_point_at_their_line() {
    let cases: [(&str, &str, &str, &str); 9] = [
        (
            "kind = \"local\"",
            "kind = \"spacial\"\nrounds = 2",
            "kind = \"spacial\"",
            "spatial or temporal",
        ),
        (
            "kind = \"local\"",
            "kind = \"temporal\"\nrounds = 2",
            "kind = \"temporal\"",
            "interval",
        ),
        (
            "kind = \"local\"",
            "kind = \"spatial\"\nrounds = 2\ninterval = \"1m\"",
            "interval =",
            "temporal",
        ),
        (
            "kind = \"local\"",
            "kind = \"spatial\"\nrounds = 0",
            "rounds = 0",
            "at least 1",
        ),
        (
            "kind = \"local\"",
            "kind = \"temporal\"\ninterval = \"10m\"\nrounds = 3\nduration = \"1h\"",
            "duration =",
            "not both",
        ),
        (
            "kind = \"local\"",
            "kind = \"temporal\"\ninterval = \"10m\"\nduration = \"5m\"",
            "duration =",
            "no round",
        ),
        (
            "kind = \"local\"",
            "kind = \"spatial\"\nrounds = 2\nzones = [\"a\", \"a\"]",
            "zones =",
            "twice",
        ),
        (
            AWS,
            "kind = \"spatial\"\nrounds = 2\nzones = [\"eu-west-1a\"]",
            "zones =",
            "not an availability zone of us-east-1",
        ),
        (
            "kind = \"local\"",
            "kind = \"spatial\"\nrounds = 200000",
            "rounds = 200000",
            "limit",
        ),
    ];
    for (provider, campaign, at, says) in cases {
        let src = file(provider, campaign);
        let (line, msg) = error(&src);
        assert_eq!(line, line_of(&src, at), "{campaign}: {msg}");
        assert!(msg.contains(says), "{campaign}: {msg}");
    }
}

#[test]
fn a_temporal_round_must_fit_its_interval() {
    // One level of the staircase waits 30 s to settle: longer than a 10 s interval.
    let src = file(
        "kind = \"local\"",
        "kind = \"temporal\"\ninterval = \"10s\"\nrounds = 3",
    )
    .replace("settle = \"0s\"", "settle = \"30s\"");
    let (line, msg) = error(&src);
    assert_eq!(line, line_of(&src, "interval = \"10s\""));
    assert!(msg.contains("longer than the interval"), "{msg}");
}

#[test]
fn a_static_fleet_cannot_be_a_campaign() {
    // Its neighbors stay (idle) between levels: the static provider runs them.
    let src = file(
        "kind = \"static\"\nhosts = \"hosts.toml\"\ntoken_file = \"token\"",
        "kind = \"spatial\"\nrounds = 2",
    )
    .replace(
        "kind = \"neighbor-staircase\"\n",
        "kind = \"neighbor-staircase\"\nunused_neighbors = \"idle\"\n",
    );
    let (line, msg) = error(&src);
    assert_eq!(line, line_of(&src, "kind = \"spatial\""));
    assert!(msg.contains("static"), "{msg}");
}

#[test]
fn a_round_in_another_zone_moves_its_aws_instances_there_and_leaves_local_ones_alone() {
    let aws = ok(&file(AWS, "kind = \"spatial\"\nrounds = 1"));
    let moved = aws.in_zone("us-east-1c");
    match (&aws.provider, &moved.provider) {
        (nnb_experiment::Provider::Aws(a), nnb_experiment::Provider::Aws(b)) => {
            assert_eq!(a.availability_zone, "us-east-1a");
            assert_eq!(b.availability_zone, "us-east-1c");
        }
        other => panic!("not aws: {other:?}"),
    }
    let local = ok(&file("kind = \"local\"", "kind = \"spatial\"\nrounds = 1"));
    assert_eq!(local.in_zone("x").provider, local.provider);
}
