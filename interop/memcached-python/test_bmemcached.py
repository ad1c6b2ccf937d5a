"""python-binary-memcached (binary protocol) against the memcached daemon and Weft: every
expectation holds on both. Its multi-gets pipeline GETKQ requests behind one GETK and its
multi-sets SETQ requests, so quiet opcodes and opaque handling are exercised too."""

import os
import socket
import struct

import bmemcached
import pytest
import redis
from bmemcached.exceptions import MemcachedException


@pytest.fixture
def client(server):
    c = bmemcached.Client((server.address,), socket_timeout=10)
    yield c
    c.disconnect_all()


def test_values_come_back_with_their_types(client):
    # Proves flags are stored and returned: the client decodes each type by its flags.
    values = {"text": "héllo", "number": 12345, "raw": b"\x00\xff\r\n", "object": {"a": [1, 2]}}
    for key, value in values.items():
        assert client.set(key, value) is True
    for key, value in values.items():
        assert client.get(key) == value
    assert client.get("missing") is None


def test_multi_get_and_set_use_quiet_opcodes(client):
    # Proves pipelined SETQ and GETKQ+GETK: silent successes and misses, all answers matched.
    assert client.set_multi({f"k{i}": i for i in range(50)}) == []
    keys = [f"k{i}" for i in range(0, 60, 3)]
    assert client.get_multi(keys) == {f"k{i}": i for i in range(0, 50, 3)}
    assert client.get_multi(["absent1", "absent2"]) == {}
    assert client.delete_multi([f"k{i}" for i in range(50)]) is True
    assert client.get_multi(keys) == {}


def test_conditional_stores_and_cas(client):
    # Proves add/replace statuses and gets/cas with entry versions.
    assert client.add("k", "v1") is True
    assert client.add("k", "v2") is False
    assert client.replace("absent", "x") is False
    assert client.replace("k", "v3") is True
    value, unique = client.gets("k")
    assert value == "v3" and unique
    assert client.gets("absent") == (None, None)
    assert client.cas("k", "v4", unique) is True
    assert client.cas("k", "v5", unique) is False
    assert client.get("k") == "v4"


def test_incr_decr_create_and_floor(client):
    # Proves INCREMENT creates an absent key with its initial value, then counts; DECREMENT floors.
    assert client.incr("counter", 5, default=10) == 10
    assert client.incr("counter", 5) == 15
    assert client.decr("counter", 100) == 0
    client.set("n", b"18446744073709551615")
    assert client.incr("n", 2) == 1
    client.set("word", b"abc")
    with pytest.raises(MemcachedException, match="Non-numeric server-side value"):
        client.incr("word", 1)


def test_too_large_value_is_refused_and_the_connection_goes_on(client):
    # Proves E2BIG for an item over 1 MiB (incompressible, so the client cannot shrink it).
    with pytest.raises(MemcachedException, match="Too large"):
        client.set("big", os.urandom(2 << 20))
    assert client.set("after", "ok") is True
    assert client.get("after") == "ok"


def test_stats_and_flush(client, server):
    # Proves STAT answers every statistic and FLUSH empties the cache.
    client.set("a", 1)
    client.set("b", 2)
    stats = next(iter(client.stats().values()))
    assert int(stats["curr_items"]) >= 2
    if server.is_weft:
        assert int(stats["curr_items"]) == 2
    assert stats["version"].startswith(b"1.6")
    assert client.flush_all() is True
    assert client.get("a") is None


def binary_request(opcode: int, key: bytes = b"", extras: bytes = b"", opaque: int = 0) -> bytes:
    body = extras + key
    return struct.pack(">BBHBBHIIQ", 0x80, opcode, len(key), len(extras), 0, 0, len(body), opaque, 0) + body


def read_responses(sock: socket.socket, count: int) -> list[tuple[int, int, int, bytes]]:
    """(opcode, status, opaque, body) of the next `count` responses."""
    data = b""
    out = []
    while len(out) < count:
        while len(data) < 24 or len(data) < 24 + struct.unpack(">I", data[8:12])[0]:
            chunk = sock.recv(65536)
            assert chunk, "connection closed"
            data += chunk
        _, opcode, _, _, _, status, length, opaque, _ = struct.unpack(">BBHBBHIIQ", data[:24])
        out.append((opcode, status, opaque, data[24:24 + length]))
        data = data[24 + length:]
    return out


def test_sasl_and_unknown_opcodes_answer_unknown_command(server):
    # Proves SASL (not offered) and unknown opcodes get 0x81 with their opaque, stream in step.
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(binary_request(0x20, opaque=1) + binary_request(0x21, key=b"PLAIN", opaque=2)
                     + binary_request(0x0B, opaque=3))
        responses = read_responses(sock, 3)
    assert responses[0] == (0x20, 0x81, 1, b"Unknown command")
    assert responses[1] == (0x21, 0x81, 2, b"Unknown command")
    assert responses[2][:3] == (0x0B, 0, 3)


def test_quiet_gets_are_silent_until_noop(server, client):
    # Proves GETQ misses are silent, hits and NOOP answer, each with its opaque.
    client.set("hit", b"v")
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(binary_request(0x09, key=b"miss", opaque=7) + binary_request(0x09, key=b"hit", opaque=8)
                     + binary_request(0x0A, opaque=9))
        responses = read_responses(sock, 2)
    assert responses[0][:3] == (0x09, 0, 8)
    assert responses[0][3].endswith(b"v")
    assert responses[1] == (0x0A, 0, 9, b"")


def test_entries_are_visible_through_resp(server, client):
    # Proves a binary-protocol entry is a RESP entry of the same cache (Weft only).
    if not server.is_weft:
        pytest.skip("RESP is Weft's")
    r = redis.Redis(port=server.resp_port)
    client.set("shared", b"raw bytes")
    assert r.get("shared") == b"raw bytes"
    r.set("from-resp", "value")
    assert client.get("from-resp") == "value"  # flags 0 = plain text for this client
    r.close()
