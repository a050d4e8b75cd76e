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
ensure_promtool
ensure_chromium
ensure_sshd
command -v nats-server >/dev/null 2>&1 || export PATH="$PATH:/usr/sbin"
echo "== nats-server $(nats-server --version 2>&1 | head -1), and $("$FLOTILLA_NATS_SERVER_CURRENT" --version 2>&1 | head -1) for the attack suite"
# A whole-suite build is done once: incremental caches would double the target dir (a clean
# clone's CI ran out of disk with them) and save nothing. A developer's own setting wins.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
cargo build --workspace --bins
# Every test binary is built once, then run two at a time (scripts/run_tests.py: most of a test
# binary's time is waiting, not computing), then the doc tests.
python3 scripts/run_tests.py "$@"
# The README's first command, end to end on a small fleet (NATS, the hub, simulated clusters, a
# work rollout, kubectl through the cluster proxy, a placement, the add-on and an enforced
# policy), on ports of its own.
echo "== the demo (scripts/demo.sh --once --clusters 3)"
FLOTILLA_DEMO_NATS_PORT=24222 FLOTILLA_DEMO_GRPC_PORT=25051 FLOTILLA_DEMO_METRICS_PORT=29464 FLOTILLA_DEMO_PROXY_PORT=26443 \
  FLOTILLA_DEMO_DASHBOARD_PORT=28080 \
  ./scripts/demo.sh --once --clusters 3
