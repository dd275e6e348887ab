#!/usr/bin/env bash
# Runs every nnb test, installing what the tests need first (iproute2 for the network
# namespace tests, the seeds' tools and runc for command jobs and container tenants, moto
# for the AWS tests). The root-only tests (namespaces, tc) run
# when this is run as root; with CI set they fail instead of skipping when they cannot run.
#
# One build profile (release) for tests and binaries, so CI compiles everything once and
# the measuring loops run optimised, as a user's `cargo run --release` would.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the tests run for real: iproute2 (namespaces, tc), the seeds' tools as
# command jobs (stress-ng, fio, sysbench, iperf3), gcc (the fixed-work C loops the
# command-job tests compile), runc and podman (the container-runtime tenants).
need_pkgs=()
for tool in ip:iproute2 tc:iproute2 stress-ng:stress-ng fio:fio sysbench:sysbench \
  iperf3:iperf3 gcc:gcc runc:runc podman:podman; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || need_pkgs+=("${tool#*:}")
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq "${need_pkgs[@]}" >/dev/null 2>&1 \
      || { apt-get update -qq && apt-get install -y -qq "${need_pkgs[@]}"; }
  else
    echo "note: ${need_pkgs[*]} missing and this is not root: the tests needing them will skip (or fail under CI)" >&2
  fi
fi

# The AWS tests start their own moto server per test (a fake EC2/S3 on a free local
# port) and check leftovers with boto3, which moto brings along. Without moto on PATH it
# goes into a virtual environment of its own (Debian's system pip refuses installs).
if ! command -v moto_server >/dev/null 2>&1; then
  venv="${NNB_MOTO_VENV:-$HOME/.cache/nnb/moto-venv}"
  if [ ! -x "$venv/bin/moto_server" ]; then
    if ! python3 -m venv "$venv" >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
      export DEBIAN_FRONTEND=noninteractive
      apt-get install -y -qq python3 python3-venv >/dev/null 2>&1 \
        || { apt-get update -qq && apt-get install -y -qq python3 python3-venv; }
      rm -rf "$venv"
      python3 -m venv "$venv"
    fi
    "$venv/bin/pip" install -q 'moto[server]' || echo "note: installing moto failed" >&2
  fi
  export PATH="$venv/bin:$PATH"
fi
command -v moto_server >/dev/null 2>&1 || echo "note: moto_server is still missing: the AWS tests will skip (or fail under CI)" >&2

cargo test --release --workspace --locked "$@"
