"""Real clients over TLS on Weft's shared port: redis-py (ssl=True) and redis-cli --tls,
pymemcache with a TLS context, http.client and curl over HTTPS, with and without client
certificates, and plaintext clients on the same port."""

import http.client
import shutil
import socket
import ssl
import subprocess

import pytest
import redis
from pymemcache.client.base import Client as Memcached


def context(files, certificate=None):
    ctx = ssl.create_default_context(cafile=str(files / "ca.pem"))
    if certificate:
        ctx.load_cert_chain(str(files / f"{certificate}.pem"), str(files / f"{certificate}.key"))
    return ctx


def test_redis_py_over_tls_and_plaintext_on_one_port(tls_files, weft_tls_port):
    # Proves redis-py with ssl=True verifies the server's certificate and is served, and a
    # plaintext client on the same port sees what it wrote.
    secure = redis.Redis(host="localhost", port=weft_tls_port, ssl=True,
                         ssl_ca_certs=str(tls_files / "ca.pem"), socket_timeout=10)
    assert secure.ping()
    assert secure.set("tls-key", "over tls")
    assert secure.incr("tls-counter") == 1
    pipe = secure.pipeline(transaction=False)
    for i in range(100):
        pipe.set(f"tls-p{i}", "x" * i)
    assert all(pipe.execute())
    plain = redis.Redis(host="127.0.0.1", port=weft_tls_port, socket_timeout=10)
    assert plain.get("tls-key") == b"over tls"
    assert plain.get("tls-p99") == b"x" * 99
    resp3 = redis.Redis(host="localhost", port=weft_tls_port, ssl=True, protocol=3,
                        ssl_ca_certs=str(tls_files / "ca.pem"), socket_timeout=10)
    assert resp3.hgetall("missing") == {}


def test_redis_py_with_client_certificates(tls_files, weft_tls_port):
    # Proves a client certificate the CA signed is accepted and one another CA signed is
    # refused (client-auth = "optional": none at all is accepted, as above).
    ours = redis.Redis(host="localhost", port=weft_tls_port, ssl=True, socket_timeout=10,
                       ssl_ca_certs=str(tls_files / "ca.pem"),
                       ssl_certfile=str(tls_files / "client.pem"),
                       ssl_keyfile=str(tls_files / "client.key"))
    assert ours.ping()
    stranger = redis.Redis(host="localhost", port=weft_tls_port, ssl=True, socket_timeout=10,
                           ssl_ca_certs=str(tls_files / "ca.pem"),
                           ssl_certfile=str(tls_files / "stranger.pem"),
                           ssl_keyfile=str(tls_files / "stranger.key"))
    with pytest.raises(redis.exceptions.ConnectionError):
        stranger.ping()
    assert ours.ping()


def test_redis_py_refuses_a_server_its_ca_did_not_sign(tls_files, weft_tls_port):
    # Proves the server's certificate is what clients verify: trusting another CA fails.
    wrong = redis.Redis(host="localhost", port=weft_tls_port, ssl=True, socket_timeout=10,
                        ssl_ca_certs=str(tls_files / "other-ca.pem"))
    with pytest.raises(redis.exceptions.ConnectionError):
        wrong.ping()


@pytest.mark.skipif(shutil.which("redis-cli") is None, reason="redis-cli not installed")
def test_redis_cli_over_tls(tls_files, weft_tls_port):
    # Proves redis-cli --tls (OpenSSL) is served, with and without a client certificate.
    base = ["redis-cli", "--tls", "--cacert", str(tls_files / "ca.pem"), "-h", "localhost",
            "-p", str(weft_tls_port)]
    assert subprocess.run(base + ["SET", "cli-tls", "v"], capture_output=True, text=True,
                          timeout=20, check=True).stdout.strip() == "OK"
    with_cert = base + ["--cert", str(tls_files / "client.pem"), "--key",
                        str(tls_files / "client.key")]
    assert subprocess.run(with_cert + ["GET", "cli-tls"], capture_output=True, text=True,
                          timeout=20, check=True).stdout.strip() == "v"


def test_memcached_over_tls(tls_files, weft_tls_port):
    # Proves pymemcache with a TLS context stores and reads over TLS on the shared port.
    client = Memcached(("localhost", weft_tls_port), tls_context=context(tls_files),
                       timeout=10, connect_timeout=10)
    client.set("mc-tls", b"value")
    assert client.get("mc-tls") == b"value"
    assert client.incr("mc-missing", 1) is None
    client.close()


def test_https_with_http_client_and_curl(tls_files, weft_tls_port):
    # Proves HTTPS: http.client (ALPN http/1.1 offered by default contexts) and curl.
    ctx = context(tls_files)
    ctx.set_alpn_protocols(["h2", "http/1.1"])
    connection = http.client.HTTPSConnection("localhost", weft_tls_port, context=ctx, timeout=10)
    connection.request("PUT", "/rest/v2/caches/default/https-key", body=b"secure")
    response = connection.getresponse()
    response.read()
    assert response.status == 204
    assert connection.sock.selected_alpn_protocol() == "http/1.1"
    connection.request("GET", "/rest/v2/caches/default/https-key")
    response = connection.getresponse()
    assert (response.status, response.read()) == (200, b"secure")
    connection.close()
    if shutil.which("curl"):
        result = subprocess.run(
            ["curl", "-sS", "--fail", "--cacert", str(tls_files / "ca.pem"),
             f"https://localhost:{weft_tls_port}/rest/v2/caches/default/https-key"],
            capture_output=True, text=True, timeout=20)
        assert result.returncode == 0, result.stderr
        assert result.stdout == "secure"


def test_a_handshake_cut_short_leaves_others_served(tls_files, weft_tls_port):
    # Proves a client that starts a handshake and vanishes does not disturb others.
    with socket.create_connection(("127.0.0.1", weft_tls_port), timeout=10) as sock:
        sock.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
    client = redis.Redis(host="localhost", port=weft_tls_port, ssl=True,
                         ssl_ca_certs=str(tls_files / "ca.pem"), socket_timeout=10)
    assert client.ping()
