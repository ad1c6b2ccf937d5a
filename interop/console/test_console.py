"""The web console (/console/) in a real browser: Debian's headless Chromium driven by
Playwright, against release `weft server` processes. Each test drives the page as a user
would, checks the DOM, checks what the server then holds through another protocol, and keeps
a screenshot of every page it visits (target/console-screenshots)."""

import base64
import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request
from email.message import Message

import pytest
import redis
from playwright.sync_api import expect

from console_browser import screenshot
from weft_process import WEFT_BIN, start_weft, stop, stop_weft_cleanly, wait_for_port
from with_weft_cluster import free_port, free_udp_and_tcp_port, wait_until_formed


def console(port: int, fragment: str = "") -> str:
    return f"http://127.0.0.1:{port}/console/{fragment}"


def rest(port: int, method: str, path: str, body: bytes | None = None,
         headers: dict | None = None) -> tuple[int, bytes, "Message"]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method=method,
                                     headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read(), response.headers
    except urllib.error.HTTPError as error:
        return error.code, error.read(), error.headers


def cli(port: int, *commands: str) -> str:
    argv = [str(WEFT_BIN), "cli", "--server", f"127.0.0.1:{port}"]
    for command in commands:
        argv += ["-c", command]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_files_are_served_with_a_strict_policy(weft_port):
    status, _, headers = rest(weft_port, "GET", "/console")
    assert status == 200  # urllib follows the redirect to /console/
    status, body, headers = rest(weft_port, "GET", "/console/")
    assert status == 200 and b"<title>Weft console</title>" in body
    assert headers["Content-Type"].startswith("text/html")
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert headers["X-Frame-Options"] == "DENY"
    status, _, again = rest(weft_port, "GET", "/console/console.js", headers={"If-None-Match": headers_etag(weft_port)})
    assert status == 304
    assert rest(weft_port, "GET", "/console/nothing.js")[0] == 404
    assert rest(weft_port, "POST", "/console/")[0] == 405


def headers_etag(port: int) -> str:
    return rest(port, "GET", "/console/console.js")[2]["ETag"]


def test_caches_page_shows_what_the_cli_wrote(weft_port, page):
    cli(weft_port, "put default greeting hello", "put default counter 41")
    page.goto(console(weft_port))
    row = page.locator('#caches tr[data-cache="default"]')
    expect(row).to_be_visible()
    expect(page.locator('#caches tr[data-cache="second"]')).to_be_visible()
    # Entries, as the cache's statistics count them.
    entries = int(row.locator("td").nth(3).inner_text())
    assert entries >= 2
    expect(page.locator("#server")).to_contain_text("Weft")
    screenshot(page, "01-caches")


def test_browse_search_put_and_delete_entries(weft_port, page):
    client = redis.Redis(port=weft_port)
    client.set("apple", "red")
    client.set("banana", "yellow")
    client.set(b"raw\xff", b"\x00\x01")  # not UTF-8: shown as hex, still deletable
    page.goto(console(weft_port, "#/caches/default"))
    expect(page.locator("#cache-name")).to_have_text("default")
    expect(page.locator('#entries tr[data-key="apple"]')).to_contain_text("red")
    expect(page.locator('#entries tr[data-key="0x726177ff"]')).to_contain_text("0x0001")
    screenshot(page, "02-cache-entries")

    # Search by key: found, and not found.
    page.fill("#lookup input[name=key]", "banana")
    page.click("#lookup button")
    expect(page.locator("#lookup-value")).to_have_text("yellow")
    page.fill("#lookup input[name=key]", "no-such-key")
    page.click("#lookup button")
    expect(page.locator("[data-missing]")).to_contain_text("No entry for no-such-key")

    # Filter the listing.
    page.fill("#filter", "app")
    expect(page.locator("#entries tbody tr")).to_have_count(1)
    page.fill("#filter", "")

    # Put, with a lifespan: the server holds it, with that lifespan.
    page.fill("#put input[name=key]", "cherry")
    page.fill("#put input[name=value]", "dark red")
    page.fill("#put input[name=lifespan]", "300")
    page.click("#put button")
    expect(page.locator('#entries tr[data-key="cherry"]')).to_contain_text("dark red")
    assert client.get("cherry") == b"dark red"
    assert 0 < client.ttl("cherry") <= 300

    # Delete: a text key and the binary one.
    page.locator('#entries tr[data-key="apple"] button').click()
    expect(page.locator('#entries tr[data-key="apple"]')).to_have_count(0)
    assert client.get("apple") is None
    page.locator('#entries tr[data-key="0x726177ff"] button').click()
    expect(page.locator('#entries tr[data-key="0x726177ff"]')).to_have_count(0)
    assert client.get(b"raw\xff") is None
    assert client.get("banana") == b"yellow"


def test_configuration_statistics_create_and_remove(weft_port, page):
    page.goto(console(weft_port, "#/caches"))
    page.fill("#create-cache input[name=name]", "console-made")
    page.fill("#create-cache textarea[name=config]",
              json.dumps({"local-cache": {"memory": {"max-count": "500"}}}))
    page.click("#create-cache button[type=submit]")
    expect(page.locator("#cache-name")).to_have_text("console-made")
    status, body, _ = rest(weft_port, "GET", "/rest/v2/caches/console-made?action=config")
    assert status == 200 and b"500" in body

    page.click("text=Configuration")
    expect(page.locator("#configuration")).to_contain_text("max-count")
    screenshot(page, "03-cache-configuration")
    page.click("text=Statistics")
    expect(page.locator("#statistics")).to_contain_text("current_number_of_entries")
    screenshot(page, "04-cache-statistics")

    # A bad configuration is refused with the server's reason, and nothing is created.
    page.goto(console(weft_port, "#/caches"))
    page.fill("#create-cache input[name=name]", "broken")
    page.fill("#create-cache textarea[name=config]", '{"local-cache": {"memory": {"max-count": "lots"}}}')
    page.click("#create-cache button[type=submit]")
    expect(page.locator("#notice.error")).to_be_visible()
    assert rest(weft_port, "HEAD", "/rest/v2/caches/broken")[0] == 404

    page.goto(console(weft_port, "#/caches/console-made"))
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#delete-cache")
    expect(page.locator('#caches tr[data-cache="default"]')).to_be_visible()
    assert rest(weft_port, "HEAD", "/rest/v2/caches/console-made")[0] == 404


def test_metrics_page_draws_live_charts(weft_port, page):
    page.goto(console(weft_port, "#/metrics"))
    expect(page.locator("#chart-operations canvas")).to_be_visible()

    def drawn(chart: str) -> bool:
        return bool(re.search(r"[1-9]", page.locator(f"#chart-{chart} .now").inner_text()))

    # Load (REST writes, which are timed and counted) while the page samples: the request
    # and write rates must show up as numbers.
    deadline = time.monotonic() + 20
    i = 0
    while time.monotonic() < deadline and not (drawn("requests") and drawn("operations")):
        for _ in range(100):
            rest(weft_port, "PUT", f"/rest/v2/caches/default/load-{i % 500}", body=b"v")
            i += 1
        time.sleep(0.2)
    assert drawn("requests") and drawn("operations")
    # A few more samples, so that the screenshot shows lines.
    # (Polled from here: the page's Content-Security-Policy forbids the string evaluation
    # that wait_for_function uses.)
    deadline = time.monotonic() + 20
    while page.evaluate("() => samples.length") < 5 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert page.evaluate("() => samples.length") >= 5
    expect(page.locator("#chart-memory .legend")).to_contain_text("process (RSS)")
    # Something was drawn: the canvas is not blank.
    blank = page.evaluate("""() => {
        const c = document.querySelector('#chart-requests canvas');
        const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        return data.every(v => v === 0);
    }""")
    assert not blank
    screenshot(page, "05-metrics")


def test_single_node_cluster_page(weft_port, page):
    page.goto(console(weft_port, "#/cluster"))
    expect(page.locator("#cluster-health [data-status]")).to_have_text("HEALTHY")
    expect(page.locator("#members tbody tr")).to_have_count(1)
    expect(page.locator("#no-clustered-caches")).to_be_visible()
    screenshot(page, "06-cluster-single")


@pytest.fixture(scope="module")
def secured_port(tmp_path_factory):
    directory = tmp_path_factory.mktemp("console-users")
    users = directory / "users.toml"
    subprocess.run([str(WEFT_BIN), "user", "create", "ada", "--groups", "admin", "--users-file", str(users)],
                   check=True, capture_output=True, env=dict(os.environ, WEFT_USER_PASSWORD="lovelace-1815"))
    config = directory / "weft.toml"
    config.write_text('[security]\nusers-file = "users.toml"\n')
    process, port = start_weft(config)
    try:
        yield port
    finally:
        stop_weft_cleanly(process)


def test_login_when_the_server_has_users(secured_port, page):
    # The files are public; the data is not. Scripts get no browser password prompt.
    assert rest(secured_port, "GET", "/console/")[0] == 200
    status, _, headers = rest(secured_port, "GET", "/rest/v2/caches",
                              headers={"X-Requested-With": "XMLHttpRequest"})
    assert status == 401 and "WWW-Authenticate" not in headers
    assert "WWW-Authenticate" in rest(secured_port, "GET", "/rest/v2/caches")[2]

    page.goto(console(secured_port))
    expect(page.locator("#login")).to_be_visible()
    screenshot(page, "07-login")
    page.fill("#login input[name=user]", "ada")
    page.fill("#login input[name=password]", "wrong")
    page.click("#login button[type=submit]")
    expect(page.locator("#login-error")).to_have_text("Wrong user or password.")
    page.fill("#login input[name=password]", "lovelace-1815")
    page.click("#login button[type=submit]")
    expect(page.locator('#caches tr[data-cache="default"]')).to_be_visible()
    expect(page.locator("#user")).to_have_text("as ada")
    page.click("#logout")
    expect(page.locator("#login")).to_be_visible()


CLUSTER_CONFIG = """
[caches.default]
mode = "distributed"
owners = 2
"""


def start_node(index: int, port: int, cluster_port: int, seeds: str, config, secret: str):
    argv = [str(WEFT_BIN), "server", "--bind", f"127.0.0.1:{port}", "--cluster-listen",
            f"127.0.0.1:{cluster_port}", "--node-name", f"console-{index}", "--join", seeds,
            "--config", str(config)]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, WEFT_CLUSTER_SECRET=secret))


def test_cluster_members_segments_and_a_rebalance(tmp_path, page):
    config = tmp_path / "cluster.toml"
    config.write_text(CLUSTER_CONFIG)
    ports = [free_port() for _ in range(3)]
    cluster_ports = [free_udp_and_tcp_port() for _ in range(3)]
    seeds = ",".join(f"127.0.0.1:{p}" for p in cluster_ports)
    secret = base64.b16encode(os.urandom(8)).decode()
    processes = []
    try:
        for i in range(2):
            processes.append(start_node(i, ports[i], cluster_ports[i], seeds, config, secret))
        for port, process in zip(ports[:2], processes):
            wait_for_port(port, process=process)
        wait_until_formed(ports[:2])
        client = redis.Redis(port=ports[0])
        pipeline = client.pipeline(transaction=False)
        for i in range(20_000):
            pipeline.set(f"key-{i}", "x" * 64)
        pipeline.execute()

        page.goto(console(ports[0], "#/cluster"))
        expect(page.locator("#members tbody tr")).to_have_count(2)
        section = page.locator('section[data-cache="default"]')
        expect(section.locator(".segments span")).to_have_count(256)
        screenshot(page, "08-cluster-two-members")

        # A third member joins: the page follows the rebalance to its end by itself.
        processes.append(start_node(2, ports[2], cluster_ports[2], seeds, config, secret))
        wait_for_port(ports[2], process=processes[2])
        expect(page.locator("#members tbody tr")).to_have_count(3, timeout=60_000)
        expect(section.locator(".legend")).to_contain_text("console-2", timeout=60_000)
        expect(section.locator(".rebalance")).to_have_text("No rebalance under way.", timeout=60_000)
        expect(section.locator("[role=progressbar]")).to_have_attribute("aria-valuenow", "100")
        # Every member is the primary of some segments, and each segment has two owners.
        legend = section.locator(".legend").inner_text()
        for i in range(3):
            match = re.search(rf"console-{i}: (\d+) primary, (\d+) copies", legend)
            assert match and int(match.group(1)) > 0, legend
        copies = sum(int(n) for n in re.findall(r"(\d+) copies", legend))
        assert copies == 2 * 256, legend
        expect(page.locator("#cluster-health [data-status]")).to_have_text("HEALTHY")
        screenshot(page, "09-cluster-after-rebalance")
        assert client.get("key-19999") == b"x" * 64
    finally:
        for process in processes:
            stop(process)
