//! Hand-made run directories: a fixture of `fixtures/` copied into a temporary
//! directory, its manifest and records edited as plain JSON.

use std::path::Path;

use serde_json::Value;

/// A copy of fixture `name` (manifest, samples.jsonl, HDR logs) with `manifest`
/// applied to its manifest and `record` to each record of `samples.jsonl`, unread.
pub(crate) fn copied(
    name: &str,
    manifest: impl Fn(&mut Value),
    record: impl Fn(&mut Value),
) -> tempfile::TempDir {
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name);
    let dir = tempfile::tempdir().unwrap();
    let mut m: Value =
        serde_json::from_str(&std::fs::read_to_string(from.join("manifest.json")).unwrap())
            .unwrap();
    manifest(&mut m);
    std::fs::write(dir.path().join("manifest.json"), m.to_string()).unwrap();
    let samples: String = std::fs::read_to_string(from.join("samples.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let mut r: Value = serde_json::from_str(l).unwrap();
            record(&mut r);
            r.to_string() + "\n"
        })
        .collect();
    std::fs::write(dir.path().join("samples.jsonl"), samples).unwrap();
    if from.join("hdr").is_dir() {
        std::fs::create_dir(dir.path().join("hdr")).unwrap();
        for e in std::fs::read_dir(from.join("hdr")).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), dir.path().join("hdr").join(e.file_name())).unwrap();
        }
    }
    dir
}
