#!/bin/bash
# The cost of metrics: the gateway with HUB_METRICS=true against false,
# driven from outside its process by wrk (the hub pinned to CPU 0, wrk to
# CPU 1), alternating, each round on a fresh SQLite hub: GET /health and
# GET /api/me with an API key, requests/s. Target: within 3%.
#
#   cargo build --release -p hub --bin hub
#   tests/bench/metrics.sh target/release/hub [ROUNDS=3] [SECONDS=10] [CONNECTIONS=64]
set -u
BIN=$1; ROUNDS=${2:-3}; SECS=${3:-10}; CONNS=${4:-64}
PORT=18093
start_hub() {  # $1 = true|false
  D=$(mktemp -d)
  HUB_DEV=true HUB_DATA_DIR=$D HUB_LISTEN=127.0.0.1:$PORT HUB_QUIC_LISTEN=off HUB_LOG=warn HUB_METRICS=$1 HUB_WEBHOOK_WORKER=false \
    taskset -c 0 "$BIN" serve > $D/log 2>&1 &
  HUB_PID=$!
  for i in $(seq 1 100); do [ "$(curl -s -o /dev/null -w '%{http_code}' 127.0.0.1:$PORT/ready)" = 200 ] && break; sleep 0.2; done
  TOKEN=$(curl -s -X POST 127.0.0.1:$PORT/api/auth/signup-tenant -H 'content-type: application/json' \
    -d '{"email":"b@example.com","password":"correct horse battery","org_name":"Bench","app_id":"bench","display_name":"B","region":"eu-west-1"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["token"])')
  APP=$(curl -s -X POST 127.0.0.1:$PORT/api/applications -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' \
    -d '{"name":"b","slug":"b","environment":"live"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["application_id"])')
  KEY=$(curl -s -X POST 127.0.0.1:$PORT/api/applications/$APP/keys -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' \
    -d '{"name":"k","scopes":["*"]}' | python3 -c 'import json,sys; d=json.load(sys.stdin)["data"]; print(d["api_key"])')
}
rps() {  # $1 path, $2 auth header or ""
  if [ -n "$2" ]; then
    taskset -c 1 wrk -t1 -c$CONNS -d${SECS}s -H "$2" http://127.0.0.1:$PORT$1 | awk '/Requests\/sec/ {print $2}'
  else
    taskset -c 1 wrk -t1 -c$CONNS -d${SECS}s http://127.0.0.1:$PORT$1 | awk '/Requests\/sec/ {print $2}'
  fi
}
for r in $(seq 1 $ROUNDS); do
  for m in true false; do
    start_hub $m
    code=$(curl -s -o /dev/null -w '%{http_code}' -H "authorization: Bearer $KEY" 127.0.0.1:$PORT/api/me)
    h=$(rps /health ""); k=$(rps /api/me "authorization: Bearer $KEY")
    echo "round=$r metrics=$m health=$h api_me_key=$k (me=$code)"
    kill $HUB_PID; wait $HUB_PID 2>/dev/null
    rm -rf "$D"
  done
done
