"""pymemcache (text protocol) against the memcached daemon and Weft: every expectation holds on
both, so Weft answers as memcached does."""

import time

import pytest
import redis
from pymemcache import serde
from pymemcache.client.base import Client
from pymemcache.exceptions import MemcacheClientError, MemcacheServerError

from conftest import text_exchange


@pytest.fixture
def client(server):
    """A pymemcache client that waits for every reply and keeps Python types (through flags)."""
    c = Client(("127.0.0.1", server.port), default_noreply=False, serde=serde.pickle_serde,
               connect_timeout=5, timeout=10)
    yield c
    c.close()


def test_values_come_back_with_their_types(client):
    # Proves flags are stored and returned: pymemcache decodes each type by its flags.
    values = {"text": "héllo", "number": 12345, "raw": b"\x00\xff\r\n", "object": {"a": [1, 2]}}
    for key, value in values.items():
        assert client.set(key, value) is True
    for key, value in values.items():
        assert client.get(key) == value
    assert client.get("missing") is None
    assert client.get_many(["text", "missing", "number"]) == {"text": "héllo", "number": 12345}


def test_conditional_stores(client):
    # Proves add, replace, append and prepend store only when memcached would.
    assert client.add("k", "v1") is True
    assert client.add("k", "v2") is False
    assert client.replace("absent", "x") is False
    assert client.replace("k", "v3") is True
    assert client.get("k") == "v3"
    assert client.append("absent", "x") is False
    assert client.set("b", b"mid") is True
    assert client.append("b", b">") is True
    assert client.prepend("b", b"<") is True
    assert client.get("b") == b"<mid>"


def test_cas_swaps_only_an_unchanged_value(client):
    # Proves gets/cas: the unique from gets wins once, a stale one loses, a missing key is None.
    assert client.cas("absent", "x", b"1") is None
    client.set("k", "first")
    value, unique = client.gets("k")
    assert value == "first"
    assert client.cas("k", "second", unique) is True
    assert client.cas("k", "third", unique) is False
    assert client.get("k") == "second"
    assert client.gets_many(["k", "absent"]) == {"k": client.gets("k")}


def test_incr_and_decr(client):
    # Proves 64-bit unsigned counters: incr wraps, decr floors at 0, misses and non-numbers.
    assert client.incr("absent", 1) is None
    client.set("n", b"18446744073709551615")
    assert client.incr("n", 2) == 1
    assert client.decr("n", 10) == 0
    assert client.incr("n", 41) == 41
    # memcached pads a number that shrank in place with spaces; Weft stores it bare.
    assert client.get("n").rstrip(b" ") == b"41"
    client.set("word", b"abc")
    with pytest.raises(MemcacheClientError, match="cannot increment or decrement non-numeric value"):
        client.incr("word", 1)


def test_touch_expiration_and_delete(client):
    # Proves touch on present and absent keys, negative expiration, and delete.
    client.set("k", "v", expire=1000)
    assert client.touch("k", 2000) is True
    assert client.touch("absent", 10) is False
    client.set("gone", "v", expire=-1)
    assert client.get("gone") is None
    assert client.raw_command(b"gat 0 k", b"END\r\n") == b"VALUE k 16 1\r\nv\r\n"
    assert client.delete("k") is True
    assert client.delete("k") is False


def test_expiration_passes_in_time(client):
    # Proves a relative expiration time ends the item once it has passed.
    client.set("short", "v", expire=1)
    assert client.get("short") == "v"
    deadline = time.monotonic() + 10
    while client.get("short") is not None:
        assert time.monotonic() < deadline, "item did not expire"
        time.sleep(0.1)


def test_noreply_pipeline(server):
    # Proves noreply writes are applied in order without replies.
    c = Client(("127.0.0.1", server.port), default_noreply=True, timeout=10)
    for i in range(100):
        c.set(f"k{i}", str(i).encode())
    c.incr("k7", 10)
    c.delete("k8")
    assert c.get("k7") == b"17"
    assert c.get("k8") is None
    assert c.get_many([f"k{i}" for i in range(5)]) == {f"k{i}": str(i).encode() for i in range(5)}
    c.close()


def test_too_large_item_is_refused_and_the_connection_goes_on(client):
    # Proves the 1 MiB item limit's error and that the refused data does not desync the stream.
    client.set("big", "small")
    with pytest.raises(MemcacheServerError, match="object too large for cache"):
        client.set("big", b"x" * (2 << 20))
    assert client.get("big") is None  # memcached drops the old value of a refused set
    client.set("after", "ok")
    assert client.get("after") == "ok"


def test_flush_all_version_and_stats(server, client):
    # Proves flush_all, version and the stats groups a client reads.
    client.set("a", "1")
    client.set("b", "2")
    assert client.get("a") == "1"
    stats = client.stats()
    # memcached still counts flushed items it has not reclaimed yet; Weft counts exactly.
    assert stats[b"curr_items"] >= 2
    if server.is_weft:
        assert stats[b"curr_items"] == 2
    assert stats[b"cmd_set"] >= 2
    assert stats[b"get_hits"] >= 1
    assert stats[b"version"] == b"1.6.18" or stats[b"version"].startswith(b"1.6")
    assert client.stats("items")[b"items:1:number"] >= 2
    assert b"item_size_max" in client.stats("settings")
    assert client.version().startswith(b"1.6")
    assert client.flush_all() is True
    assert client.get("a") is None


@pytest.mark.parametrize(
    "request_bytes, reply",
    [
        (b"bogus\r\n", b"ERROR\r\n"),
        (b"get\r\n", b"ERROR\r\n"),
        (b"set k 0 0 3\r\nabcde\r\n", b"CLIENT_ERROR bad data chunk\r\nERROR\r\n"),
        (b"set k 0 0 -1\r\nabc\r\n", b"CLIENT_ERROR bad command line format\r\nERROR\r\n"),
        (b"set " + b"k" * 251 + b" 0 0 1\r\nx\r\n", b"CLIENT_ERROR bad command line format\r\nERROR\r\n"),
        (b"get " + b"k" * 251 + b"\r\n", b"CLIENT_ERROR bad command line format\r\n"),
        (b"incr k abc\r\n", b"CLIENT_ERROR invalid numeric delta argument\r\n"),
        (b"touch k abc\r\n", b"CLIENT_ERROR invalid exptime argument\r\n"),
        (b"delete k 1\r\n", b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n"),
        (b"set k 0 0 1 noreply\r\nx\r\nget k\r\n", b"VALUE k 0 1\r\nx\r\nEND\r\n"),
        (b"set k 4294967296 0 1\r\nx\r\nget k\r\n", b"STORED\r\nVALUE k 0 1\r\nx\r\nEND\r\n"),
        (b"set k 0 0 1\r\r\nx\r\nget k\r\n", b"STORED\r\nVALUE k 0 1\r\nx\r\nEND\r\n"),
        (b"set a\tb 0 0 1\r\nx\r\nget a\tb\r\n", b"STORED\r\nVALUE a\tb 0 1\r\nx\r\nEND\r\n"),
    ],
    ids=["unknown", "get-no-key", "bad-chunk", "negative-length", "long-key-set", "long-key-get",
         "bad-delta", "bad-exptime", "delete-usage", "noreply", "flags-wrap", "cr-in-line",
         "tab-in-key"],
)
def test_exact_error_lines(server, request_bytes, reply):
    # Proves memcached's exact lines for malformed commands, and where the stream resumes.
    # On the shared port a connection is memcached if its first word is a memcached command:
    # an unknown command goes after a `version`. (Not before the long-key `get`: memcached
    # drops the replies pipelined before that one.)
    prefix = b"version\r\n" if request_bytes.startswith(b"bogus") else b""
    end = b"END\r\n" if reply.endswith(b"END\r\n") else reply[-7:]
    got = text_exchange(server.port, prefix + request_bytes, reply_end=end)
    assert got == (b"VERSION 1.6.18\r\n" if prefix else b"") + reply


def test_entries_are_visible_through_resp(server, client):
    # Proves a memcached entry is a RESP entry of the same cache (Weft only).
    if not server.is_weft:
        pytest.skip("RESP is Weft's")
    r = redis.Redis(port=server.resp_port)
    client.set("shared", b"raw bytes")
    assert r.get("shared") == b"raw bytes"
    r.set("from-resp", "value")
    assert client.get("from-resp") == b"value"  # flags 0: raw bytes for pymemcache
    r.hset("hash", "f", "v")
    assert client.get("hash") is None
    with pytest.raises(MemcacheServerError, match="Redis data structure"):
        client.add("hash", "x")
    r.close()
