"""Drives Weft's RESP endpoint with real clients: redis-py (RESP2 and RESP3) and redis-cli,
against a release `weft server` started on a free loopback port.

Run: cargo build --release -p weft-server && pip install -r requirements.txt && pytest -q
(WEFT_BIN overrides the binary, default target/release/weft from the repository root).
"""

import shutil
import socket
import subprocess
import time

import pytest
import redis

@pytest.fixture(scope="module")
def weft(weft_port):
    """Port of the module's server (see interop/conftest.py)."""
    return weft_port


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def r(request, weft):
    """A redis-py client on database 0, speaking RESP2 or RESP3, on an empty server."""
    client = redis.Redis(host="127.0.0.1", port=weft, protocol=request.param,
                         decode_responses=True, socket_timeout=10)
    client.flushall()
    yield client
    client.close()


def error_text(call) -> str:
    with pytest.raises(redis.ResponseError) as raised:
        call()
    return str(raised.value)


# Proves the HELLO handshake negotiated the requested protocol.
def test_protocol_negotiated(r):
    wanted = r.connection_pool.connection_kwargs["protocol"]
    hello = r.execute_command("HELLO", wanted)
    if wanted == 2:
        # RESP2 has no maps: HELLO answers a flat key, value, ... array.
        assert isinstance(hello, list)
        hello = dict(zip(hello[::2], hello[1::2]))
    else:
        assert isinstance(hello, dict)
    assert hello["proto"] == wanted
    assert hello["server"] == "redis"
    assert r.ping() is True


# Proves SET/GET and SET's options, SETNX, GETSET, GETDEL, GETEX, MSET/MGET/MSETNX.
def test_strings(r):
    assert r.set("k", "v") is True
    assert r.get("k") == "v"
    assert r.get("missing") is None
    assert r.set("k", "v2", nx=True) is None
    assert r.set("k", "v3", xx=True, get=True) == "v"
    assert r.set("k", "v4", ex=100) is True
    assert r.set("k", "v5", keepttl=True) is True
    assert 99 <= r.ttl("k") <= 100
    assert r.setnx("n", "1") is True
    assert r.setnx("n", "2") is False
    assert r.getset("n", "3") == "1"
    assert r.getdel("n") == "3"
    assert r.getdel("n") is None
    assert r.setex("e", 100, "x") is True
    assert 99 <= r.ttl("e") <= 100
    assert r.psetex("p", 50_000, "x") is True
    assert 49_000 <= r.pttl("p") <= 50_000
    assert r.getex("e", persist=True) == "x"
    assert r.ttl("e") == -1
    assert r.getex("e", px=200_000) == "x"
    assert 199 <= r.ttl("e") <= 200
    assert r.getex("e", exat=1) == "x"
    assert r.exists("e") == 0
    assert r.mset({"a": "1", "b": "2"}) is True
    assert r.mget("a", "b", "nope") == ["1", "2", None]
    assert r.msetnx({"a": "9", "c": "3"}) is False
    assert r.get("c") is None
    assert r.msetnx({"c": "3", "d": "4"}) is True
    assert r.mget(["c", "d"]) == ["3", "4"]


# Proves APPEND, STRLEN, GETRANGE/SUBSTR and SETRANGE.
def test_string_ranges(r):
    assert r.append("s", "Hello") == 5
    assert r.append("s", " World") == 11
    assert r.strlen("s") == 11
    assert r.strlen("missing") == 0
    assert r.getrange("s", 0, 4) == "Hello"
    assert r.getrange("s", -5, -1) == "World"
    assert r.getrange("s", 5, 2) == ""
    assert r.substr("s", 6) == "World"
    assert r.setrange("s", 6, "Redis") == 11
    assert r.get("s") == "Hello Redis"
    assert r.setrange("pad", 3, "x") == 4
    assert r.get("pad") == "\x00\x00\x00x"
    assert r.setrange("none", 0, "") == 0
    assert r.exists("none") == 0


# Proves INCR, INCRBY, DECR, DECRBY and INCRBYFLOAT, with the key's TTL kept.
def test_counters(r):
    assert r.incr("c") == 1
    assert r.incr("c", 10) == 11
    assert r.decr("c") == 10
    assert r.decr("c", 20) == -10
    assert r.incrby("c", 5) == -5
    assert r.decrby("c", 5) == -10
    assert r.get("c") == "-10"
    r.set("f", "10.50")
    assert r.incrbyfloat("f", 0.1) == pytest.approx(10.6)
    assert r.get("f") == "10.6"
    assert r.incrbyfloat("f", -5) == pytest.approx(5.6)
    r.set("t", "1", ex=100)
    assert r.incr("t") == 2
    assert r.incrbyfloat("t", 0.5) == 2.5
    assert 99 <= r.ttl("t") <= 100


# Proves error replies raise redis.ResponseError with Redis' texts.
def test_errors(r):
    r.set("s", "abc")
    assert "value is not an integer or out of range" in error_text(lambda: r.incr("s"))
    assert "value is not a valid float" in error_text(lambda: r.incrbyfloat("s", 1))
    r.set("max", str(2**63 - 1))
    assert "increment or decrement would overflow" in error_text(lambda: r.incr("max"))
    assert "decrement would overflow" in error_text(lambda: r.decrby("max", -(2**63)))
    r.set("f", "1")
    assert "increment would produce NaN or Infinity" in error_text(lambda: r.incrbyfloat("f", "inf"))
    assert "invalid expire time in 'setex' command" in error_text(lambda: r.setex("k", 0, "v"))
    assert "invalid expire time in 'set' command" in error_text(
        lambda: r.execute_command("SET", "k", "v", "EX", 0))
    assert "syntax error" in error_text(lambda: r.execute_command("SET", "k", "v", "NX", "XX"))
    assert "no such key" in error_text(lambda: r.rename("missing", "x"))
    assert "offset is out of range" in error_text(lambda: r.setrange("s", -1, "x"))
    assert "string exceeds maximum allowed size" in error_text(lambda: r.setrange("s", 512 * 1024 * 1024, "x"))
    assert "wrong number of arguments for 'get' command" in error_text(lambda: r.execute_command("GET"))
    assert "wrong number of arguments for 'mset' command" in error_text(lambda: r.execute_command("MSET", "a", "1", "b"))
    assert "unknown command 'NOPE'" in error_text(lambda: r.execute_command("NOPE", "x"))
    assert "invalid cursor" in error_text(lambda: r.execute_command("SCAN", "abc"))
    assert "NX and XX, GT or LT options at the same time are not compatible" in error_text(
        lambda: r.execute_command("EXPIRE", "s", 10, "NX", "XX"))
    assert "GT and LT options at the same time are not compatible" in error_text(
        lambda: r.execute_command("EXPIRE", "s", 10, "GT", "LT"))
    assert "invalid expire time in 'expire' command" in error_text(lambda: r.expire("s", 2**63 - 1))
    assert "DB index is out of range" in error_text(lambda: r.execute_command("SELECT", 16))
    # The connection is still usable after every error.
    assert r.get("s") == "abc"


# Proves EXISTS, DEL, UNLINK, TYPE, KEYS, TOUCH, RENAME, RENAMENX and RANDOMKEY.
def test_keys(r):
    assert r.randomkey() is None
    r.mset({"user:1": "a", "user:2": "b", "admin:1": "c"})
    assert r.exists("user:1", "user:1", "missing") == 2
    assert r.type("user:1") == "string"
    assert r.type("missing") == "none"
    assert sorted(r.keys("user:*")) == ["user:1", "user:2"]
    assert sorted(r.keys("*:1")) == ["admin:1", "user:1"]
    assert sorted(r.keys("user:[^1]")) == ["user:2"]
    assert r.touch("user:1", "missing") == 1
    assert r.randomkey() in {"user:1", "user:2", "admin:1"}
    r.expire("user:1", 100)
    assert r.rename("user:1", "user:9") is True
    assert 99 <= r.ttl("user:9") <= 100
    assert r.renamenx("user:9", "user:2") is False
    assert r.renamenx("user:9", "user:3") is True
    assert r.delete("user:3", "missing") == 1
    assert r.unlink("user:2", "admin:1") == 2
    assert r.dbsize() == 0


# Proves EXPIRE/PEXPIRE/EXPIREAT/PEXPIREAT with NX XX GT LT, TTL/PTTL/EXPIRETIME, PERSIST.
def test_expiration(r):
    r.set("k", "v")
    assert r.ttl("k") == -1
    assert r.ttl("missing") == -2
    assert r.expire("k", 100, xx=True) is False
    assert r.expire("k", 100, nx=True) is True
    assert r.expire("k", 50, gt=True) is False
    assert r.expire("k", 200, gt=True) is True
    assert r.expire("k", 300, lt=True) is False
    assert r.pexpire("k", 150_000, lt=True) is True
    assert 149 <= r.ttl("k") <= 150
    assert 149_000 <= r.pttl("k") <= 150_000
    assert r.expireat("k", 4102444800) is True
    assert r.expiretime("k") == 4102444800
    assert r.pexpireat("k", 4102444800123) is True
    assert abs(r.pexpiretime("k") - 4102444800123) <= 10
    assert r.persist("k") is True
    assert r.persist("k") is False
    assert r.ttl("k") == -1
    assert r.expire("k", -1) is True
    assert r.exists("k") == 0
    r.set("short", "v", px=1)
    time.sleep(0.02)
    assert r.get("short") is None


# Proves scan_iter visits each of 5,000 keys exactly once, with and without MATCH.
def test_scan_iter_covers_every_key_once(r):
    with r.pipeline(transaction=False) as pipe:
        for i in range(5000):
            pipe.set(f"key:{i}", i)
        pipe.execute()
    seen = list(r.scan_iter(count=100))
    assert len(seen) == 5000
    assert set(seen) == {f"key:{i}" for i in range(5000)}
    matched = list(r.scan_iter(match="key:42*", count=50))
    assert sorted(matched) == sorted(k for k in (f"key:{i}" for i in range(5000)) if k.startswith("key:42"))
    assert list(r.scan_iter(_type="hash")) == []
    assert len(list(r.scan_iter(_type="STRING", count=1000))) == 5000


# Proves non-transactional pipelines return every reply in order, errors included.
def test_pipeline(r):
    pipe = r.pipeline(transaction=False)
    for i in range(1000):
        pipe.set(f"p:{i}", i)
    for i in range(1000):
        pipe.get(f"p:{i}")
    pipe.incr("p:counter")
    pipe.incr("p:0")
    results = pipe.execute()
    assert results[:1000] == [True] * 1000
    assert results[1000:2000] == [str(i) for i in range(1000)]
    assert results[2000:] == [1, 1]
    pipe = r.pipeline(transaction=False)
    pipe.set("x", "abc")
    pipe.incr("x")
    pipe.get("x")
    results = pipe.execute(raise_on_error=False)
    assert results[0] is True
    assert isinstance(results[1], redis.ResponseError)
    assert results[2] == "abc"


# Proves INFO parses into sections and the keyspace line counts keys.
def test_info(r):
    r.mset({"a": "1", "b": "2"})
    info = r.info()
    assert info["redis_version"] == "7.2.0"
    assert info["redis_mode"] == "standalone"
    assert info["db0"]["keys"] == 2
    assert "connected_clients" in r.info("clients")
    assert set(r.info("keyspace")) == {"db0"}


# Proves CLIENT SETNAME/GETNAME/ID, DBSIZE, FLUSHDB and SELECT through redis-py.
def test_client_and_databases(r, weft):
    assert r.client_getname() is None
    assert r.client_setname("interop") is True
    assert r.client_getname() == "interop"
    assert r.client_id() > 0
    r.mset({"a": "1", "b": "2"})
    assert r.dbsize() == 2
    protocol = r.connection_pool.connection_kwargs["protocol"]
    other = redis.Redis(host="127.0.0.1", port=weft, db=1, protocol=protocol, decode_responses=True)
    try:
        assert other.dbsize() == 0
        other.set("a", "db1")
        assert r.get("a") == "1"
        assert other.get("a") == "db1"
        assert r.flushdb() is True
        assert r.dbsize() == 0
        assert other.dbsize() == 1
    finally:
        other.close()


# Proves malformed bytes on a raw socket get Redis' protocol error and a closed connection,
# while stored data stays intact for other clients.
def test_malformed_bytes_leave_data_intact(r, weft):
    r.set("kept", "safe")
    for garbage, expected in [
        (b"*2\r\n$3\r\nGET\r\n$999999999999\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
        (b"*abc\r\n", b"-ERR Protocol error: invalid multibulk length\r\n"),
        (b"SET kept \"unbalanced\r\n", b"-ERR Protocol error: unbalanced quotes in request\r\n"),
        (b"PING\r\n" + b"x" * (70 * 1024), b"+PONG\r\n-ERR Protocol error: too big inline request\r\n"),
    ]:
        with socket.create_connection(("127.0.0.1", weft), timeout=10) as sock:
            sock.sendall(garbage)
            received = b""
            while True:
                try:
                    chunk = sock.recv(65536)
                except ConnectionResetError:
                    break  # the server closed with some of our garbage still unread
                if not chunk:
                    break
                received += chunk
            assert received == expected
    with socket.create_connection(("127.0.0.1", weft), timeout=10) as sock:
        sock.sendall(bytes([0x00, 0xFF, 0x13, 0x37]) + b"\r\n")
        assert sock.recv(1024) == b""
    assert r.get("kept") == "safe"
    assert r.dbsize() == 1
    assert r.ping() is True


# ------------------------------------------------------------------------------------------
# redis-cli

REDIS_CLI = shutil.which("redis-cli")


def cli(port: int, *args: str) -> str:
    # A missing redis-cli is a broken environment (.ci/run installs it), not a reason to skip.
    assert REDIS_CLI is not None, "redis-cli is not installed (apt-get install redis-tools)"
    done = subprocess.run([REDIS_CLI, "-h", "127.0.0.1", "-p", str(port), *args],
                          capture_output=True, text=True, timeout=30, check=True)
    return done.stdout


def cli_supports_resp3() -> bool:
    if REDIS_CLI is None:
        return False
    help_text = subprocess.run([REDIS_CLI, "--help"], capture_output=True, text=True).stdout
    return "\n  -3 " in help_text


# Proves redis-cli can set, get (formatted and --raw), ping and read INFO. (redis-cli
# prints raw replies when its output is not a terminal; --no-raw forces the formatted view.)
def test_redis_cli_basics(weft):
    cli(weft, "flushall")
    assert cli(weft, "ping") == "PONG\n"
    assert cli(weft, "set", "cli:k", "hello world") == "OK\n"
    assert cli(weft, "--no-raw", "get", "cli:k") == '"hello world"\n'
    assert cli(weft, "--raw", "get", "cli:k") == "hello world\n"
    assert cli(weft, "--no-raw", "get", "cli:missing") == "(nil)\n"
    assert cli(weft, "--no-raw", "incr", "cli:n") == "(integer) 1\n"
    assert cli(weft, "--raw", "mget", "cli:k", "cli:n") == "hello world\n1\n"
    assert cli(weft, "--no-raw", "-n", "1", "dbsize") == "(integer) 0\n"
    assert cli(weft, "--no-raw", "incr", "cli:k").startswith("(error) ERR value is not an integer")
    info = cli(weft, "info")
    assert "redis_version:7.2.0" in info and "# Keyspace" in info


# Proves redis-cli's RESP3 mode (-3) works: HELLO 3 handshake, PING, nulls and maps.
@pytest.mark.skipif(not cli_supports_resp3(), reason="this redis-cli has no -3 option")
def test_redis_cli_resp3(weft):
    assert cli(weft, "-3", "ping") == "PONG\n"
    cli(weft, "-3", "set", "cli:3", "v")
    assert cli(weft, "-3", "--no-raw", "get", "cli:3") == '"v"\n'
    assert cli(weft, "-3", "--no-raw", "get", "cli:missing") == "(nil)\n"
    hello = cli(weft, "-3", "--no-raw", "hello", "3")
    assert '"proto"' in hello and "(integer) 3" in hello
