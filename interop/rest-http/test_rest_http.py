"""Drives Weft's REST v2 endpoint over real HTTP connections (http.client and raw sockets),
and checks entries are shared with RESP."""

import http.client
import json
import socket
import time
import urllib.parse


def request(port, method, path, body=None, headers=None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def resp(port, *args):
    """Sends one RESP command and returns the raw reply bytes."""
    frame = b"*%d\r\n" % len(args) + b"".join(
        b"$%d\r\n%s\r\n" % (len(a), a) for a in (x if isinstance(x, bytes) else x.encode() for x in args))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(frame)
        return sock.recv(1 << 20)


def test_entry_lifecycle(weft_port):
    # Proves PUT, GET, HEAD, POST-conflict and DELETE answer with Infinispan's status codes.
    path = "/rest/v2/caches/default/rest-key"
    assert request(weft_port, "PUT", path, b"value-1")[0] == 204
    status, headers, body = request(weft_port, "GET", path)
    assert (status, body) == (200, b"value-1")
    assert request(weft_port, "HEAD", path)[0] == 200
    assert request(weft_port, "POST", path, b"other")[0] == 409
    assert request(weft_port, "DELETE", path)[0] == 204
    assert request(weft_port, "GET", path)[0] == 404
    assert request(weft_port, "DELETE", path)[0] == 404


def test_unicode_and_slash_keys(weft_port):
    # Proves percent-encoded keys with Unicode and '/' address exactly one entry.
    key = "clé/ünïcode ✓"
    path = "/rest/v2/caches/default/" + urllib.parse.quote(key, safe="")
    assert request(weft_port, "PUT", path, "valeur".encode())[0] == 204
    assert request(weft_port, "GET", path)[2] == "valeur".encode()
    assert resp(weft_port, "GET", key.encode()) == b"$6\r\nvaleur\r\n"


def test_ttl_header_expires_entry(weft_port):
    # Proves timeToLiveSeconds makes the entry expire, end to end.
    path = "/rest/v2/caches/default/short-lived"
    assert request(weft_port, "PUT", path, b"x", {"timeToLiveSeconds": "1"})[0] == 204
    ttl = resp(weft_port, "PTTL", "short-lived")
    assert ttl.startswith(b":") and 0 < int(ttl[1:]) <= 1000
    time.sleep(1.2)
    assert request(weft_port, "GET", path)[0] == 404


def test_cross_protocol(weft_port):
    # Proves a value written through RESP is read through REST and the other way round.
    assert resp(weft_port, "SET", "from-resp", "hello") == b"+OK\r\n"
    assert request(weft_port, "GET", "/rest/v2/caches/default/from-resp")[2] == b"hello"
    assert request(weft_port, "PUT", "/rest/v2/caches/default/from-rest", b"world")[0] == 204
    assert resp(weft_port, "GET", "from-rest") == b"$5\r\nworld\r\n"


def test_create_use_and_remove_cache(weft_port):
    # Proves caches are created from Infinispan JSON, listed, sized, cleared and removed.
    config = json.dumps({"local-cache": {"memory": {"max-count": "100"}}})
    status, _, body = request(weft_port, "POST", "/rest/v2/caches/made-by-rest", config,
                              {"Content-Type": "application/json"})
    assert status == 200, body
    assert request(weft_port, "POST", "/rest/v2/caches/made-by-rest", config,
                   {"Content-Type": "application/json"})[0] == 400
    names = json.loads(request(weft_port, "GET", "/rest/v2/caches")[2])
    assert "made-by-rest" in names and "default" in names
    for i in range(150):
        request(weft_port, "PUT", f"/rest/v2/caches/made-by-rest/k{i}", b"v")
    size = int(request(weft_port, "GET", "/rest/v2/caches/made-by-rest?action=size")[2])
    assert size <= 100, "max-count bound holds"
    assert request(weft_port, "POST", "/rest/v2/caches/made-by-rest?action=clear")[0] in (200, 204)
    assert int(request(weft_port, "GET", "/rest/v2/caches/made-by-rest?action=size")[2]) == 0
    assert request(weft_port, "DELETE", "/rest/v2/caches/made-by-rest")[0] == 200
    assert request(weft_port, "GET", "/rest/v2/caches/made-by-rest/k1")[0] == 404


def test_bad_config_is_400_with_line(weft_port):
    # Proves an invalid configuration is refused with a message naming the line.
    status, _, body = request(weft_port, "POST", "/rest/v2/caches/bad", '{\n"segmentz": 3}',
                              {"Content-Type": "application/json"})
    assert status == 400
    assert b"2" in body and b"segmentz" in body


def test_health_and_metrics(weft_port):
    # Proves health answers HEALTHY and /metrics exposes per-cache counters.
    assert request(weft_port, "GET", "/rest/v2/container/health/status")[2].strip() == b"HEALTHY"
    health = json.loads(request(weft_port, "GET", "/rest/v2/cache-managers/default/health")[2])
    assert health["cluster_health"]["health_status"] == "HEALTHY"
    request(weft_port, "GET", "/rest/v2/caches/default/missing-for-metrics")
    status, headers, body = request(weft_port, "GET", "/metrics")
    assert status == 200
    text = body.decode()
    assert 'cache="default"' in text
    assert "# TYPE" in text


def test_malformed_http_leaves_data_intact(weft_port):
    # Proves garbage after an HTTP request line gets a 4xx (or a close) at once, never a hang,
    # and loses no data. A timeout is a failure: the server must answer or close.
    request(weft_port, "PUT", "/rest/v2/caches/default/survivor", b"alive")
    for garbage in (b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
                    b"PUT /rest/v2/caches/default/x HTTP/1.1\r\n\x00\x01\x02\r\n\r\n",
                    b"GET /rest/v2/caches HTTP/1.1\r\n" + b"X: " + b"a" * 100_000 + b"\r\n\r\n"):
        with socket.create_connection(("127.0.0.1", weft_port), timeout=10) as sock:
            sock.sendall(garbage)
            try:
                reply = sock.recv(200)
            except ConnectionResetError:
                reply = b""
            assert reply == b"" or reply.startswith(b"HTTP/1.1 4"), reply
    assert request(weft_port, "GET", "/rest/v2/caches/default/survivor")[2] == b"alive"
