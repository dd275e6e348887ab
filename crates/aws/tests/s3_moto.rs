//! S3 upload, verification and fetch of a run directory against a real moto server.

use std::path::{Path, PathBuf};

use crate::support::Moto;
use aws_sdk_s3::primitives::ByteStream;
use nnb_aws::s3::{checksums::CHECKSUMS_NAME, S3Error, S3Url, PART_SIZE, S3};

const BUCKET: &str = "nnb-results";
const RUN_ID: &str = "run-42";

/// `n` bytes of a deterministic pseudo-random sequence (xorshift64), so parts differ.
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A run directory `<root>/results/run-42/` with one multipart-sized file (two full
/// parts and a partial third) and small files in nested directories.
fn make_run(root: &Path) -> (PathBuf, Vec<(&'static str, Vec<u8>)>) {
    let files = vec![
        ("big.bin", noise(2 * PART_SIZE as usize + 12_345, 7)),
        ("manifest.json", br#"{"run_id":"run-42"}"#.to_vec()),
        ("tenants/t1/samples.csv", b"t,v\n0,1\n1,2\n".to_vec()),
        ("tenants/t2/empty.csv", Vec::new()),
    ];
    let dir = root.join("results").join(RUN_ID);
    for (name, bytes) in &files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, bytes).expect("write");
    }
    (dir, files)
}

/// Starts moto, creates the bucket and returns the server and the S3 wrapper.
async fn moto_with_bucket() -> Option<(Moto, S3)> {
    let moto = Moto::start()?;
    let s3 = S3::new(&moto.sdk().await);
    s3.client()
        .create_bucket()
        .bucket(BUCKET)
        .send()
        .await
        .expect("CreateBucket on moto");
    Some((moto, s3))
}

fn dest() -> S3Url {
    format!("s3://{BUCKET}/nnb/results").parse().expect("url")
}

/// Names in `dir` (hidden staging directories included).
fn entries(dir: &Path) -> Vec<String> {
    match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_then_fetch_is_byte_identical() {
    let Some((_moto, s3)) = moto_with_bucket().await else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let (dir, files) = make_run(tmp.path());

    let report = s3.upload_run(&dir, &dest(), &[]).await.expect("upload");
    assert_eq!(report.url, format!("s3://{BUCKET}/nnb/results/{RUN_ID}"));
    assert_eq!(report.files, files.len());
    let total: usize = files.iter().map(|(_, b)| b.len()).sum();
    assert_eq!(report.bytes, total as u64);
    assert_eq!(report.multipart_files, 1);
    let big = report
        .objects
        .iter()
        .find(|o| o.key.ends_with("big.bin"))
        .expect("big.bin uploaded");
    assert_eq!(big.parts, 3, "2 full 8 MiB parts and a partial one");
    let last = report.objects.last().expect("objects");
    assert_eq!(
        last.key,
        format!("nnb/results/{RUN_ID}/{CHECKSUMS_NAME}"),
        "manifest last"
    );

    let into = tmp.path().join("fetched");
    let src = dest().join(RUN_ID);
    let fetched = s3.fetch_run(&src, &into).await.expect("fetch");
    assert_eq!(fetched, into.join(RUN_ID));
    for (name, bytes) in &files {
        let got = std::fs::read(fetched.join(name)).expect("fetched file");
        assert!(got == *bytes, "{name} differs after the round trip");
    }
    assert_eq!(
        entries(&fetched).len(),
        3,
        "big.bin, manifest.json, tenants"
    );
    assert_eq!(entries(&into), vec![RUN_ID.to_string()], "no staging left");

    // Fetching again into an identical directory is fine ...
    s3.fetch_run(&src, &into).await.expect("identical refetch");
    // ... but a directory that differs is never overwritten.
    std::fs::write(fetched.join("manifest.json"), b"edited").expect("edit");
    match s3.fetch_run(&src, &into).await {
        Err(S3Error::Exists { path }) => assert_eq!(path, fetched),
        other => panic!("expected Exists, got {other:?}"),
    }
    assert_eq!(
        std::fs::read(fetched.join("manifest.json")).expect("read"),
        b"edited"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupted_object_fails_the_fetch_naming_the_file() {
    let Some((_moto, s3)) = moto_with_bucket().await else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let (dir, files) = make_run(tmp.path());
    s3.upload_run(&dir, &dest(), &[]).await.expect("upload");

    // Same length, different bytes: only the SHA-256 can tell.
    let victim = "tenants/t1/samples.csv";
    let original = &files.iter().find(|(n, _)| *n == victim).expect("victim").1;
    let mut corrupted = original.clone();
    corrupted[0] ^= 0xff;
    s3.client()
        .put_object()
        .bucket(BUCKET)
        .key(format!("nnb/results/{RUN_ID}/{victim}"))
        .body(ByteStream::from(corrupted))
        .send()
        .await
        .expect("overwrite in moto");

    let into = tmp.path().join("fetched");
    match s3.fetch_run(&dest().join(RUN_ID), &into).await {
        Err(S3Error::Verify { file, reason }) => {
            assert_eq!(file, victim);
            assert!(reason.contains("SHA-256"), "{reason}");
        }
        other => panic!("expected a verification failure, got {other:?}"),
    }
    assert!(
        entries(&into).is_empty(),
        "partial run left: {:?}",
        entries(&into)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checksum_manifest_over_the_limit_is_refused_unread() {
    // F4: a 300 MB manifest was read whole; one byte over 16 MiB is refused.
    let Some((_moto, s3)) = moto_with_bucket().await else {
        return;
    };
    let huge = vec![b' '; (16 << 20) + 1];
    s3.client()
        .put_object()
        .bucket(BUCKET)
        .key(format!("nnb/results/{RUN_ID}/{CHECKSUMS_NAME}"))
        .body(ByteStream::from(huge))
        .send()
        .await
        .expect("put in moto");
    let tmp = tempfile::tempdir().expect("tempdir");
    match s3.fetch_run(&dest().join(RUN_ID), tmp.path()).await {
        Err(S3Error::Checksums { reason, .. }) => {
            assert!(reason.contains("larger than 16 MiB"), "{reason}");
        }
        other => panic!("expected the manifest refused, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_run_or_bucket_gives_clear_errors() {
    let Some((_moto, s3)) = moto_with_bucket().await else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let err = s3
        .fetch_run(&dest().join("no-such-run"), tmp.path())
        .await
        .expect_err("no run there");
    assert!(matches!(err, S3Error::Checksums { .. }), "{err}");
    assert!(err.to_string().contains("not found"), "{err}");

    let (dir, _) = make_run(tmp.path());
    let nowhere: S3Url = "s3://no-such-bucket/x".parse().expect("url");
    let err = s3
        .upload_run(&dir, &nowhere, &[])
        .await
        .expect_err("no bucket");
    assert!(matches!(err, S3Error::Api { .. }), "{err}");
    assert!(err.to_string().contains("no-such-bucket"), "{err}");
}
