#!/usr/bin/env bash
# Builds the device-core cdylib and uniffi-bindgen, generates the Python
# bindings into a temp dir and runs test_device_core.py against them.
# Usage: device-core/tests/python/run.sh [test file]   (honours CARGO_TARGET_DIR;
# the default test file is test_device_core.py, which needs no hub)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
# Two invocations on purpose: building device_core alone keeps its features
# (and so its artifact) the same as `cargo test -p device_core` builds.
cargo build --quiet --manifest-path "$root/Cargo.toml" -p device_core --lib
cargo build --quiet --manifest-path "$root/Cargo.toml" -p bindings --bin uniffi-bindgen
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
"$target/debug/uniffi-bindgen" generate --library "$target/debug/libdevice_core.so" \
    --language python --out-dir "$out" --no-format >/dev/null
cp "$target/debug/libdevice_core.so" "$out/"
cd "$out"
PYTHONPATH="$out" python3 "$here/${1:-test_device_core.py}"
