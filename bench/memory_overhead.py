#!/usr/bin/env python3
"""Measures memory overhead per entry: loads N entries (10-byte keys, 512-byte values) over
RESP into redis-server and into `weft server`, and reports (RSS growth / N) − payload.

    cargo build --release -p weft-server && python3 bench/memory_overhead.py [--entries N]
"""

import argparse
import os
import socket
import sys
import time

from common import start_redis, start_weft

KEY_BYTES, VALUE_BYTES = 10, 512
BATCH = 5_000


def load(port: int, entries: int, value_bytes: int = VALUE_BYTES, timeout_s: float | None = None,
         random_value: bool = False) -> None:
    """SETs keys k000000000… (10 bytes) to `value_bytes`-byte values, pipelined BATCH at a time;
    with `timeout_s`, a server that stops answering for that long raises socket.timeout. With
    `random_value` the (one) value is random bytes rather than "vvv…", so a store that compresses
    values (Redis' RDB does) gains nothing from it."""
    value = os.urandom(value_bytes) if random_value else b"v" * value_bytes
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        for start in range(0, entries, BATCH):
            stop = min(start + BATCH, entries)
            parts = []
            for i in range(start, stop):
                key = b"k%09d" % i
                assert len(key) == KEY_BYTES
                parts.append(b"*3\r\n$3\r\nSET\r\n$10\r\n%s\r\n$%d\r\n%s\r\n" % (key, value_bytes, value))
            sock.sendall(b"".join(parts))
            expected, got = (stop - start) * 5, b""
            while len(got) < expected:
                chunk = sock.recv(1 << 20)
                if not chunk:
                    raise RuntimeError("server closed the connection")
                got += chunk
            if got != b"+OK\r\n" * (stop - start):
                raise RuntimeError(f"unexpected replies: {got[:80]!r}")
            if start % 200_000 == 0:
                print(f"  {start}/{entries} loaded", file=sys.stderr, flush=True)


def dbsize(port: int) -> int:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"*1\r\n$6\r\nDBSIZE\r\n")
        return int(sock.recv(100).strip()[1:])


def measure(server, entries: int) -> float:
    time.sleep(0.5)
    before = server.rss_bytes()
    load(server.port, entries)
    time.sleep(1.0)
    after = server.rss_bytes()
    assert dbsize(server.port) == entries, "not every entry was stored"
    return (after - before) / entries - (KEY_BYTES + VALUE_BYTES)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    args = parser.parse_args()
    print(f"{args.entries} entries, {KEY_BYTES}-byte keys, {VALUE_BYTES}-byte values; "
          "overhead = RSS growth / entries - payload")
    results = {}
    for start in (start_redis, start_weft):
        server = start()
        try:
            results[server.name] = measure(server, args.entries)
            print(f"{server.name:<6} {results[server.name]:8.1f} bytes/entry", flush=True)
        finally:
            server.stop()
    print(f"weft/redis overhead ratio: {results['weft'] / results['redis']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
