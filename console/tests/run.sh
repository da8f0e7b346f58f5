#!/usr/bin/env bash
# The console checked in a real browser: a hub on SQLite (development
# mode, so it delivers webhooks to loopback) serves /console, and
# stories.mjs drives it in headless Chromium (Debian's chromium through
# playwright-core, pinned in package-lock.json): sign up, sign in, issue a
# key and call the API with it, a webhook delivered to a local receiver, a
# flag rolled out to 50% and evaluated, the audit chain verified, a robot's
# command seen live; every page scanned by axe-core (no serious or critical
# violation), held to one h1 and to a 375 px screen, and screenshot.
# Usage: console/tests/run.sh HUB_BINARY   (node, npm and chromium on the
# machine; CHROMIUM names another browser binary). Screenshots go to
# $CONSOLE_ARTEFACTS (default /var/tmp/console-artefacts); the page load
# times over loopback are printed. Ends with
# `console stories: N passed, M failed`; exits 1 unless M is 0.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
hub="${1:?the hub binary}"
port="${CONSOLE_PORT:-18767}"
base="http://127.0.0.1:$port"
artefacts="${CONSOLE_ARTEFACTS:-/var/tmp/console-artefacts}"
work="$(mktemp -d)"
# The operator's break-glass secret, for this run only: the operator story
# mints a database operator token with it and signs in with that token.
ops_secret="$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')"
HUB_LISTEN="127.0.0.1:$port" HUB_DATA_DIR="$work" HUB_QUIC_LISTEN=off ADMIN_OPS_TOKEN="$ops_secret" \
    "$hub" serve --dev >"$work/hub.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 1 100); do
    curl -sf "$base/ready" >/dev/null && break
    sleep 0.1
done
if ! curl -sf "$base/ready" >/dev/null; then
    echo "console: the hub did not become ready on $base; its log:" >&2
    cat "$work/hub.log" >&2
    exit 1
fi

# playwright-core and axe-core exactly as package-lock.json pins them.
(cd "$here" && npm ci --no-audit --no-fund)
rm -rf "$artefacts"
mkdir -p "$artefacts"
status=0
CONSOLE_BREAK_GLASS="$ops_secret" node "$here/stories.mjs" "$base" "$artefacts" || status=$?
if [ "$status" -ne 0 ]; then
    echo "console: the hub's log (last 40 lines):" >&2
    tail -n 40 "$work/hub.log" >&2
fi
echo "console: screenshots in $artefacts"
exit "$status"
