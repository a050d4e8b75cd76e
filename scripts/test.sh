#!/usr/bin/env bash
# Runs Flotilla's whole test suite: installs nats-server if missing, builds every binary (the
# end-to-end tests run them as processes), then runs every test in the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_cargo
ensure_nats_server
ensure_nats_server_current
ensure_kubernetes_validate
command -v nats-server >/dev/null 2>&1 || export PATH="$PATH:/usr/sbin"
echo "== nats-server $(nats-server --version 2>&1 | head -1), and $("$FLOTILLA_NATS_SERVER_CURRENT" --version 2>&1 | head -1) for the attack suite"
cargo build --workspace --bins
cargo test --workspace "$@"
