#!/usr/bin/env bash
# The typed clients checked end to end against a hub on SQLite (development
# mode, so it delivers webhooks to loopback): both are generated from the
# hub's own /openapi.json (clients/generate.sh), the TypeScript one compiled
# with tsc --strict, the Python one installed with pip; then each drives
# its story (sign up, API key, CRM contact written and read back, a signed
# webhook received): clients/typescript/story.ts, clients/python/story.py.
# A change of the document that breaks a client, or a story, fails here.
# Usage: clients/run.sh HUB_BINARY VENV_BIN   (VENV_BIN holds python, pip,
# openapi-python-client and standardwebhooks; node and npm on PATH)
# Ends with `clients: N passed, M failed`; exits 1 unless M is 0.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
hub="${1:?the hub binary}"
bin="${2:?the bin directory of the virtual environment}"
port="${CLIENTS_PORT:-18766}"
base="http://127.0.0.1:$port"
work="$(mktemp -d)"
HUB_LISTEN="127.0.0.1:$port" HUB_DATA_DIR="$work" HUB_QUIC_LISTEN=off \
    "$hub" serve --dev >"$work/hub.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 1 100); do
    curl -sf "$base/ready" >/dev/null && break
    sleep 0.1
done
if ! curl -sf "$base/ready" >/dev/null; then
    echo "clients: the hub did not become ready on $base; its log:" >&2
    cat "$work/hub.log" >&2
    exit 1
fi

passed=0
failed=0
# step NAME COMMAND...: runs COMMAND, counts it, never stops the script.
step() {
    local name="$1"
    shift
    printf -- '-- clients: %s\n' "$name"
    if "$@"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        printf -- '-- clients: FAILED: %s\n' "$name" >&2
        return 1
    fi
}

# The generators and tsc exactly as package-lock.json pins them.
(cd "$here" && npm ci --no-audit --no-fund)
# Nothing below can run without both clients.
step "generate both clients from $base/openapi.json (tsc --strict builds the TypeScript one)" \
    "$here/generate.sh" "$base" "$bin" || {
    echo "clients: $passed passed, $failed failed"
    exit 1
}

# The document itself, linted by a stock OpenAPI linter (Redocly's
# recommended rules): no error; warnings are printed, not counted.
step "the document lints without an error (@redocly/cli, recommended rules)" \
    sh -c 'curl -sf "$1/openapi.json" >"$2/openapi.json" && "$3/node_modules/.bin/redocly" lint "$2/openapi.json" --format=summary' \
    lint "$base" "$work" "$here"

tsc="$here/node_modules/.bin/tsc"
rm -rf "$here/typescript/story-build"
if step "typescript: the story compiles against the built client (tsc --strict)" \
    "$tsc" --project "$here/typescript/tsconfig.story.json"; then
    step "typescript: the story against the hub" node "$here/typescript/story-build/story.js" "$base" || true
else
    failed=$((failed + 1))
    echo "-- clients: FAILED: typescript: the story against the hub (not run: it did not compile)" >&2
fi

# Installed as a user would (pip; its dependencies are those of the
# virtual environment, which pip check holds to the project's ranges).
site="$work/site"
install_python() {
    "$bin/pip" install -q --no-deps --target "$site" "$here/python/platform-hub-client" &&
        PYTHONPATH="$site" "$bin/python" -m pip check
}
if step "python: pip installs the client, its requirements met" install_python; then
    step "python: the story against the hub" env PYTHONPATH="$site" "$bin/python" "$here/python/story.py" "$base" || true
else
    failed=$((failed + 1))
    echo "-- clients: FAILED: python: the story against the hub (not run: the client did not install)" >&2
fi

echo "clients: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
