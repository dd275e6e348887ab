//! The static provider: hosts files that are right become fleets whose agents
//! answer; hosts files that are wrong name the line.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use nnb_agent::{Agent, Token};
use nnb_controller::provider::{load_static, ProviderError, Role};

/// Writes a file readable by its owner only, as a token file must be.
fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosts_file_names_agents_that_answer_with_the_token_file() {
    let dir = tempfile::tempdir().unwrap();
    let token = write(dir.path(), "token", "static-secret-0123\n");
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let agent = Agent::new(
        Token::new("static-secret-0123").unwrap(),
        IpAddr::V4(Ipv4Addr::LOCALHOST),
    )
    .unwrap();
    tokio::spawn(nnb_agent::serve(listener, agent, std::future::pending()));
    let hosts = write(
        dir.path(),
        "hosts",
        &format!(
            "# name role address\n\nvm-test test {addr}\nvm-n1  neighbor 10.9.9.9:7700  # not running\nsink endpoint 127.0.0.1:9\n"
        ),
    );
    let fleet = load_static(&hosts, &token).unwrap();
    assert_eq!(fleet.tenants.len(), 2);
    assert!(fleet.pids().is_empty(), "a static fleet starts no process");
    let test = fleet.test().unwrap();
    assert_eq!((test.name.as_str(), test.addr), ("vm-test", addr));
    assert_eq!(fleet.neighbors().next().unwrap().name, "vm-n1");
    assert_eq!(fleet.endpoint.as_ref().unwrap().name, "sink");
    let health = test.client().health().await.unwrap();
    assert!(!health.cpus.is_empty());
}

#[test]
fn bad_hosts_files_name_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let token = write(dir.path(), "token", "token-of-16-chars\n");
    let cases = [
        (
            "a test 127.0.0.1:1\nb neighbor\n",
            2,
            "expected `NAME ROLE ADDR`",
        ),
        ("a test localhost\n", 1, "not an address"),
        ("a boss 127.0.0.1:1\n", 1, "unknown role"),
        (
            "a test 127.0.0.1:1\n# c\nb test 127.0.0.1:2\n",
            3,
            "second test",
        ),
        ("a test 127.0.0.1:1\na neighbor 127.0.0.1:2\n", 2, "twice"),
    ];
    for (text, line, why) in cases {
        let hosts = write(dir.path(), "hosts", text);
        match load_static(&hosts, &token) {
            Err(ProviderError::HostsFile {
                line: l, message, ..
            }) => {
                assert_eq!(l, line, "{text:?}: {message}");
                assert!(message.contains(why), "{text:?}: {message}");
            }
            other => panic!("{text:?}: expected a hosts file error, got {other:?}"),
        }
    }
    let hosts = write(dir.path(), "hosts", "# only comments\n");
    assert!(load_static(&hosts, &token).is_err());
    let hosts = write(dir.path(), "hosts", "a neighbor 127.0.0.1:1\n");
    let empty = write(dir.path(), "empty", "\n");
    let err = load_static(&hosts, &empty).unwrap_err().to_string();
    assert!(err.contains("empty"), "{err}");
    let fleet = load_static(&hosts, &token).unwrap();
    assert_eq!(fleet.tenants[0].role, Role::Neighbor);
    assert!(fleet.test().is_none());
}
