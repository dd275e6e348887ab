//! Issue 28 item 2: a tenant's `runtime` key names the technology its agent runs
//! inside; an unknown name is refused at its line with the accepted ones, and a
//! runtime on a provider that does not launch its tenants (static, aws) too.

use nnb_experiment::parse;
use nnb_format::Runtime;

/// A local staircase whose neighbor has `runtime`; `provider` its `[provider]` lines.
fn file(provider: &str, runtime: &str) -> String {
    format!(
        "name = \"r\"\nrepetitions = 1\nsettle = \"0s\"\n\
         [provider]\n{provider}\n\
         [[tenants]]\nname = \"test\"\nrole = \"test\"\n\
         [[tenants]]\nname = \"nb\"\nrole = \"neighbor\"\nruntime = \"{runtime}\"\n\
         [scenario]\nkind = \"neighbor-staircase\"\n\
         [scenario.test]\nworkload = \"fpadd\"\nops = 1000\n"
    )
}

/// (line, message) of the error `src` gets.
fn error(src: &str) -> (usize, String) {
    match parse("r.toml", src, Some(2)) {
        Ok(_) => panic!("accepted:\n{src}"),
        Err(e) => e
            .diagnostic()
            .map_or((0, e.to_string()), |d| (d.line, d.message.clone())),
    }
}

fn runtime_line(src: &str) -> usize {
    src.lines().position(|l| l.starts_with("runtime")).unwrap() + 1
}

#[test]
fn each_known_runtime_is_taken_and_the_default_is_a_process() {
    for r in Runtime::ALL {
        let exp = parse("r.toml", &file("kind = \"local\"", r.name()), Some(2))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(exp.tenants[0].runtime, Runtime::Process, "test has none");
        assert_eq!(exp.tenants[1].runtime, r);
        assert_eq!(exp.tenant_specs()[1].runtime, r);
    }
}

#[test]
fn an_unknown_runtime_is_refused_at_its_line_with_the_accepted_names() {
    let src = file("kind = \"local\"", "lxc");
    let (line, msg) = error(&src);
    assert_eq!(line, runtime_line(&src), "{msg}");
    assert!(
        msg.contains("unknown runtime `lxc`")
            && msg.contains("process, runc, crun, podman, docker"),
        "{msg}"
    );
}

#[test]
fn a_runtime_is_refused_on_a_static_provider() {
    let src = file(
        "kind = \"static\"\nhosts = \"hosts.txt\"\ntoken_file = \"t\"",
        "runc",
    );
    let (line, msg) = error(&src);
    assert_eq!(line, runtime_line(&src), "{msg}");
    assert!(msg.contains("local provider"), "{msg}");
}
