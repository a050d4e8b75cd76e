#!/usr/bin/env bash
# Flotilla demo: NATS with JetStream, the hub (auto-accept), a simulated fleet, then the
# hello-work-demo ManifestWork rolled out to every cluster, an add-on, a policy, and a GitRepo whose
# new commit rolls out. Runs until Ctrl-C (or exits after showing with --once).
#
#   ./scripts/demo.sh [--clusters N] [--once]
#
# Ports (override with env): NATS 4222, gRPC 50051, metrics 9464, cluster proxy 6443,
# dashboard 8080 (FLOTILLA_DEMO_{NATS,GRPC,METRICS,PROXY,DASHBOARD}_PORT).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

CLUSTERS=10
ONCE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --clusters) CLUSTERS="$2"; shift 2 ;;
    --once) ONCE=1; shift ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 64 ;;
  esac
done
NATS_PORT="${FLOTILLA_DEMO_NATS_PORT:-4222}"
GRPC_PORT="${FLOTILLA_DEMO_GRPC_PORT:-50051}"
METRICS_PORT="${FLOTILLA_DEMO_METRICS_PORT:-9464}"
PROXY_PORT="${FLOTILLA_DEMO_PROXY_PORT:-6443}"
DASHBOARD_PORT="${FLOTILLA_DEMO_DASHBOARD_PORT:-8080}"

ensure_cargo
ensure_nats_server
command -v nats-server >/dev/null 2>&1 || export PATH="$PATH:/usr/sbin"
if [ -z "${FLOTILLA_DEMO_SKIP_BUILD:-}" ]; then
  echo "== building Flotilla"
  cargo build --workspace --bins
fi
BIN="$(pwd)/target/debug"

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in "$NATS_PORT" "$GRPC_PORT" "$METRICS_PORT" "$PROXY_PORT" "$DASHBOARD_PORT"; do
  if port_busy "$p"; then
    echo "error: port $p is in use (another demo or a nats-server service?). Stop it or set FLOTILLA_DEMO_*_PORT." >&2
    exit 1
  fi
done

RUN="$(pwd)/.demo"
rm -rf "$RUN"; mkdir -p "$RUN"
PIDS=()
cleanup() {
  echo "== stopping the demo"
  # Newest first, each awaited: the hub hands its shards over while NATS is still there.
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    kill "${PIDS[i]}" 2>/dev/null || true
    wait "${PIDS[i]}" 2>/dev/null || true
  done
}
trap cleanup EXIT INT TERM

echo "== starting nats-server (JetStream) on :$NATS_PORT"
nats-server -js -a 127.0.0.1 -p "$NATS_PORT" -sd "$RUN/jetstream" >"$RUN/nats.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do port_busy "$NATS_PORT" && break; sleep 0.1; done

# A 1 GiB status stream: JetStream reserves it on disk, and the 8 GiB default needs 11 GB free.
echo "== starting flotilla-hub (auto-accept) — gRPC :$GRPC_PORT, metrics :$METRICS_PORT"
"$BIN/flotilla-hub" --nats-url "nats://127.0.0.1:$NATS_PORT" --grpc-listen "127.0.0.1:$GRPC_PORT" \
  --metrics-listen "127.0.0.1:$METRICS_PORT" --auto-accept \
  --cluster-proxy-listen "127.0.0.1:$PROXY_PORT" --dashboard-listen "127.0.0.1:$DASHBOARD_PORT" \
  --status-stream-max-bytes $((1 << 30)) --gitops-file-root "$RUN/git" \
  --addon-hub-url "nats://127.0.0.1:$NATS_PORT" >"$RUN/hub.log" 2>&1 &
PIDS+=($!)

echo "== starting flotilla-sim with $CLUSTERS simulated clusters"
"$BIN/flotilla-sim" --nats-url "nats://127.0.0.1:$NATS_PORT" --clusters "$CLUSTERS" >"$RUN/sim.log" 2>&1 &
PIDS+=($!)

export FLOTILLA_HUB="http://127.0.0.1:$GRPC_PORT"
echo "== waiting for $CLUSTERS clusters to be accepted and Available"
for _ in $(seq 120); do
  n=$("$BIN/flotilla" get clusters 2>/dev/null | awk 'NR>1 && $2=="true" && $3=="True"' | wc -l || true)
  [ "$n" -ge "$CLUSTERS" ] && break
  sleep 0.5
done
[ "$n" -ge "$CLUSTERS" ] || { echo "error: only $n of $CLUSTERS clusters accepted and Available after 60 s (logs: $RUN)" >&2; exit 1; }
echo
echo "\$ flotilla get clusters"
"$BIN/flotilla" get clusters
echo
echo "\$ flotilla get clustersets"
"$BIN/flotilla" get clustersets
n=$("$BIN/flotilla" get clusters | awk 'NR>1 && $2=="true" && $3=="True"' | wc -l)
if [ "$n" -lt "$CLUSTERS" ]; then
  echo "error: only $n of $CLUSTERS clusters became Available; logs are in $RUN" >&2
  exit 1
fi
echo
echo "== rolling out the hello-work-demo ManifestWork to every cluster"
for i in $(seq 1 "$CLUSTERS"); do
  c=$(printf 'sim-%04d' "$i")
  sed "s/CLUSTER/$c/" examples/hello-work.yaml
  echo "---"
done | "$BIN/flotilla" apply -f - >/dev/null
for _ in $(seq 120); do
  n=$("$BIN/flotilla" get works 2>/dev/null | awk 'NR>1 && $4=="True" && $5=="True"' | wc -l || true)
  [ "$n" -ge "$CLUSTERS" ] && break
  sleep 0.5
done
[ "$n" -ge "$CLUSTERS" ] || { echo "error: only $n of $CLUSTERS works Applied and Available after 60 s (logs: $RUN)" >&2; exit 1; }
echo "\$ flotilla get works"
"$BIN/flotilla" get works
n=$("$BIN/flotilla" get works | awk 'NR>1 && $4=="True" && $5=="True"' | wc -l)
if [ "$n" -lt "$CLUSTERS" ]; then
  echo "error: only $n of $CLUSTERS works became Applied and Available; logs are in $RUN" >&2
  exit 1
fi
echo
echo "\$ flotilla describe work hello-work-demo --cluster sim-0001"
"$BIN/flotilla" describe work hello-work-demo --cluster sim-0001
echo
echo "== kubectl to a simulated cluster through the hub's cluster proxy (docs/proxy.md)"
KUBECONFIG_DEMO="$RUN/sim-0001.kubeconfig"
"$BIN/flotilla" kubeconfig sim-0001 --server "http://127.0.0.1:$PROXY_PORT" >"$KUBECONFIG_DEMO"
if command -v kubectl >/dev/null 2>&1; then
  echo "\$ kubectl --kubeconfig <(flotilla kubeconfig sim-0001) get deployments -A"
  kubectl --kubeconfig "$KUBECONFIG_DEMO" get deployments -A
  echo "\$ kubectl --kubeconfig <(flotilla kubeconfig sim-0001) create configmap through-the-hub --from-literal=hello=edge"
  kubectl --kubeconfig "$KUBECONFIG_DEMO" create configmap through-the-hub --from-literal=hello=edge
  echo "\$ kubectl --kubeconfig <(flotilla kubeconfig sim-0001) get configmap through-the-hub -o jsonpath={.data.hello}"
  got=$(kubectl --kubeconfig "$KUBECONFIG_DEMO" get configmap through-the-hub -o jsonpath='{.data.hello}')
  echo "$got"
  [ "$got" = edge ] || { echo "error: the ConfigMap read back through the proxy holds '$got' (logs: $RUN)" >&2; exit 1; }
else
  echo "(kubectl is not installed: the kubeconfig is $KUBECONFIG_DEMO)"
  echo "\$ flotilla proxy sim-0001 get deployments"
  "$BIN/flotilla" proxy sim-0001 get deployments
fi
echo
echo "\$ flotilla apply -f - (a binding and a placement: the 3 clusters with the most allocatable and available CPU)"
"$BIN/flotilla" apply -f - <<'YAML'
apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSetBinding
metadata:
  name: default
  namespace: default
spec:
  clusterSet: default
---
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata:
  name: demo
  namespace: default
spec:
  numberOfClusters: 3
  prioritizerPolicy:
    configurations:
      - scoreCoordinate:
          builtIn: ResourceAllocatableCPU
        weight: 2
      - scoreCoordinate:
          type: AddOn
          addOn:
            resourceName: resource-usage-score
            scoreName: cpuAvailable
YAML
echo
echo "\$ flotilla get placements -n default"
"$BIN/flotilla" get placements -n default
echo
echo "\$ flotilla get decisions demo -n default"
"$BIN/flotilla" get decisions demo -n default
echo
echo "== installing the fleet-metrics add-on on the placement's clusters (examples/addons/)"
for f in template config addon; do cat "examples/addons/fleet-metrics-$f.yaml"; echo "---"; done |
  "$BIN/flotilla" apply -f -
for _ in $(seq 120); do
  n=$("$BIN/flotilla" get addons 2>/dev/null | awk 'NR>1 && $1=="fleet-metrics" && $3=="True"' | wc -l || true)
  [ "$n" -ge 3 ] && break
  sleep 0.5
done
echo "\$ flotilla get addons"
"$BIN/flotilla" get addons
n=$("$BIN/flotilla" get addons | awk 'NR>1 && $1=="fleet-metrics" && $3=="True"' | wc -l)
if [ "$n" -lt 3 ]; then
  echo "error: only $n of 3 fleet-metrics add-ons became Available; logs are in $RUN" >&2
  exit 1
fi
echo
echo "\$ flotilla addon status fleet-metrics --watch   (25% of the clusters at a time)"
timeout 120 "$BIN/flotilla" addon status fleet-metrics --watch
echo
echo "== governance: policy-collection's namespace policy, enforced on every cluster (examples/policies/)"
echo "\$ sed 's/remediationAction: inform/remediationAction: enforce/' examples/policies/namespace.yaml | flotilla apply -f -"
sed 's/remediationAction: inform/remediationAction: enforce/' examples/policies/namespace.yaml |
  "$BIN/flotilla" apply -f -
echo "\$ flotilla policy status policy-namespace --watch"
timeout 120 "$BIN/flotilla" policy status policy-namespace --watch
echo "\$ flotilla get policies"
"$BIN/flotilla" get policies
echo
echo "== GitOps: a Git repository's commits rolled out one cluster at a time (examples/gitops/, docs/gitops.md)"
SHOP="$RUN/git/shop"
mkdir -p "$RUN/git" && cp -r examples/gitops/repo "$SHOP"
git_shop() { git -C "$SHOP" -c user.name=Demo -c user.email=demo@flotilla.invalid "$@" >/dev/null; }
git_shop init -q -b main && git_shop add -A && git_shop commit -q -m "shop: web and settings"
"$BIN/flotilla" apply -f examples/gitops/setup.yaml
sed "s|file:///srv/git/shop|file://$SHOP|" examples/gitops/gitrepo.yaml | "$BIN/flotilla" apply -f -
# Ready: every bundle's works available on every cluster.
gitrepo_ready() {
  for _ in $(seq 240); do
    "$BIN/flotilla" get gitrepos -n default 2>/dev/null |
      awk -v c="$1" 'NR>1 && $1=="shop" && $4==c && $NF=="Ready" {f=1} END {exit !f}' && return 0
    sleep 0.5
  done
  echo "error: GitRepo shop did not reach Ready at commit $1; logs are in $RUN" >&2
  "$BIN/flotilla" describe gitrepo shop >&2 || true
  exit 1
}
gitrepo_ready "$(git -C "$SHOP" rev-parse --short=7 HEAD)"
echo "\$ flotilla get gitrepos -n default"
"$BIN/flotilla" get gitrepos -n default
echo "\$ sed -i 's/currency: EUR/currency: CHF/' apps/settings/settings.yaml && git commit -am 'settings: CHF'"
sed -i 's/currency: EUR/currency: CHF/' "$SHOP/apps/settings/settings.yaml"
git_shop commit -q -am "settings: CHF"
echo "\$ flotilla gitrepo sync shop --wait"
"$BIN/flotilla" gitrepo sync shop --wait
gitrepo_ready "$(git -C "$SHOP" rev-parse --short=7 HEAD)"
echo "\$ flotilla get gitrepos shop -n default --clusters"
"$BIN/flotilla" get gitrepos shop -n default --clusters
echo
echo "== the web dashboard: http://127.0.0.1:$DASHBOARD_PORT/ (docs/dashboard.md)"
if command -v curl >/dev/null 2>&1; then
  page=$(curl -sf "http://127.0.0.1:$DASHBOARD_PORT/clusters?q=sim-0001") ||
    { echo "error: the dashboard did not answer (logs: $RUN)" >&2; exit 1; }
  grep -q 'data-cluster="sim-0001"' <<<"$page" ||
    { echo "error: the dashboard's clusters view does not list sim-0001 (logs: $RUN)" >&2; exit 1; }
  echo "$(grep -o '<p class="count"[^<]*' <<<"$page" | sed 's/.*>//') on /clusters?q=sim-0001"
  page=$(curl -sf "http://127.0.0.1:$DASHBOARD_PORT/gitrepos/default/shop") ||
    { echo "error: the dashboard's GitRepo page did not answer (logs: $RUN)" >&2; exit 1; }
  grep -q "settings: CHF" <<<"$page" ||
    { echo "error: the dashboard's GitRepo page does not show the commit delivered (logs: $RUN)" >&2; exit 1; }
  echo "/gitrepos/default/shop: commit \"settings: CHF\" delivered"
fi
if [ "$ONCE" = 1 ]; then exit 0; fi
cat <<MSG

The fleet is running. Open the dashboard: http://127.0.0.1:$DASHBOARD_PORT/
In another terminal:
  export FLOTILLA_HUB=$FLOTILLA_HUB
  $BIN/flotilla get clusters -o yaml
  $BIN/flotilla label sim-0001 tier=gold
  $BIN/flotilla taint sim-0002 maintenance=true:NoSelect
  $BIN/flotilla watch clusters
  kubectl --kubeconfig <($BIN/flotilla kubeconfig sim-0002 --server http://127.0.0.1:$PROXY_PORT) get configmaps -A --watch
  $BIN/flotilla delete work hello-work-demo --cluster sim-0001
  $BIN/flotilla describe placement demo -n default
  $BIN/flotilla get addonplacementscores          # fleet-metrics' nodeCount and workCount too
  $BIN/flotilla get addons -o yaml
  $BIN/flotilla describe policy policy-namespace
  $BIN/flotilla describe gitrepo shop; git -C $SHOP log --oneline   # then commit, and: $BIN/flotilla gitrepo sync shop
  $BIN/flotilla apply -f examples/policies/dev-baseline.yaml; $BIN/flotilla label sim-0001 environment=dev
  curl -s 127.0.0.1:$METRICS_PORT/metrics | grep flotilla_hub_clusters
Logs: $RUN/*.log. Press Ctrl-C to stop.
MSG
while true; do sleep 3600; done
