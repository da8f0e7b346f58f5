#!/usr/bin/env bash
# Start-up of `hub serve` on SQLite: from the process start to the first 200
# on /ready (fresh data dir each run: migrations included; /health answers
# earlier, while the migrations run), the resident
# memory then, and the size of the served /openapi.json.
# Usage: tests/bench/startup.sh HUB_BINARY [RUNS]   (default 10 runs)
set -euo pipefail
hub="${1:?the hub binary}"
runs="${2:-10}"
port="${STARTUP_PORT:-18790}"
times=()
for i in $(seq 1 "$runs"); do
    data="$(mktemp -d)"
    start=$(date +%s%N)
    HUB_LISTEN="127.0.0.1:$port" HUB_DATA_DIR="$data" HUB_QUIC_LISTEN=off "$hub" serve --dev >"$data/hub.log" 2>&1 &
    pid=$!
    until curl -sf -o /dev/null "http://127.0.0.1:$port/ready"; do
        kill -0 "$pid" 2>/dev/null || { cat "$data/hub.log"; exit 1; }
        sleep 0.002
    done
    end=$(date +%s%N)
    times+=($(((end - start) / 1000000)))
    if [ "$i" = 1 ]; then
        rss_kib=$(awk '/VmRSS/ { print $2 }' "/proc/$pid/status")
        doc_bytes=$(curl -sf "http://127.0.0.1:$port/openapi.json" | wc -c)
    fi
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    rm -rf "$data"
done
sorted=($(printf '%s\n' "${times[@]}" | sort -n))
echo "start-up to a 200 on /ready over $runs runs: median ${sorted[$((runs / 2))]} ms, min ${sorted[0]} ms, max ${sorted[$((runs - 1))]} ms"
echo "resident memory after start-up: $((rss_kib / 1024)) MiB; /openapi.json: $doc_bytes bytes"
