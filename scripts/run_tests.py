#!/usr/bin/env python3
"""Runs every test binary of the workspace, two at a time.

`cargo test` runs one test binary after another, and most of their time is spent waiting
(leases, grace periods, processes starting), not computing: on two cores, two binaries side by
side take about half the time. Two `cargo test` runs over halves of the workspace would resolve
features differently from the whole workspace and rebuild the dependencies, so the binaries are
built once by `cargo test --workspace --no-run` and run here the way cargo runs them: from their
package's directory, with cargo's environment. The longest binaries start first. Each binary's
output is printed in one piece when it ends, then the doc tests run, then a summary names every
binary that failed.

Usage: run_tests.py [CARGO TEST ARGS] [-- TEST BINARY ARGS]
"""

import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

LANES = int(os.environ.get("FLOTILLA_TEST_LANES", "2"))

# Binaries known to take long (seconds, measured on the 2-core machine), started first so the
# lanes end together; the rest run in build order.
SLOW = {
    "ha": 84,
    "controllers": 86,
    "spokes": 78,
    "surface": 62,
    "revocation": 48,
    "e2e_addons": 48,
    "e2e_multiple_hubs": 30,
    "e2e": 34,
    "registration": 29,
    "security": 27,
    "chaos": 25,
    "scenarios": 24,
    "e2e_rollout": 24,
    "compose": 22,
    "service_accounts": 20,
    "multiple_hubs": 18,
    "operator_mode": 18,
}


def split_args(argv):
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, []


def build(cargo_args):
    """Builds every test binary; returns (name, kind, executable, package dir, package)."""
    cmd = [
        "cargo",
        "test",
        "--workspace",
        "--no-run",
        "--message-format=json-render-diagnostics",
    ] + [a for a in cargo_args if a != "--no-fail-fast"]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(proc.returncode)
    binaries = []
    for line in proc.stdout.splitlines():
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        if not msg.get("profile", {}).get("test"):
            continue
        target = msg["target"]
        manifest = msg["manifest_path"]
        package = msg["package_id"]
        binaries.append(
            {
                "name": target["name"],
                "kind": target["kind"][0],
                "src": target["src_path"],
                "executable": msg["executable"],
                "dir": os.path.dirname(manifest),
                "package": package,
            }
        )
    return binaries


def package_env(b):
    """What cargo sets for a test binary it runs."""
    env = dict(os.environ)
    env["CARGO_MANIFEST_DIR"] = b["dir"]
    env["CARGO_MANIFEST_PATH"] = os.path.join(b["dir"], "Cargo.toml")
    # package_id looks like "path+file:///work/main/hub#flotilla-hub@0.1.0".
    spec = b["package"].rsplit("#", 1)[-1]
    name, _, version = spec.partition("@")
    if not version:
        name, version = os.path.basename(b["dir"]), spec
    env["CARGO_PKG_NAME"] = name
    env["CARGO_PKG_VERSION"] = version
    env["CARGO_CRATE_NAME"] = b["name"].replace("-", "_")
    return env


print_lock = threading.Lock()


def run(b, test_args):
    rel = os.path.relpath(b["src"], os.path.dirname(b["dir"]))
    started = time.monotonic()
    proc = subprocess.run(
        [b["executable"]] + test_args,
        cwd=b["dir"],
        env=package_env(b),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    )
    took = time.monotonic() - started
    with print_lock:
        print(f"     Running {rel} ({os.path.relpath(b['executable'])}), {took:.1f} s")
        print(proc.stdout, flush=True)
    return rel, proc.returncode


def main():
    cargo_args, test_args = split_args(sys.argv[1:])
    binaries = build(cargo_args)
    binaries.sort(key=lambda b: -SLOW.get(b["name"], 0))
    started = time.monotonic()
    print(f"== {len(binaries)} test binaries, {LANES} at a time", flush=True)
    with ThreadPoolExecutor(max_workers=LANES) as pool:
        results = list(pool.map(lambda b: run(b, test_args), binaries))
    print(f"== test binaries done in {time.monotonic() - started:.0f} s", flush=True)
    doc = subprocess.run(["cargo", "test", "--workspace", "--doc"] + cargo_args + ["--"] + test_args)
    failed = [rel for rel, code in results if code != 0]
    if doc.returncode != 0:
        failed.append("doc tests")
    if failed:
        print("== failed: " + ", ".join(failed), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
