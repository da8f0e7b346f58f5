#!/usr/bin/env bash
# The gateway benchmark from outside the hub's process: installs wrk when
# missing, builds the release hub and the benchmark, and runs it on SQLite
# and, when HUB_TEST_POSTGRES_URL is set, on PostgreSQL with two replicas.
# Usage: tests/bench/gateway.sh [bench arguments, e.g. --seconds 4 --compare-metrics]
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v wrk >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q wrk
fi
cargo build --release -q -p hub -p tests --bin hub --bin bench
target="${CARGO_TARGET_DIR:-target}"
exec "$target/release/bench" "$@"
