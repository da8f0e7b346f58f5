#!/usr/bin/env bash
# Generates the hub's typed clients from its OpenAPI document, with pinned
# stock generators, into clients/ (the output is not committed: the
# document is the one source):
#   clients/python/platform-hub-client  openapi-python-client
#       (pinned in clients/python-requirements.txt, configured by
#       clients/python-config.yaml), an installable project;
#   clients/typescript/src, built to clients/typescript/dist
#       @hey-api/openapi-ts with its fetch client (pinned in
#       clients/package.json and package-lock.json, configured by
#       clients/openapi-ts.config.mjs), compiled by tsc --strict.
# Usage: clients/generate.sh SOURCE [VENV_BIN]
#   SOURCE    a hub's base URL (http://localhost:8080: its /openapi.json is
#             read) or the path of an openapi.json
#   VENV_BIN  a bin directory holding openapi-python-client; without it the
#             pinned version is installed into clients/.venv
# Needs curl (for a URL), python3 with venv (without VENV_BIN), node and npm.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source="${1:?usage: clients/generate.sh SOURCE [VENV_BIN] (a hub base URL or an openapi.json)}"
bin="${2:-}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

case "$source" in
http://* | https://*) curl -sfS "${source%/}/openapi.json" -o "$work/openapi.json" ;;
*) cp "$source" "$work/openapi.json" ;;
esac

# ---- Python: openapi-python-client --------------------------------------
pin="$(sed -n 's/^openapi-python-client==//p' "$here/python-requirements.txt")"
generator_version() { "$1/openapi-python-client" --version 2>/dev/null | awk '{ print $NF }'; }
if [ -z "$bin" ]; then
    bin="$here/.venv/bin"
    if [ ! -x "$bin/openapi-python-client" ] || [ "$(generator_version "$bin")" != "$pin" ]; then
        python3 -m venv "$here/.venv"
        "$bin/pip" install -q -r "$here/python-requirements.txt"
    fi
fi
have="$(generator_version "$bin" || true)"
if [ "$have" != "$pin" ]; then
    echo "generate.sh: openapi-python-client ${have:-missing} in $bin, clients/python-requirements.txt pins $pin" >&2
    exit 1
fi
"$bin/openapi-python-client" generate --path "$work/openapi.json" \
    --output-path "$here/python/platform-hub-client" --overwrite --meta pdm \
    --config "$here/python-config.yaml" --fail-on-warning
echo "generate.sh: Python client (openapi-python-client $have) in clients/python/platform-hub-client"

# ---- TypeScript: @hey-api/openapi-ts, then tsc --strict -----------------
cd "$here"
ts_pin="$(node -p 'require("./package.json").devDependencies["@hey-api/openapi-ts"]')"
if [ "$(node_modules/.bin/openapi-ts --version 2>/dev/null || true)" != "$ts_pin" ]; then
    npm ci --no-audit --no-fund
fi
HUB_OPENAPI="$work/openapi.json" node_modules/.bin/openapi-ts --file openapi-ts.config.mjs
rm -rf typescript/dist
node_modules/.bin/tsc --project typescript/tsconfig.json
echo "generate.sh: TypeScript client (@hey-api/openapi-ts $ts_pin, tsc $(node_modules/.bin/tsc --version | awk '{ print $NF }') --strict) in clients/typescript/dist"
