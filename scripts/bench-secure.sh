#!/usr/bin/env bash
# Measures the cost of secure mode: flotilla-load register and fanout with C clusters against a
# plain hub, a secure hub (operator mode, per-cluster credentials) and a secure hub over TLS.
# Usage: scripts/bench-secure.sh [CLUSTERS]   (release build; results as JSON lines on stdout)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_cargo
ensure_nats_server
command -v nats-server >/dev/null 2>&1 || export PATH="$PATH:/usr/sbin"
C=${1:-1000}
cargo build --release -q -p flotilla-hub -p flotilla-load
BIN=target/release
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
ulimit -n 20000 || true

run_mode() {
  local mode=$1 port=$2 grpc=$3
  local nats_pid hub_pid extra=() hub_flags=()
  case $mode in
    plain)
      nats-server -js -p "$port" -sd "$WORK/$mode-js" >"$WORK/$mode-nats.log" 2>&1 & nats_pid=$!
      ;;
    secure|secure-tls)
      local tls=(); [ "$mode" = secure-tls ] && tls=(--tls)
      "$BIN/flotilla-hub" init --dir "$WORK/$mode" --nats-listen "127.0.0.1:$port" "${tls[@]}" >/dev/null
      nats-server -c "$WORK/$mode/nats-server.conf" >"$WORK/$mode-nats.log" 2>&1 & nats_pid=$!
      hub_flags=(--secure-dir "$WORK/$mode")
      extra=(--bootstrap-creds "$WORK/$mode/bootstrap.creds")
      [ "$mode" = secure-tls ] && extra+=(--nats-ca "$WORK/$mode/tls/ca.pem")
      ;;
  esac
  PIDS+=("$nats_pid")
  sleep 1
  # With a CA (init --tls) every binary requires TLS: a nats:// URL is refused.
  local scheme=nats; [ "$mode" = secure-tls ] && scheme=tls
  "$BIN/flotilla-hub" --nats-url "$scheme://127.0.0.1:$port" --grpc-listen "127.0.0.1:$grpc" \
    --metrics-listen 127.0.0.1:0 --auto-accept "${hub_flags[@]}" >"$WORK/$mode-hub.log" 2>&1 & hub_pid=$!
  PIDS+=("$hub_pid")
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/"$grpc") 2>/dev/null && break; sleep 0.2; done
  echo "== $mode register" >&2
  "$BIN/flotilla-load" register --nats-url "$scheme://127.0.0.1:$port" --hub "http://127.0.0.1:$grpc" \
    --clusters "$C" --name-prefix "reg" "${extra[@]}" | tail -n 1 | sed "s/}\$/,\"mode\":\"$mode\"}/"
  echo "== $mode fanout" >&2
  "$BIN/flotilla-load" fanout --nats-url "$scheme://127.0.0.1:$port" --hub "http://127.0.0.1:$grpc" \
    --hub-pid "$hub_pid" --clusters "$C" --name-prefix "fan" "${extra[@]}" | tail -n 1 | sed "s/}\$/,\"mode\":\"$mode\"}/"
  kill "$hub_pid" "$nats_pid" 2>/dev/null || true
  wait "$hub_pid" "$nats_pid" 2>/dev/null || true
}

run_mode plain 24301 25301
run_mode secure 24302 25302
run_mode secure-tls 24303 25303
