//! Checks the built-in catalog's data and the loader's error reporting.

use nnb_catalog::{Arch, Catalog, CatalogError};

/// The families the issue asks for, all present in the built-in catalog.
const FAMILIES: &[&str] = &["m5", "m6i", "m6a", "m6g", "c7g", "m7i", "m7g"];

#[test]
fn builtin_parses_and_has_every_family() {
    let catalog = Catalog::builtin();
    for name in FAMILIES {
        assert!(catalog.family(name).is_some(), "family {name} missing");
    }
    assert_eq!(catalog.families.len(), FAMILIES.len());
}

#[test]
fn builtin_invariants_hold_per_family() {
    for family in &Catalog::builtin().families {
        let name = &family.name;
        assert_eq!(
            family.physical_cores * family.threads_per_core,
            family.host_vcpus,
            "{name}: vCPUs = cores x threads"
        );
        let smt = matches!(family.arch, Arch::X86_64);
        assert_eq!(
            family.threads_per_core,
            if smt { 2 } else { 1 },
            "{name}: SMT"
        );
        assert!(family.host_price_usd_per_hour > 0.0, "{name}: price");
        assert!(family.host_bandwidth_bps > 0.0, "{name}: bandwidth");
        assert!(!family.sources.is_empty(), "{name}: sources");
        assert!(!family.price_as_of.is_empty() && !family.price_region.is_empty());
        for size in &family.sizes {
            assert!(
                size.name.starts_with(&format!("{name}.")),
                "{} not in {name}",
                size.name
            );
            assert!(
                size.vcpus * size.instances_per_host <= family.host_vcpus,
                "{}: {} x {} vCPUs exceed the host's {}",
                size.name,
                size.instances_per_host,
                size.vcpus,
                family.host_vcpus
            );
            assert!(size.baseline_bandwidth_bps <= family.host_bandwidth_bps);
            if let Some(burst) = size.burst_bandwidth_bps {
                assert!(burst >= size.baseline_bandwidth_bps, "{}: burst", size.name);
            }
        }
        let largest = family.sizes.iter().map(|s| s.vcpus).max();
        assert_eq!(
            largest,
            Some(family.host_vcpus),
            "{name}: a size fills the host"
        );
    }
}

#[test]
fn thesis_numbers_are_in_the_catalog() {
    let catalog = Catalog::builtin();
    // Thesis Table 5.3 and section 6.1.2: 48 m5.large and 6 m5.4xlarge per m5 host.
    let (m5, large) = catalog.size("m5.large").expect("m5.large");
    assert_eq!((m5.host_vcpus, m5.physical_cores), (96, 48));
    assert_eq!(large.instances_per_host, 48);
    assert_eq!(large.baseline_bandwidth_bps, 0.75e9);
    assert_eq!(large.burst_bandwidth_bps, Some(10e9));
    assert_eq!(
        catalog
            .size("m5.4xlarge")
            .map(|(_, s)| s.instances_per_host),
        Some(6)
    );
    assert_eq!(m5.host_bandwidth_bps, 25e9);
    // Table 5.7: 8 m6g.2xlarge per m6g host; Graviton has no SMT.
    let (m6g, m6g_2xl) = catalog.size("m6g.2xlarge").expect("m6g.2xlarge");
    assert_eq!(m6g_2xl.instances_per_host, 8);
    assert_eq!((m6g.threads_per_core, m6g.arch), (1, Arch::Arm64));
    // Table 5.1 prices.
    assert_eq!(
        catalog.family("m6a").map(|f| f.host_price_usd_per_hour),
        Some(9.124)
    );
    assert!(catalog.size("m5.huge").is_none());
    assert!(catalog.size("z9.large").is_none());
    assert!(catalog.size("nodot").is_none());
}

/// A minimal valid family with one size, for the error tests to break.
const ONE_FAMILY: &str = r#"
[[family]]
name = "t1"
arch = "x86_64"
cpu = "test"
sockets = 1
physical_cores = 2
host_vcpus = 4
threads_per_core = 2
host_bandwidth_bps = 1e9
host_price_usd_per_hour = 1.0
price_region = "us-east-1"
price_as_of = "test"
sources = ["test"]
sizes = [
  { name = "t1.large", vcpus = 2, instances_per_host = 2, baseline_bandwidth_bps = 1e8 },
]
"#;

#[test]
fn a_valid_small_file_parses() {
    let catalog = Catalog::from_toml(ONE_FAMILY).expect("valid");
    let (family, size) = catalog.size("t1.large").expect("t1.large");
    assert_eq!(family.name, "t1");
    assert_eq!(size.burst_bandwidth_bps, None);
}

#[test]
fn malformed_file_names_its_line() {
    let text = ONE_FAMILY.replace("sockets = 1", "sockets = \"one\"");
    let line = text
        .lines()
        .position(|l| l.starts_with("sockets"))
        .expect("line")
        + 1;
    match Catalog::from_toml(&text) {
        Err(CatalogError::Parse { line: got, message }) => {
            assert_eq!(got, line, "{message}");
        }
        other => panic!("expected a parse error, got {other:?}"),
    }
    let err = Catalog::from_toml("[[family]\nname = 1").expect_err("broken");
    assert!(err.to_string().starts_with("catalog line 1:"), "{err}");
}

#[test]
fn contradictions_are_refused_naming_the_family() {
    let overfull = ONE_FAMILY.replace("instances_per_host = 2", "instances_per_host = 3");
    let err = Catalog::from_toml(&overfull).expect_err("3 x 2 > 4 vCPUs");
    assert!(
        matches!(&err, CatalogError::Invalid { family, .. } if family == "t1"),
        "{err}"
    );
    let smt = ONE_FAMILY.replace("host_vcpus = 4", "host_vcpus = 3");
    assert!(Catalog::from_toml(&smt).is_err());
    let misnamed = ONE_FAMILY.replace("name = \"t1.large\"", "name = \"t2.large\"");
    assert!(Catalog::from_toml(&misnamed).is_err());
    let free = ONE_FAMILY.replace(
        "host_price_usd_per_hour = 1.0",
        "host_price_usd_per_hour = 0.0",
    );
    assert!(Catalog::from_toml(&free).is_err());
}

/// Review item 42: every "up to" size has AWS's documented burst window (5 to 60
/// minutes), fixed-bandwidth sizes none; the T types have AWS's credit table.
#[test]
fn credit_windows_are_in_the_catalog() {
    let catalog = Catalog::builtin();
    let (_, large) = catalog.size("m5.large").expect("m5.large");
    let window = large.burst_window.expect("m5.large bursts");
    assert_eq!((window.shortest_s, window.longest_s), (300.0, 3600.0));
    let (_, eight) = catalog.size("m5.8xlarge").expect("m5.8xlarge");
    assert_eq!(eight.burst_window, None, "10 Gbit/s fixed: no credits");
    let micro = catalog.cpu_credits("t3.micro").expect("t3.micro");
    assert_eq!(
        (
            micro.vcpus,
            micro.credits_per_hour,
            micro.baseline_pct,
            micro.max_balance
        ),
        (2, 12.0, 10.0, 288.0)
    );
    assert!(catalog.cpu_credits("m5.large").is_none(), "not burstable");
}

/// The balance estimate by hand, t3.micro (12 credits/h, at most 288): from 100,
/// 30 minutes with both vCPUs at 50% (1800 CPU-seconds = 30 credits spent, 6
/// earned) leaves 76; an idle hour from 280 stops at the cap, 288; ten minutes of
/// both vCPUs at 100% from 10 (20 spent, 2 earned) leaves 0, never less.
#[test]
fn the_credit_balance_estimate_by_hand() {
    let micro = Catalog::builtin()
        .cpu_credits("t3.micro")
        .expect("t3.micro");
    assert!((micro.balance_after(100.0, 1800.0, 1800.0) - 76.0).abs() < 1e-9);
    assert_eq!(micro.balance_after(280.0, 3600.0, 0.0), 288.0);
    assert_eq!(micro.balance_after(10.0, 600.0, 1200.0), 0.0);
}

/// A burst bandwidth without its window (or a window without one), a window whose
/// shortest is above its longest, and a credit table whose numbers disagree are
/// refused, naming the family or type.
#[test]
fn credit_window_contradictions_are_refused() {
    let bursting = ONE_FAMILY.replace(
        "baseline_bandwidth_bps = 1e8 }",
        "baseline_bandwidth_bps = 1e8, burst_bandwidth_bps = 1e9 }",
    );
    let err = Catalog::from_toml(&bursting).expect_err("no window");
    assert!(err.to_string().contains("burst_window_s"), "{err}");
    let windowed = bursting.replace("1e9 }", "1e9, burst_window_s = [300, 3600] }");
    Catalog::from_toml(&windowed).expect("burst with its window");
    let backwards = bursting.replace("1e9 }", "1e9, burst_window_s = [3600, 300] }");
    assert!(Catalog::from_toml(&backwards).is_err());
    let credits = |baseline: &str| {
        format!(
            "burstable = [{{ name = \"t3.micro\", vcpus = 2, arch = \"x86_64\", credits_per_hour = 12, \
             baseline_pct = {baseline}, max_balance = 288 }}]\n{ONE_FAMILY}"
        )
    };
    Catalog::from_toml(&credits("10")).expect("AWS's numbers agree");
    let err = Catalog::from_toml(&credits("20")).expect_err("12/2/60 is 10%");
    assert!(
        matches!(&err, CatalogError::Invalid { family, .. } if family == "t3.micro"),
        "{err}"
    );
}

/// Default tenancy (issue 26) prices instances, not hosts: the on-demand prices of a
/// family size and of burstable types are in the catalog (us-east-1, AWS's price
/// page: m5.large $0.096/h, t3.micro $0.0104/h, t4g.micro $0.0084/h), as are the
/// burstable types' architectures; a type the catalog does not know has neither.
#[test]
fn instances_have_on_demand_prices_and_architectures() {
    let catalog = Catalog::builtin();
    assert_eq!(catalog.on_demand_usd_per_hour("m5.large"), Some(0.096));
    assert_eq!(catalog.on_demand_usd_per_hour("m7i.48xlarge"), Some(9.6768));
    assert_eq!(catalog.on_demand_usd_per_hour("t3.micro"), Some(0.0104));
    assert_eq!(catalog.on_demand_usd_per_hour("t4g.micro"), Some(0.0084));
    assert_eq!(catalog.on_demand_usd_per_hour("c5n.9xlarge"), None);
    assert_eq!(catalog.arch_of("t4g.micro"), Some(Arch::Arm64));
    assert_eq!(catalog.arch_of("t3a.large"), Some(Arch::X86_64));
    assert_eq!(catalog.arch_of("m6g.large"), Some(Arch::Arm64));
    assert_eq!(catalog.arch_of("c5n.9xlarge"), None);
    for family in &catalog.families {
        for size in &family.sizes {
            let price = size.on_demand_usd_per_hour.expect("every size is priced");
            assert!(
                price > 0.0 && price < family.host_price_usd_per_hour * 1.01,
                "{}",
                size.name
            );
        }
    }
    assert!(catalog
        .burstable
        .iter()
        .all(|c| c.on_demand_usd_per_hour.is_some()));
}
