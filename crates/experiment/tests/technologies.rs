//! Issue 28 item 3: an isolation matrix over `technologies` runs every tenant once
//! per technology, as `TENANT@TECHNOLOGY`, the same steps technology by technology;
//! the key is checked at its line; without it nothing changes.

use nnb_agent::jobs::JobSpec;
use nnb_experiment::plan::{expand, Step};
use nnb_experiment::tenant::base_name;
use nnb_experiment::{parse, Role};
use nnb_format::{Runtime, StepGroup};

/// A local CPU matrix of tenants a and b (1 vCPU, 0.5 CPU each); `extra` lines end
/// its `[scenario]`, `provider` is its `[provider]` table's lines.
fn file(provider: &str, extra: &str) -> String {
    format!(
        "name = \"t\"\nrepetitions = 1\n\
         [provider]\n{provider}\n\
         [[tenants]]\nname = \"a\"\nrole = \"test\"\nvcpus = 1\ngrant = {{ cpu = 0.5 }}\n\
         [[tenants]]\nname = \"b\"\nrole = \"neighbor\"\nvcpus = 1\ngrant = {{ cpu = 0.5 }}\n\
         [scenario]\nkind = \"isolation-matrix\"\nresource = \"cpu\"\nduration = \"1s\"\n{extra}"
    )
}

const LOCAL: &str = "kind = \"local\"";

/// (line, message) of the error `src` gets.
fn error(src: &str) -> (usize, String) {
    match parse("t.toml", src, Some(2)) {
        Ok(_) => panic!("accepted:\n{src}"),
        Err(e) => e
            .diagnostic()
            .map_or((0, e.to_string()), |d| (d.line, d.message.clone())),
    }
}

/// The 1-based line starting with `start`.
fn line(src: &str, start: &str) -> usize {
    src.lines().position(|l| l.starts_with(start)).unwrap() + 1
}

/// Steps of one matrix: the capacity, a alone in 4 states, b alone in 4 (b's
/// baselines), the 12 pairs.
const MATRIX: usize = 1 + 4 + 4 + 12;

/// The step of `steps` whose id is `id`.
fn step<'a>(steps: &'a [Step], id: &str) -> &'a Step {
    steps
        .iter()
        .find(|s| s.id == id)
        .unwrap_or_else(|| panic!("no step {id}"))
}

/// The plan worked by hand: Volpert et al.'s steps (capacity, a alone, b alone,
/// pairs) for process, then the same for runc (one switch between them); ids
/// prefixed with the technology, only its two tenants present and measured, the
/// lifted tenant its own, every job the same in both technologies.
#[test]
fn the_matrix_runs_once_per_technology_with_its_own_tenants() {
    let exp = parse(
        "t.toml",
        &file(LOCAL, "technologies = [\"process\", \"runc\"]\n"),
        Some(2),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let specs = exp.tenant_specs();
    let names: Vec<(&str, Role, Runtime)> = specs
        .iter()
        .map(|s| (s.name.as_str(), s.role, s.runtime))
        .collect();
    assert_eq!(
        names,
        [
            ("a@process", Role::Test, Runtime::Process),
            ("b@process", Role::Neighbor, Runtime::Process),
            ("a@runc", Role::Test, Runtime::Runc),
            ("b@runc", Role::Neighbor, Runtime::Runc),
        ]
    );
    // Each launched tenant keeps its grant, and maps back to its own name.
    for t in exp.launched_tenants() {
        assert_eq!(t.grant.cpu, Some(0.5), "{}", t.name);
        assert!(["a", "b"].contains(&base_name(&t.name)));
    }
    let plan = expand(&exp, 2);
    assert_eq!(plan.steps.len(), 2 * MATRIX);
    // One change of tenants: process' pair, then runc's (no background jobs).
    assert_eq!(plan.changes(), 2);
    let (process, runc) = plan.steps.split_at(MATRIX);
    for (steps, t) in [(process, Runtime::Process), (runc, Runtime::Runc)] {
        let a = format!("a@{t}");
        let b = format!("b@{t}");
        for s in steps {
            assert_eq!(s.technology, Some(t), "{}", s.id);
            assert!(s.id.starts_with(&format!("{t}/")), "{}", s.id);
            assert_eq!(s.present, [a.clone(), b.clone()], "{}", s.id);
        }
        assert_eq!(steps[0].id, format!("{t}/capacity/capacity/rep=1"));
        assert_eq!(steps[0].lifted, [a.as_str()]);
        let unrestricted = step(steps, &format!("{t}/baseline/a=unrestricted/rep=1"));
        assert_eq!(unrestricted.lifted, [a.as_str()]);
        let under = step(steps, &format!("{t}/baseline/a=undercommitted/rep=1"));
        assert_eq!(under.measure.len(), 1);
        assert_eq!(under.measure[0].tenant, a);
        assert!(under.lifted.is_empty());
        // b's own baseline runs on b's tenant of the technology.
        let b_alone = step(steps, &format!("{t}/baseline/b=saturated/rep=1"));
        assert_eq!(b_alone.measure[0].tenant, b);
        // Table 1 id 8 is a_u b_f: b's grant lifted, both measured.
        let a_u_b_f = step(
            steps,
            &format!("{t}/pair/a=undercommitted,b=unrestricted/rep=1"),
        );
        assert_eq!(a_u_b_f.level, 8.0);
        assert_eq!(a_u_b_f.lifted, [b.as_str()]);
        let measured: Vec<&str> = a_u_b_f.measure.iter().map(|m| m.tenant.as_str()).collect();
        assert_eq!(measured, [a.as_str(), b.as_str()]);
        let id11 = step(
            steps,
            &format!("{t}/pair/a=saturated,b=overcommitted/rep=1"),
        );
        assert_eq!(id11.level, 11.0);
        assert_eq!(steps[MATRIX - 1].group, StepGroup::Pair);
    }
    // The same demands in both: a overcommitted is one full thread (2 x 0.5 CPU).
    for (p, r) in process.iter().zip(runc) {
        assert_eq!((p.level, &p.level_label), (r.level, &r.level_label));
        let jobs = |s: &Step| -> Vec<JobSpec> { s.measure.iter().map(|m| m.job.clone()).collect() };
        assert_eq!(jobs(p), jobs(r), "{}", p.id);
    }
    match &step(runc, "runc/baseline/a=overcommitted/rep=1").measure[0].job {
        JobSpec::Burn { threads, duty, .. } => assert_eq!((*threads, *duty), (1, None)),
        other => panic!("not a burn: {other:?}"),
    }
}

/// Without `technologies` nothing changes: the tenants' own names, no technology,
/// ids as before.
#[test]
fn without_technologies_the_matrix_is_as_before() {
    let exp = parse("t.toml", &file(LOCAL, ""), Some(2)).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<String> = exp.tenant_specs().into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["a", "b"]);
    assert!(!exp.scenario.tenants_come_and_go());
    let plan = expand(&exp, 2);
    assert_eq!(plan.steps.len(), MATRIX);
    assert_eq!(plan.steps[0].id, "capacity/capacity/rep=1");
    assert!(plan
        .steps
        .iter()
        .all(|s| s.technology.is_none() && s.present == ["a", "b"]));
}

/// One technology is a matrix too, under the expanded names.
#[test]
fn one_technology_names_its_tenants() {
    let exp = parse(
        "t.toml",
        &file(LOCAL, "technologies = [\"runc\"]\n"),
        Some(2),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let plan = expand(&exp, 2);
    assert_eq!(plan.steps.len(), MATRIX);
    assert!(plan.steps.iter().all(|s| s.present == ["a@runc", "b@runc"]));
    assert!(exp.scenario.tenants_come_and_go());
}

#[test]
fn bad_technologies_are_refused_at_their_line() {
    for (list, want) in [
        ("[\"process\", \"lxc\"]", "unknown technology `lxc`"),
        (
            "[\"runc\", \"process\", \"runc\"]",
            "`runc` is listed twice",
        ),
        ("[]", "at least one technology"),
    ] {
        let src = file(LOCAL, &format!("technologies = {list}\n"));
        let (at, msg) = error(&src);
        assert_eq!(at, line(&src, "technologies"), "{msg}");
        assert!(msg.contains(want), "{msg}");
    }
    // The names it accepts are the runtimes'.
    let (_, msg) = error(&file(LOCAL, "technologies = [\"kvm\"]\n"));
    assert!(msg.contains("process, runc, crun, podman, docker"), "{msg}");
    // Five distinct ones are fine (whether each can run here is the provider's check).
    let all = "technologies = [\"process\", \"runc\", \"crun\", \"podman\", \"docker\"]\n";
    let exp = parse("t.toml", &file(LOCAL, all), Some(2)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(exp.tenant_specs().len(), 10);
}

#[test]
fn technologies_are_for_the_local_provider() {
    let src = file(
        "kind = \"static\"\nhosts = \"hosts.txt\"\ntoken_file = \"t\"",
        "technologies = [\"process\", \"runc\"]\n",
    );
    let (at, msg) = error(&src);
    assert_eq!(at, line(&src, "technologies"), "{msg}");
    assert!(msg.contains("local provider"), "{msg}");
}

#[test]
fn a_tenant_runtime_and_technologies_are_not_both_given() {
    let src = file(LOCAL, "technologies = [\"process\", \"runc\"]\n").replacen(
        "vcpus = 1\n",
        "vcpus = 1\nruntime = \"runc\"\n",
        1,
    );
    let (at, msg) = error(&src);
    assert_eq!(at, line(&src, "technologies"), "{msg}");
    assert!(msg.contains("names its own runtime"), "{msg}");
}

/// The technologies examples: 2 matrices for the CPU, 2 for memory less the
/// capacity step (its maximum is the machine's memory), one repetition each.
#[test]
fn the_technologies_examples_expand() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    for (file, steps) in [
        ("isolation-matrix-technologies-cpu.toml", 2 * MATRIX),
        (
            "isolation-matrix-technologies-memory.toml",
            2 * (MATRIX - 1),
        ),
    ] {
        let exp = nnb_experiment::load(&root.join(file), Some(2)).unwrap_or_else(|e| panic!("{e}"));
        let plan = expand(&exp, 2);
        assert_eq!(plan.steps.len(), steps, "{file}");
        assert_eq!(plan.steps[0].technology, Some(Runtime::Process), "{file}");
        assert_eq!(
            plan.steps[steps - 1].technology,
            Some(Runtime::Runc),
            "{file}"
        );
    }
}
