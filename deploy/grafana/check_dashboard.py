#!/usr/bin/env python3
"""Checks deploy/grafana/weft-dashboard.json: well-formed panels, and (with --server, a
built `weft`) that every metric its queries name is one a running server exports. That
server runs the sample configuration deploy/weft.toml on a free loopback port (its users
file moved to a scratch directory), and the Dockerfile's HEALTHCHECK command is run
against it, so the image's health check is the one tested."""

import argparse
import base64
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

METRIC = re.compile(r"\b((?:weft|process)_[a-z_]+)\b")
START_TIME_LIMIT_SECONDS = 30


def fail(message):
    sys.exit(f"check_dashboard: {message}")


def panels_of(dashboard):
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def check_layout(dashboard):
    ids = set()
    for panel in panels_of(dashboard):
        if panel["id"] in ids:
            fail(f"panel id {panel['id']} used twice")
        ids.add(panel["id"])
        grid = panel["gridPos"]
        if grid["x"] < 0 or grid["x"] + grid["w"] > 24:
            fail(f"panel {panel['title']!r} does not fit the 24 columns")
        if panel["type"] != "row" and not panel.get("targets"):
            fail(f"panel {panel['title']!r} has no query")


def queried_metrics(dashboard):
    names = set()
    for panel in panels_of(dashboard):
        for target in panel.get("targets", []):
            names.update(METRIC.findall(target["expr"]))
    return names


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def healthcheck_command(port):
    """The Dockerfile's HEALTHCHECK CMD, aimed at `port`."""
    text = open("deploy/Dockerfile").read().replace("\\\n", " ")
    match = re.search(r"^HEALTHCHECK .*? CMD (\[.*\])\s*$", text, re.MULTILINE)
    if not match:
        fail("no HEALTHCHECK CMD in exec form in deploy/Dockerfile")
    command = json.loads(match.group(1))
    return [part.replace("/11222", f"/{port}") for part in command]


def exported_metrics(weft):
    """Starts `weft` with the sample configuration; the metric names it exports."""
    scratch = tempfile.mkdtemp(prefix="weft-deploy-check-")
    users = os.path.join(scratch, "users.toml")
    config = os.path.join(scratch, "weft.toml")
    sample = open("deploy/weft.toml").read()
    if "/var/lib/weft/users.toml" not in sample:
        fail("deploy/weft.toml no longer names /var/lib/weft/users.toml")
    open(config, "w").write(sample.replace("/var/lib/weft/users.toml", users))
    password = base64.b64encode(os.urandom(12)).decode()
    subprocess.run(
        [weft, "user", "create", "checker", "--groups", "admin", "--users-file", users],
        env={**os.environ, "WEFT_USER_PASSWORD": password},
        check=True,
        capture_output=True,
    )
    port = free_port()
    log = open(os.path.join(scratch, "weft.log"), "w")
    server = subprocess.Popen(
        [weft, "server", "--config", config, "--bind", f"127.0.0.1:{port}",
         "--data-dir", os.path.join(scratch, "data")],
        cwd=scratch, stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + START_TIME_LIMIT_SECONDS
        while True:
            if server.poll() is not None:
                fail(f"the server with deploy/weft.toml exited: {open(log.name).read()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    fail("the server did not listen in time")
                time.sleep(0.1)
        health = subprocess.run(healthcheck_command(port), timeout=10)
        if health.returncode != 0:
            fail("the Dockerfile's HEALTHCHECK command failed against a healthy server")
        token = base64.b64encode(f"checker:{password}".encode()).decode()
        headers = {"Authorization": f"Basic {token}"}
        # A request of each kind, so that latency series exist too.
        put = urllib.request.Request(
            f"http://127.0.0.1:{port}/rest/v2/caches/default/k", data=b"v",
            method="PUT", headers=headers)
        urllib.request.urlopen(put, timeout=10).read()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers=headers)
        text = urllib.request.urlopen(request, timeout=10).read().decode()
    finally:
        server.terminate()
        server.wait(timeout=30)
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            names.add(name)
            if kind == "histogram":
                names.update({f"{name}_bucket", f"{name}_sum", f"{name}_count"})
    return names


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dashboard")
    parser.add_argument("--server", help="a built weft binary to check the metric names against")
    args = parser.parse_args()
    dashboard = json.load(open(args.dashboard))
    check_layout(dashboard)
    wanted = queried_metrics(dashboard)
    print(f"  {sum(1 for p in panels_of(dashboard) if p['type'] != 'row')} panels, "
          f"{len(wanted)} metrics queried")
    if args.server:
        exported = exported_metrics(os.path.abspath(args.server))
        missing = sorted(wanted - exported)
        if missing:
            fail(f"the dashboard queries metrics the server does not export: {missing}")
        print("  every queried metric is exported; the image's HEALTHCHECK passes")


if __name__ == "__main__":
    main()
