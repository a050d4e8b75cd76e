#!/usr/bin/env bash
# Issue 43's loop: the election test (hub/tests/elections.rs) N times per nats-server version
# (2.9.10 from Debian and the current release), outside the suite. Prints every run's line and
# a summary: runs, failures, and the longest election, apply stall and new-hub start seen.
#   scripts/election-loop.sh [N]     (default 20)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_nats_server
ensure_nats_server_current
runs="${1:-20}"
# The whole workspace, as the suite builds it: one package alone would build its dependencies
# again with other features.
cargo build -q --workspace --bins --tests
log="$(mktemp)"
status=0
FLOTILLA_ELECTION_RUNS="$runs" cargo test -q --workspace --test elections -- --nocapture \
  >"$log" 2>&1 || status=$?
grep '^ELECTION' "$log" || true
awk '/^ELECTION/ {
  split($2, s, "="); v = s[2]; n[v]++
  for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[2] + 0 > max[v, kv[1]]) max[v, kv[1]] = kv[2] + 0 }
}
END {
  for (v in n) printf "server=%s runs=%d longest election_ms=%d longest_apply_ms=%d longest new_hub_serving_ms=%d longest renewal_gap_ms=%d\n",
    v, n[v], max[v, "election_ms"], max[v, "longest_apply_ms"], max[v, "new_hub_serving_ms"], max[v, "renewal_gap_ms"]
}' "$log"
if [ "$status" -ne 0 ]; then
  echo "FAILED (exit $status):" >&2
  sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -A4 'panicked at' >&2 || true
  echo "the test's last lines:" >&2
  tail -40 "$log" >&2
fi
rm -f "$log"
exit "$status"
