"""Real clients authenticating against a users file, over TLS and in plaintext: redis-py
(AUTH user pass, HELLO), redis-cli --user/--pass, python-binary-memcached (SASL PLAIN),
curl -u and http.client over HTTPS; wrong or missing credentials refused in each protocol's
words; an observer's writes refused in each protocol's words for a missing permission."""

import base64
import http.client
import shutil
import ssl
import subprocess

import bmemcached
import pytest
import redis

from conftest import PASSWORD, USER, VIEWER


def test_redis_py_authenticates_as_a_user(tls_files, weft_auth_port):
    # Proves redis-py's username/password (AUTH user pass, or HELLO 3 AUTH) is what lets a
    # client in, over TLS and in plaintext, and NOAUTH / WRONGPASS otherwise.
    for kwargs in ({"ssl": True, "ssl_ca_certs": str(tls_files / "ca.pem"), "host": "localhost"},
                   {"host": "127.0.0.1"}):
        for protocol in (2, 3):
            client = redis.Redis(port=weft_auth_port, username=USER, password=PASSWORD,
                                 protocol=protocol, socket_timeout=10, **kwargs)
            assert client.set("auth-key", "v")
            assert client.acl_whoami() in (b"app", "app")  # redis-py decodes it for RESP3
        anonymous = redis.Redis(port=weft_auth_port, socket_timeout=10, **kwargs)
        with pytest.raises(redis.exceptions.AuthenticationError):
            anonymous.get("auth-key")
        wrong = redis.Redis(port=weft_auth_port, username=USER, password="nope",
                            socket_timeout=10, **kwargs)
        with pytest.raises(redis.exceptions.AuthenticationError):
            wrong.ping()


@pytest.mark.skipif(shutil.which("redis-cli") is None, reason="redis-cli not installed")
def test_redis_cli_with_user_and_password(tls_files, weft_auth_port):
    # Proves `redis-cli --tls --user --pass` is let in, and without them told NOAUTH.
    base = ["redis-cli", "--tls", "--cacert", str(tls_files / "ca.pem"), "-h", "localhost",
            "-p", str(weft_auth_port)]
    out = subprocess.run(base + ["--user", USER, "--pass", PASSWORD, "--no-auth-warning",
                                 "SET", "cli-auth", "v"],
                         capture_output=True, text=True, timeout=20, check=True).stdout
    assert out.strip() == "OK"
    out = subprocess.run(base + ["GET", "cli-auth"], capture_output=True, text=True,
                         timeout=20).stdout
    assert "NOAUTH" in out


def test_memcached_sasl_plain(weft_auth_port):
    # Proves python-binary-memcached's SASL PLAIN login is accepted, and a wrong password
    # gets nothing stored or read.
    client = bmemcached.Client([f"127.0.0.1:{weft_auth_port}"], USER, PASSWORD)
    assert client.set("mc-auth", "value")
    assert client.get("mc-auth") == "value"
    client.disconnect_all()
    wrong = bmemcached.Client([f"127.0.0.1:{weft_auth_port}"], USER, "nope")
    with pytest.raises(Exception):
        wrong.set("mc-auth", "other")
    wrong.disconnect_all()


def test_https_with_basic_credentials(tls_files, weft_auth_port):
    # Proves HTTP Basic credentials over HTTPS are required: 401 with a challenge without or
    # with wrong ones, 200 with the user's; curl -u works.
    ctx = ssl.create_default_context(cafile=str(tls_files / "ca.pem"))

    def get(path, credentials=None):
        connection = http.client.HTTPSConnection("localhost", weft_auth_port, context=ctx,
                                                 timeout=10)
        headers = {}
        if credentials:
            headers["Authorization"] = "Basic " + base64.b64encode(credentials.encode()).decode()
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        body = response.read()
        connection.close()
        return response.status, dict(response.getheaders()), body

    status, headers, _ = get("/rest/v2/caches")
    assert status == 401
    assert headers.get("www-authenticate", "").startswith("Basic")
    assert get("/rest/v2/caches", f"{USER}:nope")[0] == 401
    assert get("/rest/v2/caches", f"{USER}:{PASSWORD}")[0] == 200
    assert get("/rest/v2/container/health/status")[0] == 200
    if shutil.which("curl"):
        result = subprocess.run(
            ["curl", "-sS", "--fail", "--cacert", str(tls_files / "ca.pem"), "-u",
             f"{USER}:{PASSWORD}", f"https://localhost:{weft_auth_port}/rest/v2/caches"],
            capture_output=True, text=True, timeout=20)
        assert result.returncode == 0, result.stderr


def test_an_observer_reads_but_may_not_write(tls_files, weft_auth_port):
    # Proves roles through real clients: redis-py raises NoPermissionError (Redis' NOPERM) for
    # an observer's SET but reads; curl gets 403 for its PUT and 200 for its GET;
    # python-binary-memcached's set fails; nothing the refused writes carried is stored.
    writer = redis.Redis(host="127.0.0.1", port=weft_auth_port, username=USER,
                         password=PASSWORD, socket_timeout=10)
    assert writer.set("observed", "v")
    viewer = redis.Redis(host="127.0.0.1", port=weft_auth_port, username=VIEWER,
                         password=PASSWORD, socket_timeout=10)
    assert viewer.get("observed") == b"v"
    with pytest.raises(redis.exceptions.NoPermissionError, match="no permissions to run the 'set'"):
        viewer.set("observed", "w")
    assert viewer.get("observed") == b"v"

    base = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert",
            str(tls_files / "ca.pem"), "-u", f"{VIEWER}:{PASSWORD}"]
    url = f"https://localhost:{weft_auth_port}/rest/v2/caches/default/observed"
    put = subprocess.run(base + ["-X", "PUT", "-H", "Content-Type: text/plain", "--data", "w",
                                 url], capture_output=True, text=True, timeout=20)
    assert put.stdout == "403"
    get = subprocess.run(base + [url], capture_output=True, text=True, timeout=20)
    assert get.stdout == "200"

    client = bmemcached.Client([f"127.0.0.1:{weft_auth_port}"], VIEWER, PASSWORD)
    with pytest.raises(Exception):
        assert client.set("mc-observed", "v")
    client.disconnect_all()
    assert writer.get("observed") == b"v"


def test_a_client_certificate_is_its_common_names_user(tls_files, weft_auth_port):
    # Proves an HTTPS request with a client certificate and no credentials is the certificate's
    # user (CN=app, group application: it may write), while one without a certificate or
    # credentials is refused.
    base = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert",
            str(tls_files / "ca.pem")]
    url = f"https://localhost:{weft_auth_port}/rest/v2/caches/default/certified"
    with_certificate = base + ["--cert", str(tls_files / "client.pem"), "--key",
                               str(tls_files / "client.key")]
    put = subprocess.run(with_certificate + ["-X", "PUT", "-H", "Content-Type: text/plain",
                                             "--data", "v", url],
                         capture_output=True, text=True, timeout=20)
    assert put.stdout in ("200", "204")
    get = subprocess.run(with_certificate + [url], capture_output=True, text=True, timeout=20)
    assert get.stdout == "200"
    anonymous = subprocess.run(base + [url], capture_output=True, text=True, timeout=20)
    assert anonymous.stdout == "401"
