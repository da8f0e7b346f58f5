#!/usr/bin/env bash
# The hub's own OpenAPI document checked from outside, against a hub on
# SQLite (development mode) with a tenant signed up for a bearer token and
# the operator token for /admin:
# 1. a stock client generator (openapi-python-client) turns it into a typed
#    Python client without a warning, and generated_client.py drives the
#    hub through that client;
# 2. schemathesis fuzzes every operation with a fixed seed and bounded
#    examples, failing on any 5xx, any response the document does not
#    describe, any status code it does not list and any request the
#    schema forbids that is not refused.
# Usage: tests/fuzz/run.sh HUB_BINARY VENV_BIN   (VENV_BIN holds schemathesis,
# openapi-python-client and python)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
hub="${1:?the hub binary}"
bin="${2:?the bin directory of the virtual environment}"
port="${FUZZ_PORT:-18765}"
data="$(mktemp -d)"
admin="fuzz-admin-$(date +%s)"
# A sovereign bundle release key (RFC 8032's first test key), so a
# release's signature is checked (400 when it does not verify) rather
# than every release answering 503 for want of a key.
HUB_LISTEN="127.0.0.1:$port" HUB_DATA_DIR="$data" ADMIN_OPS_TOKEN="$admin" HUB_QUIC_LISTEN=off \
    HUB_SOVEREIGN_BUNDLE_PUBLIC_KEY=d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a \
    "$hub" serve --dev >"$data/hub.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$data"' EXIT
for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$port/ready" >/dev/null && break
    sleep 0.1
done
token=$(curl -sf "http://127.0.0.1:$port/api/auth/signup-tenant" -H 'content-type: application/json' \
    -d '{"email":"fuzz@example.com","password":"correct horse battery","org_name":"Fuzz","app_id":"fuzz","display_name":"Fuzz","region":"eu-west-1"}' |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["data"]["token"])')
curl -sf "http://127.0.0.1:$port/openapi.json" >"$data/openapi.json"
printf 'post_hooks: []\n' >"$data/generator.yaml"
"$bin/openapi-python-client" generate --path "$data/openapi.json" --output-path "$data/client" \
    --meta none --config "$data/generator.yaml" --fail-on-warning
PYTHONPATH="$data" "$bin/python" "$here/generated_client.py" "http://127.0.0.1:$port" "$token"
# The SSE command streams (the robot's and the watchers') never end by
# design (the SSE tests cover them).
# One worker: schemathesis 4.32 sometimes fails inside itself with two.
# The two operations that can shut the fuzzing tenant out (the operator's
# suspension, an offboarding) run last, on their own: run among the
# others, every operation after them answers 423 and is not really tested.
# The checks: all of them (no 5xx; every answer as its schema says; every
# status code in the document; every request the schema forbids refused;
# every request it allows accepted, ...). A rule JSON Schema cannot state
# (a resource of the caller's, two fields in order, the clock, a registry)
# refuses a schema-valid request with 400, as the documents say it must:
# beyond-schema.toml lists those operations, each with its rule, and lets
# their positive_data_acceptance admit 400; a rule the schema can state is
# in the schema. NUL bytes are not generated: the hub refuses them in every
# string (400), a rule of its own (docs/compatibility.md).
checks="${FUZZ_CHECKS:-all}"
shutters=(--include-path '/admin/tenants/{tenant_id}/suspend' --include-path '/api/tenants/{tenant_id}/offboarding')
run() {
    "$bin/schemathesis" --config-file "$here/beyond-schema.toml" run "http://127.0.0.1:$port/openapi.json" \
        -H "Authorization: Bearer $token" -H "x-admin-ops-token: $admin" \
        --checks "$checks" --generation-allow-x00 false --seed 20261123 --max-examples "${FUZZ_EXAMPLES:-25}" --workers 1 "$@"
}
run --exclude-path '/api/commands/stream/{asset_id}' --exclude-path '/api/commands/watch' \
    --exclude-path '/admin/tenants/{tenant_id}/suspend' --exclude-path '/api/tenants/{tenant_id}/offboarding'
run "${shutters[@]}"
