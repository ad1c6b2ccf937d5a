#!/usr/bin/env python3
"""Differential tester: the same seeded random command stream against two RESP servers, every
reply compared at the protocol level (reply type and value), stopping at the first difference.

    python3 differential.py --against-redis [--seed S] [--commands N] [--resp 2|3]
    python3 differential.py --redis-vs-redis ...         # validates the harness itself
    python3 differential.py --a 127.0.0.1:6379 --b 127.0.0.1:11222 ...

`--against-redis` starts a fresh `redis-server` (REDIS_SERVER_BIN, default the one on PATH) and a
fresh Weft (WEFT_BIN, default target/release/weft, see interop/weft_process.py); server A is
always the reference. `--a/--b` FLUSHALL both servers first: never point them at data you keep.

What is generated: ~20 keys shared by every type (so WRONGTYPE is frequent), small field and
member spaces, and on purpose the edges — negative and huge counts, every float spelling Redis
accepts or refuses (`inf`, `1e400`, `nan`, `0x10`, `  5`), empty strings, wrong arity, bad
option combinations, out-of-range indexes — for the string/key commands, hashes, lists
(blocking ones too), sets, sorted sets, streams (explicit and `ms-*` IDs only — `*` takes each
server's clock —, trims exact and `~` across 100-entry nodes, consumer groups, claims with
minimum idle times either 0 or never met), bitmaps and bit fields, HyperLogLog (the stored
bytes compared with GET; corrupt and foreign values; `hll-sparse-max-bytes` changed), geo
(GEOADD, positions, hashes, distances, every search, STORE), scripts and functions (EVAL,
EVALSHA, EVAL_RO, FCALL, FCALL_RO), SORT and SORT_RO (weights in string keys and hash fields
that only this family writes, GET patterns, LIMIT, STORE), DUMP/RESTORE across the two
servers (each DUMPs a key and RESTOREs the other's payload — redis-server's into Weft and
Weft's into redis-server — with TTLs, REPLACE, ABSTTL, IDLETIME/FREQ and corrupted payloads,
then the restored key is read on both), LCS, MULTI/EXEC/DISCARD/WATCH/UNWATCH (with a second
connection writing a watched key), HSCAN/SSCAN/ZSCAN and the random commands.

What is normalised, and only that (Redis does not define it): the order of unordered replies
(SMEMBERS, SINTER/SUNION/SDIFF, HKEYS/HVALS, HGETALL as a set of pairs), scans (each server is
iterated to cursor 0 and the unions compared), the random commands (SPOP, SRANDMEMBER,
HRANDFIELD: reply type, length, distinctness where Redis promises it, and membership in a
snapshot taken just before; the popped key is then deleted on both so the states agree again),
TTL (±1 s), the stream replies' times (delivery, seen and idle times) and XINFO STREAM's
`radix-tree-nodes` (Redis' radix tree's inner node count, not modelled), SORT's order where
Redis leaves it to its hash tables or its unstable quicksort (a set's own order; ALPHA ties,
which the harness finds from its model of the weight keys: `sort_same`), and DUMP payloads
whose bytes depend on history rather than value (`dump_same`). Before each SORT an uncompared
SCAN clears redis-server's errno, which SORT reads without clearing (docs/protocols.md).
redis-server runs with LC_ALL=C, the collation Weft's SORT ALPHA uses. Everything else,
OBJECT ENCODING included, must be byte-identical. Commands whose
reply cannot depend on timing are pipelined in batches; blocking commands only ever wait on
keys that have data, for a short timeout (0.01 s), or for a push a second connection sends.

On the first difference the seed, the command's index, the last commands with both replies are
printed and the exit status is 1. 0 means N commands, and a final per-key comparison, agreed.
`--minimize` then shrinks the run (delta debugging, replays on emptied servers) to a short
sequence that still makes that command differ. `--skip FAMILY,...` leaves families out (to look
past a known difference), `--only FAMILY,...` runs just those; `--doubles-by-value` compares doubles by value, since redis-server 7.0
prints them with %.17g and Redis 7.2 with the shortest round-trip text.
"""

from __future__ import annotations

import argparse
import collections
import io
import os
import hashlib
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from weft_process import free_port, start_weft, stop, stop_weft_cleanly, wait_for_port  # noqa: E402
from with_weft import DrainedOutput  # noqa: E402

REDIS_SERVER_BIN = os.environ.get("REDIS_SERVER_BIN") or shutil.which("redis-server")

# Commands pipelined per round trip.
BATCH_COMMANDS_MAX = 200
# How long a reply may take before it counts as missing (blocking commands wait at most 0.05 s).
REPLY_TIMEOUT_S = 10.0
# Pages one scan may take before it counts as not terminating.
SCAN_PAGES_MAX = 2_000
# Commands shown before a difference.
HISTORY_SHOWN = 20

# ------------------------------------------------------------------------------------------
# A minimal RESP2/RESP3 client that keeps each reply's type.
#
# A reply is a tuple (type byte as str, value): '+' '-' '!' '=' ',' bytes, ':' '(' int,
# '$' bytes or None, '*' tuple or None, '~' '>' tuple, '%' '|' tuple of (key, value) pairs,
# '#' bool, '_' None. An attribute ('|') is returned as ('|', (pairs, next_reply)).


class ProtocolViolation(Exception):
    """The server sent bytes that are not RESP."""


class Incomplete(Exception):
    """More bytes are needed."""


def encode(args: list[bytes]) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        parts.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(parts)


class Connection:
    """One RESP connection: send many commands, read that many replies."""

    def __init__(self, host: str, port: int, protocol: int):
        self.sock = socket.create_connection((host, port), timeout=REPLY_TIMEOUT_S)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.pos = 0
        if protocol == 3:
            self.send([[b"HELLO", b"3"]])
            hello = self.read()
            if hello[0] != "%":
                raise ProtocolViolation(f"HELLO 3 answered {hello!r}")

    def close(self) -> None:
        self.sock.close()

    def send(self, commands: list[list[bytes]]) -> None:
        self.sock.sendall(b"".join(encode(c) for c in commands))

    def read(self, timeout_s: float = REPLY_TIMEOUT_S):
        """One reply, or ('timeout', None) / ('closed', None) when none comes."""
        self.sock.settimeout(timeout_s)
        while True:
            start = self.pos
            try:
                reply = self._parse()
            except Incomplete:
                self.pos = start
                try:
                    chunk = self.sock.recv(1 << 20)
                except socket.timeout:
                    return ("timeout", None)
                except OSError:
                    return ("closed", None)
                if not chunk:
                    return ("closed", None)
                self.buf = self.buf[self.pos:] + chunk
                self.pos = 0
                continue
            return reply

    def _line(self) -> bytes:
        end = self.buf.find(b"\r\n", self.pos)
        if end < 0:
            raise Incomplete
        line = self.buf[self.pos:end]
        self.pos = end + 2
        return line

    def _bulk(self, length: int) -> bytes:
        end = self.pos + length
        if len(self.buf) < end + 2:
            raise Incomplete
        data = self.buf[self.pos:end]
        if self.buf[end:end + 2] != b"\r\n":
            raise ProtocolViolation("bulk not followed by CRLF")
        self.pos = end + 2
        return data

    def _parse(self):
        line = self._line()
        if not line:
            raise ProtocolViolation("empty line")
        kind, rest = chr(line[0]), line[1:]
        if kind in "+-":
            return (kind, rest)
        if kind == ":":
            return (kind, int(rest))
        if kind == "(":
            return (kind, int(rest))
        if kind == ",":
            return (kind, rest)
        if kind == "#":
            return (kind, rest == b"t")
        if kind == "_":
            return (kind, None)
        if kind in "$!=":
            length = int(rest)
            if length < 0:
                return (kind, None)
            return (kind, self._bulk(length))
        if kind in "*~>":
            count = int(rest)
            if count < 0:
                return (kind, None)
            return (kind, tuple(self._parse() for _ in range(count)))
        if kind == "%":
            count = int(rest)
            return (kind, tuple((self._parse(), self._parse()) for _ in range(count)))
        if kind == "|":
            count = int(rest)
            attributes = tuple((self._parse(), self._parse()) for _ in range(count))
            return (kind, (attributes, self._parse()))
        raise ProtocolViolation(f"unknown reply type {line[:40]!r}")


def show(reply, indent: str = "") -> str:
    """A reply as redis-cli would print it, with the RESP type made explicit."""
    kind, value = reply
    if kind in ("timeout", "closed"):
        return f"<{kind}: no reply>"
    if kind in "*~>%|" and value is not None:
        if not value:
            return f"{kind}(empty)"
        lines = [f"{kind}{len(value)}"]
        for item in value:
            if kind == "%":
                lines.append(f"{indent}  {show(item[0], indent + '  ')} => {show(item[1], indent + '  ')}")
            elif kind == "|":
                lines.append(f"{indent}  {item!r}")
            else:
                lines.append(f"{indent}  {show(item, indent + '  ')}")
        return "\n".join(lines)
    return f"{kind}{value!r}"


# ------------------------------------------------------------------------------------------
# Steps: what the generator produces and the runner executes.


@dataclass
class Cmd:
    """One command, pipelined on connection `conn` (0 main, 1 the second client)."""
    args: list[bytes]
    # How replies are compared: see `same`.
    kind: str = "exact"
    conn: int = 0
    # For EXEC: the kinds of the queued commands.
    sub: list[str] | None = None
    # For random kinds: the count argument as given (None without one), and WITHVALUES.
    count: int | None = None
    withvalues: bool = False
    # For SORT and the reads of what it stored: what the comparison must know (see
    # `sort_same`).
    extra: dict | None = None


@dataclass
class Scan:
    """HSCAN/SSCAN/ZSCAN iterated from `args[2]` until cursor 0, on each server separately."""
    args: list[bytes]


@dataclass
class Wake:
    """A blocking command on the main connection, then a push from the second one."""
    block: list[bytes]
    push: list[bytes]


@dataclass
class DumpRestore:
    """DUMP `source` on each server, then RESTORE each server's payload on the other one
    (redis-server's into Weft, Weft's into redis-server) as `dest`, with `ttl` and `options`;
    `corrupt`, when set, flips the payload byte at that fraction of its length first."""
    source: bytes
    dest: bytes
    ttl: bytes
    options: list[bytes]
    corrupt: float | None = None


Step = Cmd | Scan | Wake | DumpRestore


def b(x) -> bytes:
    return x if isinstance(x, bytes) else str(x).encode()


# ------------------------------------------------------------------------------------------
# The generator.

KEYS = [f"k{i}" for i in range(20)] + ["hll0", "hll1", "geo0", "geo1"] + [f"s{i}" for i in range(4)]
# Sorted sets on these keys only ever get score 0, so BYLEX ranges (defined only when all
# scores are equal) are asked only of them; RENAME never mixes them with the others, and
# geo commands never write them.
LEX_KEYS = KEYS[17:20]
PLAIN_KEYS = KEYS[:17] + KEYS[20:]
# Each type's commands pick one of its own keys most of the time (any key otherwise), so
# that most commands find their type and WRONGTYPE still comes often. Bitmaps are strings;
# HyperLogLogs are strings too (on string keys they meet plain strings: Redis' "not a valid
# HyperLogLog" error); geo sets are sorted sets (on k16 they meet arbitrary scores).
HOME_KEYS = {"string": KEYS[0:4], "hash": KEYS[4:8], "list": KEYS[8:11] + KEYS[11:12],
             "set": KEYS[12:16], "zset": KEYS[16:20], "bitmap": KEYS[0:4],
             "hyperloglog": KEYS[20:22] + KEYS[0:1], "geo": KEYS[22:24] + KEYS[16:17],
             "stream": KEYS[24:28]}
# Stream consumer groups and consumers the stream commands name.
GROUPS = ["g1", "g2", "g3"]
CONSUMERS = ["alice", "bob", "carol"]
# A minimum idle time either always or never met within a run (timing must not decide).
IDLE_NEVER_MS = "3600000000"
HOME_SHARE = 0.8
MEMBERS = ["a", "b", "c", "d", "e", "f", "g", "h", "1", "2", "3", "10", "-1", "007"]
LONG = "L" * 70  # longer than the 64-byte listpack/intset value limit

INVALID_INTEGERS = ["abc", "", " 5", "5 ", "1.5", "0x10", "+1", "1e3", "9223372036854775808",
                    "-9223372036854775809", "99999999999999999999"]
EDGE_INTEGERS = ["9223372036854775807", "-9223372036854775808", "-0", "4294967296", "2147483648"]
FLOATS_VALID = ["0", "1", "-1", "1.5", "-2.25", "0.1", "3.0", "1e3", "-0", "10", "2.5e-3", "inf",
                "-inf", "+inf", "Infinity", "1.7976931348623157e308", "4503599627370497", "1e20",
                "0x10", "123456789.123456789", "5e-324"]
FLOATS_INVALID = ["nan", "-nan", "1e400", "-1e400", "1e-400", "  5", "5 ", "", "abc", "1.5x", "inf1",
                  "--1", "1,5"]
PATTERNS = ["*", "a*", "*1*", "[a-c]", "?", "[^a]*", "\\*", "k*", "1?"]


# Families of generated commands, which `--skip` can leave out (to look past a known
# difference): a maker's family is its special one, or the type of the keys it prefers.
SPECIAL_FAMILIES = {"transaction": "transactions", "watch": "transactions", "stray": "transactions",
                    "scan": "scans", "blocking": "blocking", "wake": "blocking", "spop": "random",
                    "srandmember": "random", "hrandfield": "random", "object": "encoding", "bulk": "bulk",
                    "script": "scripts", "function": "scripts", "sort": "sort", "dump": "dump"}
FAMILIES = ["keys", "string", "hash", "list", "set", "zset", "stream", "bitmap", "hyperloglog", "geo",
            *sorted(set(SPECIAL_FAMILIES.values()))]


def family_of(maker_name: str, home: str | None) -> str:
    return SPECIAL_FAMILIES.get(maker_name) or home or "keys"


class Generator:
    """A seeded stream of step groups; each group is self-contained (a transaction, a random
    command with its snapshot, a scan ...)."""

    def __init__(self, seed: int, resp: int, skip: frozenset[str] = frozenset()):
        self.rng = random.Random(seed)
        self.resp = resp
        strings, hashes, lists, sets, zsets = "string", "hash", "list", "set", "zset"
        bitmaps, hyperloglogs, geos = "bitmap", "hyperloglog", "geo"
        streams = "stream"
        # Stream IDs grow with the run, so that XADD with explicit IDs mostly succeeds.
        self.stream_ms = 1
        # The weight keys SORT's BY reads (string keys w_<element>, hashes h_<element>), as
        # only the sort family writes them: the model that orders ties (`sort_same`).
        self.weight_keys: dict[bytes, bytes] = {}
        self.weight_hashes: dict[bytes, dict[bytes, bytes]] = {}
        makers = [
            # strings and keys (None: any key)
            (self.get, 3, strings), (self.set, 4, strings), (self.delete, 3, None),
            (self.exists, 2, None), (self.type, 3, None), (self.expire, 2, None), (self.ttl, 2, None),
            (self.persist, 1, None), (self.rename, 1.5, None), (self.incr, 1.5, strings),
            (self.append, 1.5, strings), (self.object, 3, None),
            # hashes
            (self.hset, 6, hashes), (self.hget, 2, hashes), (self.hmget, 1.5, hashes),
            (self.hgetall, 2, hashes), (self.hdel, 2, hashes), (self.hexists, 1, hashes),
            (self.hincrby, 2, hashes), (self.hincrbyfloat, 2, hashes), (self.hkeys, 1, hashes),
            (self.hvals, 1, hashes), (self.hlen, 1, hashes), (self.hsetnx, 1.5, hashes),
            (self.hrandfield, 1.5, hashes),
            # lists
            (self.push, 7, lists), (self.pop, 3, lists), (self.lrange, 3, lists),
            (self.lindex, 1.5, lists), (self.llen, 1, lists), (self.lset, 1.5, lists),
            (self.lrem, 1.5, lists), (self.ltrim, 1, lists), (self.linsert, 1.5, lists),
            (self.lpos, 2, lists), (self.lmove, 2, lists), (self.blocking, 1.5, lists),
            # sets
            (self.sadd, 6, sets), (self.srem, 2, sets), (self.smembers, 2, sets),
            (self.sismember, 1, sets), (self.smismember, 1, sets), (self.scard, 1, sets),
            (self.spop, 1.5, sets), (self.srandmember, 1.5, sets), (self.setop, 3, sets),
            (self.setopstore, 2, sets),
            # sorted sets
            (self.zadd, 8, zsets), (self.zrem, 2, zsets), (self.zscore, 1.5, zsets),
            (self.zmscore, 1, zsets), (self.zincrby, 2, zsets), (self.zcard, 1, zsets),
            (self.zcount, 2, zsets), (self.zrank, 2, zsets), (self.zrange, 5, zsets),
            (self.zrangebyscore, 3, zsets), (self.zremrangebyscore, 1.5, zsets),
            (self.zpop, 2.5, zsets),
            # streams
            (self.xadd, 8, streams), (self.xrange, 3, streams), (self.xlen, 1, streams),
            (self.xdel, 1.5, streams), (self.xtrim, 1.2, streams), (self.xread, 2, streams),
            (self.xgroup, 4, streams), (self.xreadgroup, 3.5, streams), (self.xack, 1.5, streams),
            (self.xpending, 2, streams), (self.xclaim, 1.5, streams), (self.xautoclaim, 1.2, streams),
            (self.xinfo, 2, streams), (self.xsetid, 0.5, streams),
            # bitmaps and bit fields
            (self.setbit, 4, bitmaps), (self.getbit, 2, bitmaps), (self.bitcount, 2.5, bitmaps),
            (self.bitpos, 2.5, bitmaps), (self.bitop, 1.5, bitmaps), (self.bitfield, 4, bitmaps),
            # HyperLogLog
            (self.pfadd, 5, hyperloglogs), (self.pfcount, 3, hyperloglogs),
            (self.pfmerge, 1.5, hyperloglogs), (self.hll_bytes, 1, hyperloglogs),
            # geo
            (self.geoadd, 5, geos), (self.georead, 3, geos), (self.geosearch, 5, geos),
            # scripts and functions
            (self.script, 5, None), (self.function, 2, None),
            # SORT and SORT_RO; DUMP/RESTORE across the two servers; LCS
            (self.sort, 4, None), (self.dump, 3, None), (self.lcs, 1.5, strings),
            # scans, bulk loads, transactions, wakes
            (self.scan, 2, None), (self.bulk, 0.6, None), (self.transaction, 2.5, None),
            (self.watch, 1.2, None), (self.stray, 0.3, None), (self.wake, 0.15, lists),
        ]
        unknown = set(skip) - set(FAMILIES)
        if unknown:
            raise ValueError(f"unknown families {sorted(unknown)}; known: {' '.join(FAMILIES)}")
        self.home_of = {m.__name__: t for m, _, t in makers}
        makers = [(m, w, t) for m, w, t in makers if family_of(m.__name__, t) not in skip]
        self.makers = [m for m, _, _ in makers]
        self.weights = [w for _, w, _ in makers]
        self.home: str | None = None
        # Transactions reuse the plain command makers (no snapshots, scans or wakes inside).
        excluded = {"scan", "bulk", "transaction", "watch", "stray", "wake", "spop", "srandmember",
                    "hrandfield", "sort", "dump"}
        self.queueable = [m for m in self.makers if m.__name__ not in excluded]

    def call(self, maker) -> list[Step]:
        """Runs a maker with its type's keys preferred."""
        outer, self.home = self.home, self.home_of[maker.__name__]
        try:
            return maker()
        finally:
            self.home = outer

    # --- argument pickers

    def pick(self, items):
        return self.rng.choice(items)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def key(self) -> str:
        if self.home is not None and self.chance(HOME_SHARE):
            return self.pick(HOME_KEYS[self.home])
        return self.pick(KEYS)

    def plain_key(self) -> str:
        key = self.key()
        return key if key in PLAIN_KEYS else self.pick(PLAIN_KEYS)

    def member(self) -> bytes:
        r = self.rng.random()
        if r < 0.02:
            return b(LONG + self.pick("ab"))
        if r < 0.03:
            return b"\x00\xff\r\n"
        if r < 0.05:
            return b""
        if r < 0.25:
            return b(self.rng.randint(-3, 20))
        return b(self.pick(MEMBERS))

    def members(self, low: int = 1, high: int = 4) -> list[bytes]:
        return [self.member() for _ in range(self.rng.randint(low, high))]

    def integer(self, low: int = -3, high: int = 10) -> str:
        r = self.rng.random()
        if r < 0.08:
            return self.pick(INVALID_INTEGERS)
        if r < 0.14:
            return self.pick(EDGE_INTEGERS)
        return str(self.rng.randint(low, high))

    def index(self) -> str:
        r = self.rng.random()
        if r < 0.03:
            return self.pick(INVALID_INTEGERS)
        if r < 0.1:
            return self.pick(EDGE_INTEGERS + ["100", "-100", "99999999999"])
        return str(self.rng.randint(-6, 8))

    def float(self) -> str:
        r = self.rng.random()
        if r < 0.05:
            return self.pick(FLOATS_INVALID)
        if r < 0.3:
            return self.pick(FLOATS_VALID)
        if r < 0.45:
            return f"{self.rng.uniform(-10, 10):.{self.rng.randint(0, 4)}f}"
        return str(self.rng.randint(-3, 10))

    def count(self, small_negative: bool = False) -> str:
        """A count argument; with `small_negative`, negative counts stay small (SRANDMEMBER and
        HRANDFIELD answer |count| elements, so a huge one would build a huge reply)."""
        r = self.rng.random()
        if r < 0.06:
            return self.pick(INVALID_INTEGERS)
        if r < 0.1:
            return self.pick(["9223372036854775807", "4294967296", "1000", "0", "-0"]
                             + ([] if small_negative else ["-9223372036854775808", "-1000"]))
        return str(self.rng.randint(-4, 8))

    def value(self) -> bytes:
        r = self.rng.random()
        if r < 0.3:
            return b(self.rng.randint(-5, 100))
        if r < 0.35:
            return b(self.pick(EDGE_INTEGERS + ["3.5", "1e3", "0x10", " 7", "12345678901234567890"]))
        if r < 0.4:
            return b(LONG)
        return self.member()

    def score_key(self) -> tuple[str, bool]:
        key = self.key()
        return key, key in LEX_KEYS

    def score(self, lex: bool) -> str:
        if lex:
            return "0" if self.chance(0.95) else self.pick(["abc", "nan", "1e400"])
        return self.float()

    def score_bound(self) -> str:
        r = self.rng.random()
        if r < 0.2:
            return self.pick(["-inf", "+inf", "inf", "(-inf", "(+inf", "(inf"])
        if r < 0.28:
            return self.pick(["(", "((1", "abc", "nan", "(nan", "1e400", " 1", "(1 ", "", "[1", "0x10"])
        value = self.float() if self.chance(0.3) else str(self.rng.randint(-3, 10))
        return ("(" if self.chance(0.35) else "") + value

    def lex_bound(self) -> str:
        r = self.rng.random()
        if r < 0.25:
            return self.pick(["-", "+"])
        if r < 0.32:
            return self.pick(["a", "", "*", "(", "[", "-a", "+a"])
        return self.pick("[(") + self.pick(MEMBERS + ["", "b0", "zz"])

    def arity_noise(self, args: list) -> list:
        """Occasionally drops or adds an argument (wrong arity, extra options)."""
        r = self.rng.random()
        if r < 0.015 and len(args) > 1:
            return args[:-1]
        if r < 0.025:
            return args + [b(self.pick(["x", "1", "", "WITHSCORES", "COUNT"]))]
        return args

    def cmd(self, *args, kind: str = "exact", noise: bool = True, **extra) -> Cmd:
        argv = [b(a) for a in args]
        if noise:
            argv = self.arity_noise(argv)
        return Cmd(argv, kind=kind, **extra)

    # --- strings and keys

    def get(self):
        return [self.cmd("GET", self.key())]

    def set(self):
        args = ["SET", self.key(), self.value()]
        options = []
        if self.chance(0.15):
            options += [self.pick(["EX", "PX"]), self.pick(["100000", "10000000", "0", "-1", "abc",
                                                            "9223372036854775807"])]
        if self.chance(0.05):
            options.append("KEEPTTL")
        if self.chance(0.15):
            options.append(self.pick(["NX", "XX"]))
        if self.chance(0.1):
            options.append("GET")
        if self.chance(0.02):
            options.append(self.pick(["NX", "XX", "FOO", "EX"]))
        self.rng.shuffle(options)
        return [self.cmd(*args, *options)]

    def delete(self):
        return [self.cmd("DEL", *[self.key() for _ in range(self.rng.randint(1, 3))])]

    def exists(self):
        return [self.cmd("EXISTS", *[self.key() for _ in range(self.rng.randint(1, 3))])]

    def type(self):
        return [self.cmd("TYPE", self.key())]

    def expire(self):
        seconds = self.pick(["100000", "5000", "250000", "0", "-5", "abc", "9223372036854775807",
                             "9223372036854770", "1.5", ""]) if self.chance(0.3) else str(
            self.rng.randint(1000, 200000))
        options = []
        if self.chance(0.3):
            options.append(self.pick(["NX", "XX", "GT", "LT"]))
        if self.chance(0.05):
            options.append(self.pick(["NX", "XX", "GT", "LT", "FOO"]))
        return [self.cmd("EXPIRE", self.key(), seconds, *options)]

    def ttl(self):
        return [self.cmd("TTL", self.key(), kind="ttl")]

    def persist(self):
        return [self.cmd("PERSIST", self.key())]

    def rename(self):
        pool = LEX_KEYS if self.chance(0.2) else PLAIN_KEYS
        return [self.cmd("RENAME", self.pick(pool), self.pick(pool), noise=False)]

    def incr(self):
        return [self.cmd("INCR", self.key())]

    def append(self):
        return [self.cmd("APPEND", self.key(), self.value())]

    def object(self):
        if self.chance(0.05):
            return [self.cmd("OBJECT", self.pick(["FOO", "encoding", "Encoding"]), self.key())]
        return [self.cmd("OBJECT", "ENCODING", self.key())]

    # --- hashes

    def hset(self):
        pairs = []
        for _ in range(self.rng.randint(1, 4)):
            pairs += [self.member(), self.value()]
        if self.chance(0.03):
            pairs.pop()
        return [self.cmd("HSET", self.key(), *pairs)]

    def hget(self):
        return [self.cmd("HGET", self.key(), self.member())]

    def hmget(self):
        return [self.cmd("HMGET", self.key(), *self.members())]

    def hgetall(self):
        return [self.cmd("HGETALL", self.key(), kind="pairs")]

    def hdel(self):
        return [self.cmd("HDEL", self.key(), *self.members())]

    def hexists(self):
        return [self.cmd("HEXISTS", self.key(), self.member())]

    def hincrby(self):
        return [self.cmd("HINCRBY", self.key(), self.member(), self.integer(-5, 20))]

    def hincrbyfloat(self):
        return [self.cmd("HINCRBYFLOAT", self.key(), self.member(), self.float())]

    def hkeys(self):
        return [self.cmd("HKEYS", self.key(), kind="set")]

    def hvals(self):
        return [self.cmd("HVALS", self.key(), kind="set")]

    def hlen(self):
        return [self.cmd("HLEN", self.key())]

    def hsetnx(self):
        return [self.cmd("HSETNX", self.key(), self.member(), self.value())]

    def hrandfield(self):
        key = self.key()
        snapshot = Cmd([b"HGETALL", b(key)], kind="pairs")
        if self.chance(0.2):
            return [snapshot, Cmd([b"HRANDFIELD", b(key)], kind="hrandfield")]
        count = self.count(small_negative=True)
        args = [b"HRANDFIELD", b(key), b(count)]
        withvalues = self.chance(0.4)
        if withvalues:
            args.append(b"WITHVALUES")
        if self.chance(0.03):
            args.append(b"FOO")
        number = int(count) if _is_int(count) else None
        return [snapshot, Cmd(args, kind="hrandfield", count=number, withvalues=withvalues)]

    # --- lists

    def push(self):
        return [self.cmd(self.pick(["LPUSH", "RPUSH"]), self.key(), *self.members(1, 5))]

    def pop(self):
        args = [self.pick(["LPOP", "RPOP"]), self.key()]
        if self.chance(0.4):
            args.append(self.count())
        return [self.cmd(*args)]

    def lrange(self):
        return [self.cmd("LRANGE", self.key(), self.index(), self.index())]

    def lindex(self):
        return [self.cmd("LINDEX", self.key(), self.index())]

    def llen(self):
        return [self.cmd("LLEN", self.key())]

    def lset(self):
        return [self.cmd("LSET", self.key(), self.index(), self.member())]

    def lrem(self):
        return [self.cmd("LREM", self.key(), self.integer(-3, 3), self.member())]

    def ltrim(self):
        return [self.cmd("LTRIM", self.key(), self.index(), self.index())]

    def linsert(self):
        where = self.pick(["BEFORE", "AFTER", "before", "after"] * 5 + ["MIDDLE"])
        return [self.cmd("LINSERT", self.key(), where, self.member(), self.member())]

    def lpos(self):
        args = ["LPOS", self.key(), self.member()]
        options = []
        if self.chance(0.3):
            options += ["RANK", self.pick(["1", "2", "-1", "-2", "0", "3", "abc",
                                           "-9223372036854775808", "9223372036854775807"])]
        if self.chance(0.3):
            options += ["COUNT", self.pick(["0", "1", "2", "5", "-1", "abc"])]
        if self.chance(0.2):
            options += ["MAXLEN", self.pick(["0", "1", "2", "3", "-1", "abc"])]
        if self.chance(0.03):
            options += [self.pick(["FOO", "RANK", "COUNT"])]
        return [self.cmd(*args, *options)]

    def direction(self) -> str:
        return self.pick(["LEFT", "RIGHT"] * 10 + ["left", "UP"])

    def lmove(self):
        return [self.cmd("LMOVE", self.key(), self.key(), self.direction(), self.direction())]

    def short_timeout(self) -> str:
        return self.pick(["0.01", "0.01", "0.02", "0.001"])

    def blocking(self):
        """A blocking command whose outcome does not depend on timing: either a short timeout
        (empty keys time out, full ones answer at once) or a push of its first key just before
        (it has data unless it holds another type, which answers at once too)."""
        name = self.pick(["BLPOP", "BRPOP", "BLMOVE"])
        keys = [self.key() for _ in range(self.rng.randint(1, 3))]
        if name == "BLMOVE":
            args = [name, keys[0], self.key(), self.direction(), self.direction()]
        else:
            args = [name, *keys]
        steps = []
        if self.chance(0.6):
            steps.append(self.cmd("RPUSH", keys[0], self.member(), noise=False))
            timeout = self.pick(["0", "1", "0.5", "100", "-1", "abc", "inf", "nan", "1e400",
                                 "9223372036854775807", "", "0x10", "-0"])
        else:
            timeout = self.short_timeout() if self.chance(0.92) else self.pick(["-1", "abc", "-0.01", "nan"])
        steps.append(self.cmd(*args, timeout, noise=False))
        return steps

    # --- streams (no `*` IDs: they come from each server's clock)

    def stream_id(self, strict: bool = True) -> str:
        """An entry ID near the run's current one, sometimes partial, special or invalid."""
        r = self.rng.random()
        if r < 0.04:
            return self.pick(["abc", "1-x", "-1", "1-", "", "(1", "18446744073709551616",
                              "18446744073709551615-18446744073709551615"])
        if r < 0.08 and not strict:
            return self.pick(["-", "+"])
        ms = max(0, self.stream_ms - self.rng.randint(0, 6))
        if r < 0.2:
            return str(ms)
        return f"{ms}-{self.rng.randint(0, 3)}"

    def stream_fields(self) -> list[bytes]:
        pairs = []
        fields = ["f", "g"] if self.chance(0.7) else MEMBERS
        for _ in range(self.rng.randint(1, 3)):
            pairs += [b(self.pick(fields)), self.value()]
        return pairs

    def trim_options(self, xadd: bool) -> list[str]:
        if xadd and not self.chance(0.3):
            return []
        options = [self.pick(["MAXLEN", "MINID"] * 8 + ["maxlen", "FOO"])]
        approximate = self.chance(0.35)
        if approximate:
            options.append("~")
        elif self.chance(0.3):
            options.append("=")
        if options[0].upper() == "MINID":
            options.append(self.stream_id())
        else:
            options.append(self.pick(["0", "1", "3", "10", "50", "-1", "abc"]) if self.chance(0.3)
                           else str(self.rng.randint(0, 12)))
        if self.chance(0.2):
            options += ["LIMIT", self.pick(["0", "1", "5", "100", "-1", "x"])]
        return options

    def xadd(self):
        args = ["XADD", self.key()]
        if self.chance(0.1):
            args.append("NOMKSTREAM")
        args += self.trim_options(xadd=True)
        if self.chance(0.85):
            self.stream_ms += self.rng.randint(0, 2)
            r = self.rng.random()
            if r < 0.15:
                entry_id = f"{self.stream_ms}-*"
            elif r < 0.3:
                entry_id = str(self.stream_ms)
            else:
                entry_id = f"{self.stream_ms}-{self.rng.randint(0, 4)}"
        else:
            entry_id = self.pick([self.stream_id(), "0-0", "0", "0-*", "18446744073709551615-*"])
        steps = []
        if self.chance(0.03):
            # Past stream-node-max-entries (100), so that nodes split and `~` trims have
            # whole nodes to remove.
            key = args[1]
            for _ in range(self.rng.randint(100, 130)):
                self.stream_ms += 1
                steps.append(self.cmd("XADD", key, f"{self.stream_ms}-0", "f", "v", noise=False))
        return steps + [self.cmd(*args, entry_id, *self.stream_fields())]

    def xrange(self):
        name = self.pick(["XRANGE", "XREVRANGE"])
        bounds = [self.stream_id(strict=False), self.stream_id(strict=False)]
        if self.chance(0.2):
            bounds[0] = "(" + bounds[0]
        if self.chance(0.2):
            bounds[1] = "(" + bounds[1]
        if self.chance(0.4):
            bounds = ["-", "+"] if name == "XRANGE" else ["+", "-"]
        options = ["COUNT", self.count()] if self.chance(0.3) else []
        return [self.cmd(name, self.key(), *bounds, *options)]

    def xlen(self):
        return [self.cmd("XLEN", self.key())]

    def xdel(self):
        return [self.cmd("XDEL", self.key(), *[self.stream_id() for _ in range(self.rng.randint(1, 3))])]

    def xtrim(self):
        return [self.cmd("XTRIM", self.key(), *self.trim_options(xadd=False))]

    def xread(self):
        keys = [self.key() for _ in range(self.rng.randint(1, 2))]
        ids = [self.pick(["0", "$", self.stream_id(), "0-0"]) for _ in keys]
        options = []
        if self.chance(0.4):
            options += ["COUNT", self.count()]
        if self.chance(0.15):
            options += ["BLOCK", self.pick(["10", "1", "-1", "abc"])]
        if self.chance(0.03):
            ids = ids[:-1] or [">"]
        return [self.cmd("XREAD", *options, "STREAMS", *keys, *ids)]

    def xgroup(self):
        key, group = self.key(), self.pick(GROUPS)
        sub = self.pick(["CREATE"] * 4 + ["SETID", "DESTROY", "CREATECONSUMER", "DELCONSUMER",
                                          "create", "HELP", "FOO"])
        if sub.upper() == "CREATE":
            args = [sub, key, group, self.pick(["$", "0", "0-0", self.stream_id()])]
            if self.chance(0.5):
                args.append("MKSTREAM")
            if self.chance(0.15):
                args += ["ENTRIESREAD", self.pick(["0", "3", "-1", "-2", "x"])]
        elif sub == "SETID":
            args = [sub, key, group, self.pick(["$", "0", self.stream_id(strict=False)])]
            if self.chance(0.2):
                args += ["ENTRIESREAD", self.pick(["0", "2", "-1", "-5"])]
        elif sub == "DESTROY":
            args = [sub, key, group]
        elif sub in ("CREATECONSUMER", "DELCONSUMER"):
            args = [sub, key, group, self.pick(CONSUMERS)]
        elif sub == "HELP":
            args = [sub]
        else:
            args = [sub, key]
        return [self.cmd("XGROUP", *args)]

    def ensure_group(self, key: str, group: str) -> list[Cmd]:
        """Often creates the group first (keys are shared and deleted often, groups with them),
        so that the group commands mostly find theirs."""
        if self.chance(0.35):
            return [self.cmd("XGROUP", "CREATE", key, group, self.pick(["0", "$"]), "MKSTREAM", noise=False)]
        return []

    def xreadgroup(self):
        keys = [self.key() for _ in range(self.rng.choice([1, 1, 1, 2]))]
        ids = [">" if self.chance(0.75) else self.pick(["0", self.stream_id(), "$"]) for _ in keys]
        options = ["GROUP", self.pick(GROUPS), self.pick(CONSUMERS)]
        setup = self.ensure_group(keys[0], options[1])
        if self.chance(0.4):
            options += ["COUNT", self.pick(["1", "2", "3", "0", "-1", "x"])]
        if self.chance(0.15):
            options.append("NOACK")
        if self.chance(0.1):
            options += ["BLOCK", self.pick(["10", "1"])]
        if self.chance(0.05):
            self.rng.shuffle(options)
        return setup + [self.cmd("XREADGROUP", *options, "STREAMS", *keys, *ids)]

    def xack(self):
        return [self.cmd("XACK", self.key(), self.pick(GROUPS),
                         *[self.stream_id() for _ in range(self.rng.randint(1, 3))])]

    def xpending(self):
        key, group = self.key(), self.pick(GROUPS)
        setup = self.ensure_group(key, group)
        if self.chance(0.4):
            return setup + [self.cmd("XPENDING", key, group)]
        args = []
        if self.chance(0.3):
            args += ["IDLE", self.pick(["0", IDLE_NEVER_MS, "-5", "x"])]
        args += [self.stream_id(strict=False) if self.chance(0.4) else "-",
                 self.stream_id(strict=False) if self.chance(0.4) else "+",
                 self.pick(["10", "1", "3", "0", "-1", "x"])]
        if self.chance(0.4):
            args.append(self.pick(CONSUMERS))
        return setup + [self.cmd("XPENDING", key, group, *args, kind="stream_times")]

    def xclaim(self):
        key, group = self.key(), self.pick(GROUPS)
        setup = self.ensure_group(key, group)
        args = ["XCLAIM", key, group, self.pick(CONSUMERS),
                self.pick(["0", "0", IDLE_NEVER_MS, "-1", "x"])]
        args += [self.stream_id() for _ in range(self.rng.randint(1, 3))]
        for option in ["IDLE", "TIME", "RETRYCOUNT", "FORCE", "JUSTID", "LASTID", "FOO"]:
            if self.chance(0.12):
                if option in ("FORCE", "JUSTID", "FOO"):
                    args.append(option)
                elif option == "LASTID":
                    args += [option, self.stream_id()]
                elif option == "TIME":
                    args += [option, self.pick(["1000", "99999999999999", "-1", "x"])]
                else:
                    args += [option, self.pick(["0", "5", "-3", "x"])]
        return setup + [self.cmd(*args, kind="stream_times")]

    def xautoclaim(self):
        key, group = self.key(), self.pick(GROUPS)
        setup = self.ensure_group(key, group)
        args = ["XAUTOCLAIM", key, group, self.pick(CONSUMERS),
                self.pick(["0", "0", IDLE_NEVER_MS, "-1", "x"]), self.pick(["0", "-", self.stream_id()])]
        if self.chance(0.5):
            args += ["COUNT", self.pick(["1", "2", "5", "0", "-1", "x"])]
        if self.chance(0.3):
            args.append("JUSTID")
        return setup + [self.cmd(*args, kind="stream_times")]

    def xinfo(self):
        key = self.key()
        which = self.rng.random()
        if which < 0.35:
            return [self.cmd("XINFO", "STREAM", key, kind="stream_times")]
        if which < 0.6:
            extra = ["COUNT", self.pick(["0", "1", "3", "-1", "x"])] if self.chance(0.4) else []
            return [self.cmd("XINFO", "STREAM", key, "FULL", *extra, kind="stream_times")]
        if which < 0.8:
            return [self.cmd("XINFO", "GROUPS", key)]
        if which < 0.97:
            return [self.cmd("XINFO", "CONSUMERS", key, self.pick(GROUPS), kind="stream_times")]
        return [self.cmd("XINFO", self.pick(["HELP", "FOO", "stream"]), key, kind="stream_times")]

    def xsetid(self):
        args = ["XSETID", self.key(), self.stream_id() if self.chance(0.5) else f"{self.stream_ms + 5}-0"]
        if self.chance(0.3):
            args += ["ENTRIESADDED", self.pick(["0", "1000", "-1", "x"])]
        if self.chance(0.3):
            args += ["MAXDELETEDID", self.stream_id()]
        return [self.cmd(*args)]

    # --- sets

    def sadd(self):
        return [self.cmd("SADD", self.key(), *self.members(1, 5))]

    def srem(self):
        return [self.cmd("SREM", self.key(), *self.members())]

    def smembers(self):
        return [self.cmd("SMEMBERS", self.key(), kind="set")]

    def sismember(self):
        return [self.cmd("SISMEMBER", self.key(), self.member())]

    def smismember(self):
        return [self.cmd("SMISMEMBER", self.key(), *self.members())]

    def scard(self):
        return [self.cmd("SCARD", self.key())]

    def spop(self):
        key = self.key()
        steps = [Cmd([b"SMEMBERS", b(key)], kind="set")]
        if self.chance(0.3):
            steps.append(Cmd([b"SPOP", b(key)], kind="spop"))
        else:
            count = self.count()
            steps.append(Cmd([b"SPOP", b(key), b(count)], kind="spop",
                             count=int(count) if _is_int(count) else None))
        steps += [Cmd([b"SCARD", b(key)]), Cmd([b"EXISTS", b(key)]), Cmd([b"DEL", b(key)])]
        return steps

    def srandmember(self):
        key = self.key()
        snapshot = Cmd([b"SMEMBERS", b(key)], kind="set")
        if self.chance(0.3):
            return [snapshot, Cmd([b"SRANDMEMBER", b(key)], kind="srandmember")]
        count = self.count(small_negative=True)
        return [snapshot, Cmd([b"SRANDMEMBER", b(key), b(count)], kind="srandmember",
                              count=int(count) if _is_int(count) else None)]

    def setop(self):
        name = self.pick(["SINTER", "SUNION", "SDIFF"])
        return [self.cmd(name, *[self.key() for _ in range(self.rng.randint(1, 3))], kind="set")]

    def setopstore(self):
        name = self.pick(["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"])
        destination = self.plain_key()
        return [self.cmd(name, destination, *[self.key() for _ in range(self.rng.randint(1, 3))])]

    # --- sorted sets

    def zadd(self):
        key, lex = self.score_key()
        options = []
        for option, p in (("NX", 0.1), ("XX", 0.1), ("GT", 0.1), ("LT", 0.1), ("CH", 0.15),
                          ("INCR", 0.1)):
            if self.chance(p):
                options.append(option if self.chance(0.9) else option.lower())
        self.rng.shuffle(options)
        pairs = []
        for _ in range(1 if "INCR" in options and self.chance(0.85) else self.rng.randint(1, 4)):
            pairs += [self.score(lex), self.member()]
        if self.chance(0.03):
            pairs.pop()
        if self.chance(0.02):
            pairs.append("NX")
        return [self.cmd("ZADD", key, *options, *pairs)]

    def zrem(self):
        return [self.cmd("ZREM", self.key(), *self.members())]

    def zscore(self):
        return [self.cmd("ZSCORE", self.key(), self.member())]

    def zmscore(self):
        return [self.cmd("ZMSCORE", self.key(), *self.members())]

    def zincrby(self):
        key, lex = self.score_key()
        return [self.cmd("ZINCRBY", key, self.score(lex), self.member())]

    def zcard(self):
        return [self.cmd("ZCARD", self.key())]

    def zcount(self):
        return [self.cmd("ZCOUNT", self.key(), self.score_bound(), self.score_bound())]

    def zrank(self):
        return [self.cmd(self.pick(["ZRANK", "ZREVRANK"]), self.key(), self.member())]

    def limit(self) -> list[str]:
        return ["LIMIT", self.pick(["0", "1", "2", "-1", "100", "abc"]),
                self.pick(["1", "2", "3", "0", "-1", "-5", "100", "abc"])]

    def zrange(self):
        by = self.rng.random()
        if by < 0.35:
            key, start, stop, options = self.key(), self.index(), self.index(), []
        elif by < 0.75:
            key, start, stop, options = self.key(), self.score_bound(), self.score_bound(), ["BYSCORE"]
        else:
            key, start, stop, options = self.pick(LEX_KEYS), self.lex_bound(), self.lex_bound(), ["BYLEX"]
        if self.chance(0.3):
            options.append("REV")
        if self.chance(0.3):
            options += self.limit()
        if self.chance(0.3):
            options.append("WITHSCORES")
        if self.chance(0.03):
            options.append(self.pick(["BYSCORE", "BYLEX", "FOO", "LIMIT"]))
        if self.chance(0.1) and "LIMIT" not in options:
            self.rng.shuffle(options)
        return [self.cmd("ZRANGE", key, start, stop, *options)]

    def zrangebyscore(self):
        options = []
        if self.chance(0.4):
            options.append("WITHSCORES")
        if self.chance(0.3):
            options += self.limit()
        if self.chance(0.1) and len(options) > 1 and options[0] == "WITHSCORES":
            options = options[1:] + ["WITHSCORES"]
        return [self.cmd("ZRANGEBYSCORE", self.key(), self.score_bound(), self.score_bound(), *options)]

    def zremrangebyscore(self):
        return [self.cmd("ZREMRANGEBYSCORE", self.key(), self.score_bound(), self.score_bound())]

    def zpop(self):
        args = [self.pick(["ZPOPMIN", "ZPOPMAX"]), self.key()]
        if self.chance(0.5):
            args.append(self.count())
        return [self.cmd(*args)]

    # --- bitmaps and bit fields

    def bit_offset(self) -> str:
        r = self.rng.random()
        if r < 0.05:
            # Out of range or not integers (never a huge valid one: it would allocate 512 MB).
            return self.pick(["-1", "abc", "", "4294967296", "1.5", "+3", "9223372036854775807"])
        if r < 0.15:
            return str(self.rng.randint(100, 3000))
        return str(self.rng.randint(0, 80))

    def bit_range(self) -> list[str]:
        return [self.index() if self.chance(0.5) else str(self.rng.randint(-40, 40)),
                self.index() if self.chance(0.5) else str(self.rng.randint(-40, 40))]

    def unit(self) -> list[str]:
        r = self.rng.random()
        if r < 0.4:
            return []
        if r < 0.95:
            return [self.pick(["BIT", "BYTE", "bit", "byte"])]
        return [self.pick(["BITS", "", "x"])]

    def setbit(self):
        value = self.pick(["0", "1"] * 10 + ["2", "-1", "abc", ""])
        return [self.cmd("SETBIT", self.key(), self.bit_offset(), value)]

    def getbit(self):
        return [self.cmd("GETBIT", self.key(), self.bit_offset())]

    def bitcount(self):
        args = ["BITCOUNT", self.key()]
        if self.chance(0.7):
            args += self.bit_range() + self.unit()
        return [self.cmd(*args)]

    def bitpos(self):
        bit = self.pick(["0", "1"] * 8 + ["2", "abc", "-1"])
        args = ["BITPOS", self.key(), bit]
        r = self.rng.random()
        if r < 0.3:
            args.append(self.bit_range()[0])
        elif r < 0.8:
            args += self.bit_range() + self.unit()
        return [self.cmd(*args)]

    def bitop(self):
        op = self.pick(["AND", "OR", "XOR", "NOT", "and", "not"] * 4 + ["NAND", ""])
        sources = [self.key() for _ in range(1 if op.upper() == "NOT" and self.chance(0.9)
                                             else self.rng.randint(1, 3))]
        return [self.cmd("BITOP", op, self.plain_key(), *sources)]

    def field_type(self) -> str:
        r = self.rng.random()
        if r < 0.04:
            return self.pick(["u64", "i65", "i0", "u0", "x8", "", "I8", "u", "i-1", "u08"])
        if r < 0.12:
            return self.pick(["i64", "u63", "i63", "i1", "u1"])
        return self.pick("iu") + str(self.rng.randint(1, 16))

    def field_offset(self) -> str:
        r = self.rng.random()
        if r < 0.03:
            return self.pick(["-1", "#-1", "abc", "#", "4294967296", "#9223372036854775807"])
        if r < 0.3:
            return "#" + str(self.rng.randint(0, 12))
        return str(self.rng.randint(0, 100))

    def bitfield(self):
        read_only = self.chance(0.15)
        args = ["BITFIELD_RO" if read_only else "BITFIELD", self.key()]
        for _ in range(self.rng.randint(0, 4)):
            r = self.rng.random()
            if r < 0.15:
                args += ["OVERFLOW", self.pick(["WRAP", "SAT", "FAIL", "wrap", "sat", "fail"] * 3
                                               + ["FOO"])]
            elif r < 0.5 or read_only and self.chance(0.9):
                args += ["GET", self.field_type(), self.field_offset()]
            else:
                op = self.pick(["SET", "INCRBY", "incrby"])
                amount = self.integer(-300, 300) if self.chance(0.8) else self.pick(
                    EDGE_INTEGERS + ["127", "128", "-129", "255", "256"])
                args += [op, self.field_type(), self.field_offset(), amount]
        if self.chance(0.02):
            args.append(self.pick(["GET", "SET", "FOO"]))
        return [self.cmd(*args)]

    # --- HyperLogLog

    # Corrupt or foreign values. None ends with an XZERO opcode cut short: Redis reads its
    # missing byte past the value's end, where its own earlier write may have left a byte
    # that no command shows (Weft reads the terminator Redis has after a SET, 0).
    HLL_CORRUPT = [
        b"HYLL", b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\x00",
        b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xff\x00",
        b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x3f\xff\x3f\xff",
        b"HYLL\x01\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x7f\xff",
        b"HYLL\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xff",
        b"HYLL\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xff",
        b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\xbc\x7f\xfe",
        b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xfe\xfc\xfc",
        b"HYLX\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xff",
    ]

    def hll_element(self) -> bytes:
        if self.chance(0.5):
            return self.member()
        return b(self.rng.randint(0, 100000))

    def pfadd(self):
        key = self.key()
        r = self.rng.random()
        if r < 0.05:
            # Enough distinct elements to cross hll-sparse-max-bytes (sparse to dense).
            start = self.rng.randint(0, 10**6)
            return [self.cmd("PFADD", key, *[str(start + i) for i in
                                             range(self.pick([300, 1500, 4000]))], noise=False)]
        return [self.cmd("PFADD", key, *[self.hll_element() for _ in range(self.rng.randint(0, 6))])]

    def pfcount(self):
        return [self.cmd("PFCOUNT", *[self.key() for _ in range(self.rng.randint(1, 3))])]

    def pfmerge(self):
        return [self.cmd("PFMERGE", self.key(), *[self.key() for _ in range(self.rng.randint(0, 3))])]

    def hll_bytes(self):
        """The stored bytes (byte for byte), a fresh start, a corrupt or foreign value, or the
        sparse limit."""
        key = self.key()
        r = self.rng.random()
        if r < 0.5:
            return [self.cmd("GET", key, noise=False), self.cmd("STRLEN", key, noise=False)]
        if r < 0.7:
            return [self.cmd("DEL", key, noise=False)]
        if r < 0.9:
            value = self.pick(self.HLL_CORRUPT)
            if self.chance(0.3):
                value += bytes(self.rng.randrange(256) for _ in range(self.rng.randint(1, 6)))
            if _ends_in_cut_xzero(value):
                value += b"\x00"
            return [self.cmd("SET", key, value, noise=False)]
        limit = self.pick(["3000", "3000", "50", "200", "0"])
        return [self.cmd("CONFIG", "SET", "hll-sparse-max-bytes", limit, noise=False)]

    # --- geo

    def geo_key(self) -> str:
        """A key geo commands may write: never one of the lexicographic-range keys."""
        key = self.key()
        return key if key not in LEX_KEYS else self.pick(HOME_KEYS["geo"])

    def longitude(self) -> str:
        r = self.rng.random()
        if r < 0.03:
            return self.pick(["181", "-180.0001", "abc", "", "inf", "nan", "1e400"])
        if r < 0.08:
            return self.pick(["180", "-180", "0", "-0"])
        return f"{self.rng.uniform(-180, 180):.{self.rng.randint(0, 7)}f}"

    def latitude(self) -> str:
        r = self.rng.random()
        if r < 0.03:
            return self.pick(["86", "-85.06", "abc", "90", "-inf"])
        if r < 0.08:
            return self.pick(["85.05112878", "-85.05112878", "0", "85.05112877"])
        return f"{self.rng.uniform(-85.05, 85.05):.{self.rng.randint(0, 7)}f}"

    def geo_unit(self) -> str:
        return self.pick(["m", "km", "mi", "ft", "M", "KM"] * 6 + ["parsec", ""])

    def geo_distance(self) -> str:
        r = self.rng.random()
        if r < 0.04:
            return self.pick(["-1", "abc", "", "nan", "inf", "0"])
        return self.pick([str(self.rng.randint(1, 500)), str(self.rng.randint(500, 5000)),
                          f"{self.rng.uniform(0, 20000):.3f}", "20000"])

    # --- scripts: EVAL/EVALSHA/EVAL_RO of scripts that call commands and convert their
    # replies both ways (errors included), and functions of a library loaded alongside.

    SCRIPTS = [
        "return redis.call('get', KEYS[1])",
        "return redis.call('incrby', KEYS[1], ARGV[1])",
        "return {redis.call('set', KEYS[1], ARGV[1]), redis.call('get', KEYS[1])}",
        "return redis.pcall('lpush', KEYS[1], ARGV[1])",
        "return redis.call('lpush', KEYS[1], ARGV[1])",
        "return redis.call('hgetall', KEYS[1])",
        "return redis.call('smembers', KEYS[1])",
        "return redis.call('zrange', KEYS[1], 0, -1, 'withscores')",
        "return redis.call('type', KEYS[1])",
        "return redis.call('exists', KEYS[1], KEYS[2])",
        "local t = {} for i = 1, (tonumber(ARGV[1]) or 3) % 7 do t[i] = i * 1.5 end return t",
        "return {1, 2, nil, 4}",
        "return {ok = ARGV[1]}",
        "return {err = ARGV[1]}",
        "return redis.error_reply(ARGV[1])",
        "return redis.status_reply(ARGV[1])",
        "return tonumber(ARGV[1])",
        "return ARGV[1] == '1'",
        "return redis.sha1hex(ARGV[1])",
        "return redis.call('nosuchcommand')",
        "return redis.call('get')",
        "return a_global",
        "b_global = 1",
        "return redis.call('set', KEYS[1], {})",
        "redis.setresp(3) return redis.call('hgetall', KEYS[1])",
        "redis.setresp(3) return redis.call('zscore', KEYS[1], ARGV[1])",
        "redis.setresp(3) return {map = {a = 1}, 1}",
        "return {double = tonumber(ARGV[1]) or 0.5}",
        "return cjson.decode('[1,2,3]')",
        "return cmsgpack.unpack(cmsgpack.pack({1, 2, ARGV[1]}))",
        "return bit.band(tonumber(ARGV[1]) or 0, 255)",
        "return struct.unpack('>I2', struct.pack('>I2', (tonumber(ARGV[1]) or 7) % 65536))",
        "local ok, e = pcall(function() redis.call('incr', KEYS[1]) end) return {tostring(ok), e}",
        "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])",
        "#!lua flags=no-writes\nreturn redis.call('set', KEYS[1], 'x')",
        "return redis.call('del', KEYS[1])",
    ]

    def script_arg(self) -> str:
        return self.pick(["1", "2", "-3", "10", "2.5", "abc", "", "ERR custom", "-WRONG x",
                          "1e3", "OK"])

    def script(self):
        body = self.pick(self.SCRIPTS)
        keys = [self.key() for _ in range(self.rng.randint(1, 2))]
        argv = [self.script_arg() for _ in range(self.rng.randint(0, 2))]
        # Hashes and sets come back in an order Redis does not define: compared as such.
        kind = "exact"
        if "hgetall" in body:
            kind = "pairs"
        elif "smembers" in body:
            kind = "set"
        r = self.rng.random()
        if r < 0.5:
            return [self.cmd("EVAL", body, str(len(keys)), *keys, *argv, kind=kind)]
        if r < 0.65:
            return [self.cmd("EVAL_RO", body, str(len(keys)), *keys, *argv, kind=kind)]
        if r < 0.7:
            return [self.cmd("EVAL", body, str(len(keys) + 5), *keys, *argv)]
        # SCRIPT LOAD always succeeds (no noise), so EVALSHA never depends on what earlier
        # commands happened to cache.
        sha = hashlib.sha1(body.encode()).hexdigest()
        return [self.cmd("SCRIPT", "LOAD", body, noise=False),
                self.cmd("EVALSHA", sha if self.chance(0.9) else sha.upper(), str(len(keys)),
                         *keys, *argv, kind=kind)]

    LIBRARY = (
        "#!lua name=difflib\n"
        "redis.register_function('dget', function(keys, args) return redis.call('get', keys[1]) end)\n"
        "redis.register_function('dset', function(keys, args) return redis.call('set', keys[1], args[1]) end)\n"
        "redis.register_function{function_name='dlen', callback=function(keys, args) "
        "return redis.call('strlen', keys[1]) end, flags={'no-writes'}}\n"
        "redis.register_function('dfail', function(keys, args) return redis.call('incr', keys[1]) end)"
    )

    def function(self):
        name = self.pick(["dget", "dset", "dlen", "dfail", "DGET", "nosuch"])
        command = "FCALL_RO" if self.chance(0.25) else "FCALL"
        return [self.cmd("FUNCTION", "LOAD", "REPLACE", self.LIBRARY, noise=False),
                self.cmd(command, name, "1", self.key(), self.script_arg())]

    def geoadd(self):
        options = []
        for option, p in (("NX", 0.08), ("XX", 0.08), ("CH", 0.15)):
            if self.chance(p):
                options.append(option if self.chance(0.9) else option.lower())
        self.rng.shuffle(options)
        triples = []
        for _ in range(self.rng.randint(1, 4)):
            triples += [self.longitude(), self.latitude(), self.member()]
        if self.chance(0.03):
            triples.pop()
        return [self.cmd("GEOADD", self.geo_key(), *options, *triples)]

    def georead(self):
        key = self.key()
        r = self.rng.random()
        if r < 0.35:
            return [self.cmd("GEOPOS", key, *self.members(0, 4))]
        if r < 0.65:
            return [self.cmd("GEOHASH", key, *self.members(0, 4))]
        args = ["GEODIST", key, self.member(), self.member()]
        if self.chance(0.6):
            args.append(self.geo_unit())
        return [self.cmd(*args)]

    def geo_options(self, store: bool) -> list[str]:
        options = []
        for option, p in (("WITHDIST", 0.3), ("WITHCOORD", 0.25), ("WITHHASH", 0.2)):
            if self.chance(p):
                options.append(option)
        if self.chance(0.5):
            options.append(self.pick(["ASC", "DESC", "asc"]))
        if self.chance(0.3):
            options += ["COUNT", self.pick(["1", "2", "3", "5", "10", "0", "-1", "abc"])]
            if self.chance(0.3):
                options.append("ANY")
        elif self.chance(0.03):
            options.append("ANY")
        if store and self.chance(0.25):
            options += [self.pick(["STORE", "STOREDIST"]), self.plain_key()]
        if self.chance(0.1):
            self.rng.shuffle(options)
        return options

    def geosearch(self):
        name = self.pick(["GEORADIUS", "GEORADIUS_RO", "GEORADIUSBYMEMBER", "GEORADIUSBYMEMBER_RO",
                          "GEOSEARCH", "GEOSEARCH", "GEOSEARCHSTORE"])
        key = self.key()
        if name.startswith("GEORADIUS"):
            center = [self.member()] if "MEMBER" in name else [self.longitude(), self.latitude()]
            store = not name.endswith("_RO")
            args = [name, key, *center, self.geo_distance(), self.geo_unit(), *self.geo_options(store)]
            return [self.cmd(*args)]
        parts = []
        if self.chance(0.5):
            parts.append(["FROMMEMBER", self.member()])
        else:
            parts.append(["FROMLONLAT", self.longitude(), self.latitude()])
        if self.chance(0.5):
            parts.append(["BYRADIUS", self.geo_distance(), self.geo_unit()])
        else:
            parts.append(["BYBOX", self.geo_distance(), self.geo_distance(), self.geo_unit()])
        if self.chance(0.03):
            parts.pop(self.rng.randrange(2))
        if self.chance(0.1):
            self.rng.shuffle(parts)
        options = self.geo_options(False)
        if name == "GEOSEARCHSTORE":
            if self.chance(0.3):
                options.append("STOREDIST")
            args = [name, self.plain_key(), key]
        else:
            args = [name, key]
        return [self.cmd(*args, *[p for part in parts for p in part], *options)]

    # --- scans

    def scan(self):
        name = self.pick(["HSCAN", "SSCAN", "ZSCAN"])
        self.home = {"HSCAN": "hash", "SSCAN": "set", "ZSCAN": "zset"}[name]
        cursor = "0" if self.chance(0.95) else self.pick(["abc", " 1", "", "18446744073709551616", "1.0"])
        options = []
        if self.chance(0.4):
            options += ["MATCH", self.pick(PATTERNS)]
        if self.chance(0.4):
            options += ["COUNT", self.pick(["1", "2", "5", "10", "100"])]
        if self.chance(0.06):
            options += self.pick([["COUNT", "0"], ["COUNT", "-1"], ["COUNT", "abc"], ["TYPE", "string"],
                                  ["NOVALUES"], ["FOO"], ["MATCH"]])
        return [Scan([b(name), b(self.key()), b(cursor), *[b(o) for o in options]])]

    # --- SORT, DUMP/RESTORE, LCS

    def sort_weights(self) -> list[Cmd]:
        """Writes some of SORT's weight keys, recording them in the model."""
        def weight() -> bytes:
            r = self.rng.random()
            if r < 0.08:
                # Not numbers (never out of range: see `sort`).
                return b(self.pick(["abc", "", "1x", " ", "nan", "0x", "inf1"]))
            if r < 0.2:
                return b(self.pick(["inf", "-inf", " 7", "1e3", "0x10", "-0", "1.5e-3", "3."]))
            if r < 0.5:
                return b(f"{self.rng.uniform(-100, 100):.{self.rng.randint(0, 3)}f}")
            return b(self.rng.randint(-20, 40))
        r = self.rng.random()
        if r < 0.5:
            args = [b"MSET"]
            for _ in range(self.rng.randint(1, 6)):
                key, value = b"w_" + self.member(), weight()
                args += [key, value]
                self.weight_keys[key] = value
            return [Cmd(args)]
        if r < 0.85:
            key = b"h_" + self.member()
            fields = {b"w": weight(), b"name": b(self.pick(MEMBERS))}
            if self.chance(0.2):
                del fields[b"w"]
            self.weight_hashes.setdefault(key, {}).update(fields)
            return [Cmd([b"HSET", key, *[x for pair in fields.items() for x in pair]])]
        key = self.pick([b"w_", b"h_"]) + self.member()
        self.weight_keys.pop(key, None)
        self.weight_hashes.pop(key, None)
        return [Cmd([b"DEL", key])]

    def sort(self):
        steps = []
        if self.chance(0.35) or not self.weight_keys:
            steps += self.sort_weights()
        home = self.pick(["list", "set", "zset"])
        key = self.pick(HOME_KEYS[home]) if self.chance(HOME_SHARE) else self.pick(KEYS)
        readonly = self.chance(0.2)
        options: list[list[bytes]] = []
        by = None
        r = self.rng.random()
        if r < 0.4:
            by = b(self.pick(["w_*", "h_*->w", "h_*->name", "w_*\x00ignored", "h_*->w\x00x"]))
        elif r < 0.6:
            by = b(self.pick(["nosort", "nokey", "w_", "#", "x\x00*"]))
        if by is not None:
            options.append([b"BY", by])
        alpha = self.chance(0.45)
        if alpha:
            options.append([b(self.pick(["ALPHA", "alpha"]))])
        desc = self.chance(0.35)
        if desc:
            options.append([b"DESC"])
        elif self.chance(0.2):
            options.append([b"ASC"])
        limit = self.chance(0.35)
        if limit:
            options.append([b"LIMIT", b(self.index()), b(self.count())])
        gets: list[bytes] = []
        if self.chance(0.35):
            gets = [b(self.pick(["#", "w_*", "h_*->w", "h_*->name", "k*", "missing_*", "const",
                                 "h_*->", "#x", "w_*->w"])) for _ in range(self.rng.randint(1, 3))]
            if alpha and by is not None and gets[0] != b"#":
                gets.insert(0, b"#")
        store = None
        dont_sort = by is not None and b"*" not in by.split(b"\x00")[0]
        if not readonly and self.chance(0.3):
            # What ties may order differently (ALPHA by weights) is stored outside the keys
            # every family shares, and read back here with the same comparison.
            tie_prone = alpha and by is not None and not dont_sort
            store = b"sortdst" if tie_prone or self.chance(0.3) else b(self.plain_key())
            options.append([b"STORE", store])
        self.rng.shuffle(options)
        # The GETs stay together and in order: replies list their values in that order.
        at = self.rng.randint(0, len(options))
        options[at:at] = [[b"GET", g] for g in gets]
        args = [b"SORT_RO" if readonly else b"SORT", b(key)] + [x for option in options for x in option]
        r = self.rng.random()
        if r < 0.02:
            args.append(b(self.pick(["FOO", "LIMIT", "BY", "GET", "STORE" if readonly else "LIMIT"])))
        elif r < 0.03 and readonly:
            args += [b"STORE", b"sortdst"]
        extra = {"alpha": alpha, "by": by, "dont_sort": dont_sort, "limit": limit, "gets": gets,
                 "store": store is not None, "strings": dict(self.weight_keys),
                 "hashes": {k: dict(v) for k, v in self.weight_hashes.items()}}
        # Redis' SORT reads an errno it never clears (see docs/protocols.md): an uncompared
        # SCAN, which clears it, keeps earlier commands of other families out of the reply.
        steps.append(Cmd([b"SCAN", b"0", b"COUNT", b"1"], kind="ignore"))
        if store == b"sortdst":
            # Emptied first, so that what is read back is this SORT's (or nothing).
            steps.append(Cmd([b"DEL", store]))
        steps.append(Cmd([b"TYPE", b(key)]))
        steps.append(Cmd(args, kind="sort", extra=extra))
        if store == b"sortdst":
            steps.append(Cmd([b"TYPE", b(key)]))
            steps.append(Cmd([b"LRANGE", store, b"0", b"-1"], kind="sort",
                             extra={**extra, "store": True, "limit": limit, "stored": True}))
        return steps

    def dump(self):
        source = self.key()
        r = self.rng.random()
        if r < 0.3:
            dest, options = source, [b"REPLACE"]
        elif r < 0.85:
            dest, options = self.plain_key(), ([b"REPLACE"] if self.chance(0.5) else [])
        else:
            dest, options = "dumpdst", [b"REPLACE"]
        r = self.rng.random()
        if r < 0.7:
            ttl = b"0"
        elif r < 0.8:
            ttl = b(self.pick(["100000", "5000000"]))
        elif r < 0.9:
            now_ms = int(time.time() * 1000)
            ttl = b(now_ms + self.pick([100_000, -5_000]))
            options.append(b"ABSTTL")
        else:
            ttl = b(self.pick(["-1", "abc", "9223372036854775807", ""]))
        r = self.rng.random()
        if r < 0.05:
            options += [b"IDLETIME", b(self.pick(["0", "100", "-1", "x"]))]
        elif r < 0.1:
            options += [b"FREQ", b(self.pick(["0", "255", "256", "-1"]))]
        elif r < 0.12:
            options.append(b(self.pick(["FOO", "IDLETIME", "FREQ"])))
        self.rng.shuffle(options)
        corrupt = self.rng.random() if self.chance(0.04) else None
        steps: list[Step] = [DumpRestore(b(source), b(dest), ttl, options, corrupt)]
        reads = [[b"TYPE", b(dest)], [b"OBJECT", b"ENCODING", b(dest)], [b"GET", b(dest)],
                 [b"LRANGE", b(dest), b"0", b"-1"], [b"SMEMBERS", b(dest)],
                 [b"ZRANGE", b(dest), b"0", b"-1", b"WITHSCORES"], [b"HGETALL", b(dest)],
                 [b"XRANGE", b(dest), b"-", b"+"], [b"XINFO", b"STREAM", b(dest), b"FULL"],
                 [b"PTTL", b(dest)]]
        kinds = {b"SMEMBERS": "set", b"HGETALL": "pairs", b"XINFO": "stream_times", b"PTTL": "ttl"}
        for args in reads:
            kind = kinds.get(args[0], "exact")
            if args[0] == b"PTTL":
                args = [b"TTL", args[1]]
            steps.append(Cmd(args, kind=kind))
        return steps

    def lcs(self):
        args = ["LCS", self.key(), self.key()]
        options = []
        if self.chance(0.3):
            options.append([self.pick(["LEN", "len"])])
        if self.chance(0.4):
            options.append(["IDX"])
        if self.chance(0.3):
            options.append(["MINMATCHLEN", self.integer(-2, 4)])
        if self.chance(0.3):
            options.append(["WITHMATCHLEN"])
        if self.chance(0.03):
            options.append([self.pick(["FOO", "MINMATCHLEN"])])
        self.rng.shuffle(options)
        return [self.cmd(*args, *[x for option in options for x in option])]

    # --- bulk loads that cross the compact encodings' limits

    def bulk(self):
        which = self.rng.random()
        self.home = ["hash", "set", "zset", "list"][min(3, int(which * 4))]
        key, lex = self.score_key()
        if which < 0.25:
            n = self.pick([100, 520, 600])  # hash-max-listpack-entries is 512
            args = ["HSET", key]
            for i in range(n):
                args += [f"f{i}", str(i)]
        elif which < 0.5:
            n = self.pick([200, 520, 600])  # set-max-intset-entries is 512
            args = ["SADD", key, *[str(i) for i in range(n)]]
        elif which < 0.75:
            n = self.pick([100, 130, 200])  # zset-max-listpack-entries is 128
            args = ["ZADD", key]
            for i in range(n):
                args += ["0" if lex else str(i % 17), f"m{i}"]
        else:
            args = [self.pick(["RPUSH", "LPUSH"]), key, *[str(i % 23) for i in range(self.pick([50, 200, 300]))]]
        return [self.cmd(*args, noise=False)]

    # --- transactions

    def queued(self) -> list[Cmd]:
        steps: list[Cmd] = []
        for _ in range(self.rng.randint(0, 6)):
            steps += self.call(self.pick(self.queueable))
        return steps

    def transaction(self):
        steps = [Cmd([b"MULTI"])]
        body = self.queued()
        r = self.rng.random()
        if r < 0.05:
            body.insert(self.rng.randint(0, len(body)), Cmd([b"MULTI"]))
        elif r < 0.1:
            body.insert(self.rng.randint(0, len(body)), Cmd([b"WATCH", b(self.key())]))
        elif r < 0.14:
            body.insert(self.rng.randint(0, len(body)), Cmd([b"NOSUCHCOMMAND", b"x"]))
        elif r < 0.18:
            body.insert(self.rng.randint(0, len(body)), Cmd([b"GET"]))
        steps += body
        steps.append(self.finish(body))
        return steps

    def finish(self, body: list[Cmd]) -> Cmd:
        if self.chance(0.12):
            return Cmd([b"DISCARD"])
        sub = [c.kind for c in body if c.args[0] not in (b"MULTI", b"WATCH")]
        return Cmd([b"EXEC"], kind="exec", sub=sub)

    def watch(self):
        keys = [self.key() for _ in range(self.rng.randint(1, 2))]
        steps = [Cmd([b"WATCH", *[b(k) for k in keys]])]
        r = self.rng.random()
        if r < 0.4:
            # The second client writes (or fails to change) a watched key, or another key.
            target = keys[0] if self.chance(0.8) else self.key()
            for write in self.write_on(target):
                write.conn = 1
                steps.append(write)
        elif r < 0.55:
            steps += self.write_on(keys[-1])
        elif r < 0.65:
            steps.append(Cmd([b"UNWATCH"]))
            if self.chance(0.5):
                steps += [Cmd(w.args, kind=w.kind, conn=1) for w in self.write_on(keys[0])]
        steps.append(Cmd([b"MULTI"]))
        body = self.queued()
        steps += body
        steps.append(self.finish(body))
        return steps

    def write_on(self, key: str) -> list[Cmd]:
        """A write of some type on `key`: one that changes it, fails, or changes nothing (which
        must not fail a WATCH: Redis signals a key only when a command modified it)."""
        other = self.key()
        writes = [
            ["SET", key, self.value()], ["DEL", key], ["SADD", key, self.member()],
            ["SREM", key, self.member()], ["HSET", key, self.member(), self.value()],
            ["RPUSH", key, self.member()], ["LPOP", key], ["ZADD", key, "0", self.member()],
            ["ZREM", key, self.member()], ["INCR", key], ["EXPIRE", key, "100000"],
            ["PERSIST", key], ["HDEL", key, self.member()], ["APPEND", key, "x"],
            ["EXPIRE", key, "0"], ["LTRIM", key, "0", "-1"], ["LREM", key, "0", "zz"],
            ["HINCRBY", key, self.member(), "0"], ["ZINCRBY", key, "0", self.member()],
            ["HSETNX", key, self.member(), "v"], ["LSET", key, "0", "x"],
            ["LMOVE", key, key, "LEFT", "RIGHT"], ["SINTERSTORE", key, other],
            ["SREM", key, "absent"], ["ZREMRANGEBYSCORE", key, "(5", "(5"],
        ]
        if key in PLAIN_KEYS and other in PLAIN_KEYS:
            writes.append(["RENAME", other, key])
        if self.chance(0.03):
            writes = [["FLUSHALL"]]
            self.weight_keys.clear()
            self.weight_hashes.clear()
        return [Cmd([b(a) for a in self.pick(writes)])]

    def stray(self):
        return [Cmd([b(self.pick(["EXEC", "DISCARD", "UNWATCH"]))])]

    def wake(self):
        key = self.key()
        name = self.pick(["BLPOP", "BRPOP", "BLMOVE"])
        if name == "BLMOVE":
            block = [name, key, self.key(), self.direction(), self.direction(), "0"]
        else:
            block = [name, key, *[self.key() for _ in range(self.rng.randint(0, 2))], "0"]
        return [Wake([b(a) for a in block], [b"RPUSH", b(key), self.member()])]

    def next_group(self) -> list[Step]:
        return self.call(self.rng.choices(self.makers, self.weights)[0])

    def final_checks(self) -> list[Cmd]:
        steps = []
        for key in KEYS:
            steps += [Cmd([b"TYPE", b(key)]), Cmd([b"GET", b(key)]),
                      Cmd([b"LRANGE", b(key), b"0", b"-1"]), Cmd([b"SMEMBERS", b(key)], kind="set"),
                      Cmd([b"HGETALL", b(key)], kind="pairs"),
                      Cmd([b"ZRANGE", b(key), b"0", b"-1", b"WITHSCORES"]),
                      Cmd([b"OBJECT", b"ENCODING", b(key)]), Cmd([b"TTL", b(key)], kind="ttl"),
                      Cmd([b"XRANGE", b(key), b"-", b"+"]),
                      Cmd([b"XINFO", b"STREAM", b(key), b"FULL"], kind="stream_times"),
                      Cmd([b"XINFO", b"GROUPS", b(key)])]
        return steps


# Every command issue 6 asks for, plus the string/key commands that meet them: each must be
# sent, and answered without an error at least once, in a run that counts as covering them.
REQUIRED_COMMANDS = """
    HSET HGET HMGET HGETALL HDEL HEXISTS HINCRBY HINCRBYFLOAT HKEYS HVALS HLEN HSETNX HSCAN HRANDFIELD
    LPUSH RPUSH LPOP RPOP LRANGE LINDEX LLEN LSET LREM LTRIM LINSERT LPOS LMOVE BLPOP BRPOP BLMOVE
    SADD SREM SMEMBERS SISMEMBER SMISMEMBER SCARD SPOP SRANDMEMBER SINTER SUNION SDIFF SINTERSTORE
    SUNIONSTORE SDIFFSTORE SSCAN
    ZADD ZREM ZSCORE ZMSCORE ZINCRBY ZCARD ZCOUNT ZRANK ZREVRANK ZRANGE ZRANGEBYSCORE
    ZREMRANGEBYSCORE ZPOPMIN ZPOPMAX ZSCAN
    SETBIT GETBIT BITCOUNT BITPOS BITOP BITFIELD BITFIELD_RO
    PFADD PFCOUNT PFMERGE
    GEOADD GEOPOS GEOHASH GEODIST GEORADIUS GEORADIUS_RO GEORADIUSBYMEMBER GEORADIUSBYMEMBER_RO
    GEOSEARCH GEOSEARCHSTORE
    GET SET DEL EXISTS TYPE EXPIRE TTL PERSIST RENAME INCR APPEND OBJECT
    MULTI EXEC DISCARD WATCH UNWATCH
    XADD XRANGE XREVRANGE XLEN XDEL XTRIM XREAD XGROUP XREADGROUP XACK XPENDING XCLAIM XAUTOCLAIM
    XINFO XSETID
    SORT SORT_RO DUMP RESTORE LCS
""".split()


def coverage_gaps(runner: "Runner") -> list[str]:
    """Required commands a run never sent, or never saw succeed."""
    return [name for name in REQUIRED_COMMANDS
            if runner.counts[name] == 0 or runner.counts[name] == runner.errors[name]]


def _ends_in_cut_xzero(value: bytes) -> bool:
    """Whether a sparse HyperLogLog's opcodes end with a two-byte XZERO missing its second."""
    position = 16
    while position < len(value):
        two_bytes = value[position] & 0xc0 == 0x40
        if two_bytes and position + 1 == len(value):
            return True
        position += 2 if two_bytes else 1
    return False


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return text.strip() == text and not text.startswith("+") and -2**63 <= int(text) < 2**63


# ------------------------------------------------------------------------------------------
# Comparison.


def sort_key(reply) -> str:
    return repr(reply)


def as_pairs(reply):
    """HGETALL-like replies as a sorted list of pairs, or None when not a collection."""
    kind, value = reply
    if value is None:
        return None
    if kind == "%":
        return sorted(value, key=sort_key)
    if kind == "*" and len(value) % 2 == 0:
        return sorted(zip(value[::2], value[1::2]), key=sort_key)
    return None


def normalized(kind: str, reply):
    if kind == "set" and reply[0] in "*~" and reply[1] is not None:
        return (reply[0], tuple(sorted(reply[1], key=sort_key)))
    if kind == "pairs" and reply[0] in "*%":
        pairs = as_pairs(reply)
        if pairs is not None:
            return (reply[0], tuple(pairs))
    return reply


def doubles_as_values(reply):
    """The reply with the text of every double, and of every bulk string written like a
    non-integer number, replaced by its value (the reply type stays): Redis 7.0 prints doubles with %.17g ("0.10000000000000001"),
    Redis 7.2 the shortest text that reads back the same ("0.1")."""
    kind, value = reply
    if kind == "," or (kind == "$" and value and any(c in value for c in b".eEinf")):
        try:
            number = float(value)
        except ValueError:
            return reply
        return (kind, ("value", "nan" if number != number else number))
    if kind in "*~>" and value is not None:
        return (kind, tuple(doubles_as_values(item) for item in value))
    if kind == "%":
        return (kind, tuple((doubles_as_values(k), doubles_as_values(v)) for k, v in value))
    return reply


# Reply fields of the stream commands that hold times or Redis' memory layout: masked before
# comparing (`stream_times`). XPENDING's rows carry the idle time third.
STREAM_MASKED_FIELDS = {b"seen-time", b"idle", b"radix-tree-nodes"}
# Integers at least this large are wall-clock milliseconds (delivery and seen times).
WALL_CLOCK_MS_MIN = 10**12


def masked_times(reply):
    """The reply with every time (and radix-tree-nodes) replaced by a marker: wall-clock
    milliseconds, the values of STREAM_MASKED_FIELDS, and the idle time of XPENDING rows
    (id, consumer, idle, deliveries)."""
    kind, value = reply
    if kind in ":(" and isinstance(value, int) and abs(value) >= WALL_CLOCK_MS_MIN:
        return ("masked", None)
    if kind in "*~>" and value is not None:
        items = list(value)
        if len(items) == 4 and items[0][0] == items[1][0] == "$" and items[2][0] == items[3][0] == ":":
            items[2] = ("masked", None)
        for i in range(len(items) - 1):
            if items[i][0] == "$" and items[i][1] in STREAM_MASKED_FIELDS and i % 2 == 0:
                items[i + 1] = ("masked", None)
        return (kind, tuple(masked_times(item) for item in items))
    if kind == "%":
        return (kind, tuple((k, ("masked", None)) if k[1] in STREAM_MASKED_FIELDS
                            else (k, masked_times(v)) for k, v in value))
    return reply


def same(cmd: Cmd, ra, rb, snap_a, snap_b, doubles_by_value: bool = False) -> bool:
    """Whether two replies to `cmd` agree on everything Redis defines. `snap_*` is each
    server's reply to the command just before (the snapshot of a random command). With
    `doubles_by_value`, doubles are compared by value, not by text (see doubles_as_values)."""
    if doubles_by_value:
        ra, rb = doubles_as_values(ra), doubles_as_values(rb)
        if snap_a is not None and snap_b is not None:
            snap_a, snap_b = doubles_as_values(snap_a), doubles_as_values(snap_b)
    kind = cmd.kind
    if kind == "ignore":
        return True
    if kind == "exact" or ra[0] in "-!" or rb[0] in "-!":
        return ra == rb
    if kind == "sort":
        return sort_same(cmd, ra, rb, snap_a)
    if kind == "dump":
        return dump_same(ra, rb)
    if kind in ("set", "pairs"):
        return normalized(kind, ra) == normalized(kind, rb)
    if kind == "stream_times":
        return masked_times(ra) == masked_times(rb)
    if kind == "ttl":
        if ra[0] == rb[0] == ":" and ra[1] >= 0 and rb[1] >= 0:
            return abs(ra[1] - rb[1]) <= 1
        return ra == rb
    if kind == "exec":
        if ra[0] == rb[0] == "*" and ra[1] is not None and rb[1] is not None \
                and len(ra[1]) == len(rb[1]) == len(cmd.sub or []):
            # (doubles, if so asked, are values already)
            return all(same(Cmd([], kind=k), x, y, None, None) for k, x, y in zip(cmd.sub, ra[1], rb[1]))
        return ra == rb
    if kind in ("spop", "srandmember", "hrandfield"):
        return random_reply_ok(cmd, ra, snap_a) and random_reply_ok(cmd, rb, snap_b) and shape(ra) == shape(rb)
    raise ValueError(f"unknown comparison {kind}")


def c_string(data: bytes) -> bytes:
    """What C sees of a string: the bytes before its first NUL."""
    end = data.find(b"\x00")
    return data if end < 0 else data[:end]


def sort_lookup(extra: dict, pattern: bytes, element: bytes) -> bytes | None:
    """Redis' `lookupKeyByPattern` over the weight keys the sort family wrote."""
    text = c_string(pattern)
    if text == b"#":
        return element
    star = text.find(b"*")
    if star < 0:
        return None
    arrow = text.find(b"->", star + 1)
    field = pattern[arrow + 2:] if 0 <= arrow and arrow + 2 < len(text) else None
    suffix = len(pattern) - (star + 1) - (len(field) + 2 if field is not None else 0)
    key = pattern[:star] + element + pattern[star + 1:star + 1 + suffix]
    if field is None:
        return extra["strings"].get(key)
    return extra["hashes"].get(key, {}).get(field)


def sort_same(cmd: Cmd, ra, rb, snapshot) -> bool:
    """SORT (and the read of what it stored) where Redis leaves an order undefined: a set's
    own order (BY a constant, shown only when it is a set: `snapshot` is TYPE's reply), and
    elements whose ALPHA keys tie (equal weights, missing weights, or elements equal up to a
    NUL) — Redis' sort sees them in its hash tables' order, and with LIMIT and BY it uses its
    own unstable quicksort. Rows are compared in order of their keys, ties as sets; with
    LIMIT only the keys' order, since which tied rows make the cut is undefined."""
    extra = cmd.extra or {}
    if ra[0] != "*" or rb[0] != "*" or ra[1] is None or rb[1] is None:
        return ra == rb
    a, b = list(ra[1]), list(rb[1])
    if len(a) != len(b):
        return False
    is_set = snapshot is not None and snapshot[1] == b"set"
    if extra.get("dont_sort") and not extra.get("stored"):
        if not is_set:
            return a == b
        return extra.get("limit") or sorted(a, key=sort_key) == sorted(b, key=sort_key)
    if extra.get("dont_sort") or not extra.get("alpha"):
        # Forced ALPHA of a stored set compares bytes; numeric order is total.
        return a == b
    gets = extra.get("gets") or []
    width = max(1, len(gets))
    if gets and gets[0] != b"#":
        return extra.get("limit") or sorted(a, key=sort_key) == sorted(b, key=sort_key)
    store = extra.get("store")

    def keys(items):
        rows = [tuple(items[i:i + width]) for i in range(0, len(items), width)]
        out = []
        for row in rows:
            element = row[0][1] or b""
            if extra.get("by") is not None:
                weight = sort_lookup(extra, extra["by"], element)
                key = (0, b"") if weight is None else (1, weight if store else c_string(weight))
            else:
                key = (0, element if store else c_string(element))
            out.append((key, row))
        return out

    ka, kb = keys(a), keys(b)
    if [k for k, _ in ka] != [k for k, _ in kb]:
        return False
    if extra.get("limit"):
        return True
    groups_a: dict = collections.defaultdict(list)
    groups_b: dict = collections.defaultdict(list)
    for key, row in ka:
        groups_a[key].append(row)
    for key, row in kb:
        groups_b[key].append(row)
    return all(sorted(groups_a[k], key=sort_key) == sorted(groups_b.get(k, []), key=sort_key)
               for k in groups_a)


def dump_same(ra, rb) -> bool:
    """DUMP payloads: the same type byte, and the same bytes where Redis' encoding is fixed
    by the value — strings, intsets, sorted sets, one-node lists. (A hash table's order, a
    hash listpack's order after a RESTORE from the other server, a list's nodes after one,
    and a stream's deleted entries, which Weft counts but does not keep, are not.)"""
    if ra[0] != "$" or rb[0] != "$" or ra[1] is None or rb[1] is None:
        return ra == rb
    a, b = ra[1], rb[1]
    if a[:1] != b[:1]:
        return False
    kind = a[0]
    if kind in (0, 5, 11, 17):
        return a == b
    if kind == 18 and a[1:2] == b[1:2] == b"\x01":
        return a == b
    return True


def shape(reply):
    """Type and length of a random reply, which is all two servers must agree on."""
    kind, value = reply
    if kind in "*~" and value is not None:
        return (kind, len(value), tuple(item[0] for item in value[:1]))
    return (kind, None if value is None else "value")


def random_reply_ok(cmd: Cmd, reply, snapshot) -> bool:
    """A random command's reply is possible given the key's content just before."""
    if snapshot is None or snapshot[0] in "-!":
        return True  # the snapshot failed (WRONGTYPE): both replies were compared exactly
    if cmd.kind == "hrandfield":
        pairs = as_pairs(snapshot) or []
        content = {k: v for k, v in pairs}
    else:
        content = {m: None for m in (snapshot[1] or ())}
    kind, value = reply
    if cmd.count is None and len(cmd.args) == 2:
        # One element, or a null when the key is missing.
        if not content:
            return value is None
        return kind == "$" and reply in content
    if kind not in "*~" or value is None:
        return not content and kind in "*_~"
    if cmd.kind == "hrandfield" and cmd.withvalues:
        if value and value[0][0] == "*":
            items = [tuple(pair[1]) if pair[0] == "*" and len(pair[1]) == 2 else None for pair in value]
        else:
            items = list(zip(value[::2], value[1::2])) if len(value) % 2 == 0 else [None]
        if any(item is None or item[0] not in content or content[item[0]] != item[1] for item in items):
            return False
        elements = [item[0] for item in items]
    else:
        elements = list(value)
        if any(element not in content for element in elements):
            return False
    if (cmd.count is not None and cmd.count >= 0) or cmd.kind == "spop":
        if len(set(elements)) != len(elements):
            return False
    return True


# ------------------------------------------------------------------------------------------
# The runner.


class Difference(Exception):
    pass


@dataclass
class Server:
    address: tuple[str, int]
    protocol: int
    conns: list[Connection] = field(default_factory=list)

    def connect(self) -> None:
        self.conns = [Connection(*self.address, self.protocol) for _ in range(2)]

    def close(self) -> None:
        for conn in self.conns:
            conn.close()


class Runner:
    """Executes a generator's steps on both servers and compares every reply."""

    def __init__(self, a: tuple[str, int], b: tuple[str, int], protocol: int, seed: int, out=sys.stdout,
                 history: int | None = HISTORY_SHOWN, skip: frozenset[str] = frozenset(),
                 doubles_by_value: bool = False):
        self.skip = skip
        self.doubles_by_value = doubles_by_value
        self.servers = [Server(a, protocol), Server(b, protocol)]
        self.protocol = protocol
        self.seed = seed
        self.out = out
        self.history: collections.deque = collections.deque(maxlen=history)
        self.sent = 0
        self.counts: collections.Counter = collections.Counter()
        self.errors: collections.Counter = collections.Counter()
        self.last = [None, None]
        self.pending: list[Cmd] = []
        self.ok = False
        self.failure = ""
        self.wrongtype = 0
        self.failed_name = ""
        self.executed: list[list[Step]] = []
        # RDB type bytes of the payloads restored both ways (for the summary).
        self.restored_types: collections.Counter = collections.Counter()

    def run(self, commands: int, groups: list[list[Step]] | None = None) -> bool:
        """Runs `commands` generated commands (or exactly `groups`, when given) and the final
        per-key comparison; False after reporting the first difference. The groups run are
        kept in `executed`, for `minimize`."""
        for server in self.servers:
            server.connect()
            server.conns[0].send([[b"FLUSHALL"]])
            if server.conns[0].read()[0] != "+":
                raise ProtocolViolation("FLUSHALL failed")
        generator = Generator(self.seed, self.protocol, self.skip)
        try:
            if groups is None:
                while self.sent < commands:
                    self.group(generator.next_group())
                self.flush()
                self.group(generator.final_checks())
            else:
                for group in groups:
                    self.group(group)
            self.flush()
        except Difference as difference:
            self.report(str(difference))
            return False
        finally:
            for server in self.servers:
                server.close()
        return True

    def group(self, group: list[Step]) -> None:
        self.executed.append(group)
        for step in group:
            self.step(step)

    def step(self, step: Step) -> None:
        if isinstance(step, Cmd) and step.conn == 0:
            self.pending.append(step)
            if len(self.pending) >= BATCH_COMMANDS_MAX:
                self.flush()
            return
        self.flush()
        if isinstance(step, Cmd):
            self.exchange([step], conn=1)
        elif isinstance(step, Scan):
            self.scan(step)
        elif isinstance(step, DumpRestore):
            self.dump_restore(step)
        else:
            self.wake(step)

    def flush(self) -> None:
        if self.pending:
            batch, self.pending = self.pending, []
            self.exchange(batch, conn=0)

    def exchange(self, batch: list[Cmd], conn: int) -> None:
        for server in self.servers:
            server.conns[conn].send([c.args for c in batch])
        replies = [[server.conns[conn].read() for _ in batch] for server in self.servers]
        for i, cmd in enumerate(batch):
            self.check(cmd, replies[0][i], replies[1][i], conn)

    def check(self, cmd: Cmd, ra, rb, conn: int) -> None:
        index = self.sent
        self.sent += 1
        name = cmd.args[0].decode(errors="replace").upper() if cmd.args else "?"
        self.counts[name] += 1
        if ra[0] in "-!":
            self.errors[name] += 1
            self.wrongtype += ra[1].startswith(b"WRONGTYPE")
        self.history.append((index, conn, cmd.args, ra, rb))
        snap_a, snap_b = (self.last if conn == 0 else (None, None))
        if conn == 0:
            self.last = [ra, rb]
        if not same(cmd, ra, rb, snap_a, snap_b, self.doubles_by_value):
            self.failed_name = name
            raise Difference(f"command #{index} ({cmd.kind} comparison) differs")

    def scan(self, step: Scan) -> None:
        unions = []
        for server in self.servers:
            conn = server.conns[0]
            args = list(step.args)
            seen: set = set()
            result = None
            for _ in range(SCAN_PAGES_MAX):
                conn.send([args])
                reply = conn.read()
                if reply[0] != "*" or reply[1] is None or len(reply[1]) != 2 or reply[1][0][0] != "$" \
                        or reply[1][1][0] != "*":
                    result = ("reply", reply)
                    break
                cursor, items = reply[1][0][1], reply[1][1][1]
                if self.doubles_by_value:
                    items = doubles_as_values(("*", items))[1]
                if step.args[0] == b"SSCAN":
                    seen.update(items)
                elif len(items) % 2:
                    result = ("odd page", reply)
                    break
                else:
                    seen.update(zip(items[::2], items[1::2]))
                if cursor == b"0":
                    result = ("union", tuple(sorted(seen, key=sort_key)))
                    break
                args[2] = cursor
            else:
                result = ("did not reach cursor 0", len(seen))
            unions.append(result)
        name = step.args[0].decode()
        self.counts[name] += 1
        if unions[0][0] == "reply" and unions[0][1][0] in "-!":
            self.errors[name] += 1
        index = self.sent
        self.sent += 1
        shown = [("+", repr(u).encode()[:3000]) for u in unions]
        self.history.append((index, 0, [*step.args, b"...until cursor 0"], shown[0], shown[1]))
        self.last = [None, None]
        if unions[0] != unions[1]:
            self.failed_name = name
            raise Difference(f"scan #{index} differs")

    def dump_restore(self, step: DumpRestore) -> None:
        dump = [b"DUMP", step.source]
        for server in self.servers:
            server.conns[0].send([dump])
        dumped = [server.conns[0].read() for server in self.servers]
        self.check(Cmd(dump, kind="dump"), dumped[0], dumped[1], 0)
        payloads = [reply[1] if reply[0] == "$" and reply[1] is not None else b"" for reply in dumped]
        if step.corrupt is not None:
            payloads = [p[:int(step.corrupt * len(p))] + bytes([p[int(step.corrupt * len(p))] ^ 0x20])
                        + p[int(step.corrupt * len(p)) + 1:] if p else p for p in payloads]
        # Each server restores the other's payload.
        for server, payload in zip(self.servers, reversed(payloads)):
            server.conns[0].send([[b"RESTORE", step.dest, step.ttl, payload, *step.options]])
        restored = [server.conns[0].read() for server in self.servers]
        shown = [b"RESTORE", step.dest, step.ttl, b"<the other server's payload>", *step.options]
        self.check(Cmd(shown), restored[0], restored[1], 0)
        if restored[0][0] == "+" and payloads[0]:
            self.restored_types[payloads[0][0]] += 1

    def wake(self, step: Wake) -> None:
        for server in self.servers:
            server.conns[0].send([step.block])
        time.sleep(0.005)
        for server in self.servers:
            server.conns[1].send([step.push])
        pushed = [server.conns[1].read() for server in self.servers]
        woken = [server.conns[0].read(timeout_s=5.0) for server in self.servers]
        self.check(Cmd(step.block), woken[0], woken[1], 0)
        self.check(Cmd(step.push), pushed[0], pushed[1], 1)

    def report(self, what: str) -> None:
        lines = [f"DIFFERENCE: {what}; seed {self.seed}, RESP{self.protocol}, "
                 f"A {self.servers[0].address}, B {self.servers[1].address}",
                 f"replay: python3 {Path(__file__).name} --against-redis --seed {self.seed} "
                 f"--resp {self.protocol} --commands {self.sent} [--minimize]",
                 f"last {len(self.history)} commands (conn 1 = the second client; "
                 f"a wake's push is listed after the blocked command it woke):"]
        for index, conn, args, ra, rb in self.history:
            text = " ".join(_quote(a) for a in args)
            lines.append(f"  #{index} [conn {conn}] {text[:300]}")
            if ra == rb:
                lines.append(f"      both: {show(ra, '      ')[:600]}")
            else:
                lines.append(f"      A: {show(ra, '      ')[:3000]}")
                lines.append(f"      B: {show(rb, '      ')[:3000]}")
        self.failure = "\n".join(lines)
        print(self.failure, file=self.out)


def _quote(arg: bytes) -> str:
    text = arg.decode(errors="backslashreplace")
    if not text or any(c in text for c in " \"\r\n\\") or not text.isprintable():
        return '"' + text.encode("unicode_escape").decode().replace('"', '\\"') + '"'
    return text


# ------------------------------------------------------------------------------------------
# Processes and CLI.


def start_redis(extra: list[str] | None = None) -> tuple[subprocess.Popen, int]:
    """A fresh redis-server on a free loopback port, no persistence."""
    if REDIS_SERVER_BIN is None:
        raise FileNotFoundError("redis-server not installed (set REDIS_SERVER_BIN)")
    port = free_port()
    process = subprocess.Popen(
        [REDIS_SERVER_BIN, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--daemonize", "no", "--protected-mode", "yes", *(extra or [])],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        # SORT ALPHA collates with strcoll in the locale redis-server starts in; Weft collates
        # as the C locale does.
        env={**os.environ, "LC_ALL": "C"})
    try:
        wait_for_port(port, "redis-server", process=process)
    except BaseException:
        stop(process)
        raise
    return process, port


def run_differential(a: tuple[str, int], b: tuple[str, int], seed: int, commands: int, protocol: int,
                     out=sys.stdout, skip: frozenset[str] = frozenset(),
                     doubles_by_value: bool = False) -> Runner:
    """Runs one seeded stream; the runner tells `.ok`, `.failure`, `.sent`, `.counts`, `.errors`."""
    runner = Runner(a, b, protocol, seed, out, skip=skip, doubles_by_value=doubles_by_value)
    runner.ok = runner.run(commands)
    return runner


# Replays, and seconds, one minimisation may spend.
MINIMIZE_RUNS_MAX = 3_000
MINIMIZE_TIME_S = 120.0


def minimize(a: tuple[str, int], b: tuple[str, int], protocol: int, failed: Runner, out=sys.stdout,
             doubles_by_value: bool = False, time_budget_s: float = MINIMIZE_TIME_S) -> None:
    """Shrinks a failing run to a short command sequence that still makes the same command
    differ (delta debugging over whole groups, then over single steps), and prints it with
    both servers' replies. Random commands may make a replay differ otherwise; the sequence
    printed is always one that was seen to fail."""
    name = failed.failed_name
    runs = 0
    deadline = time.monotonic() + time_budget_s

    def fails(groups: list[list[Step]]) -> bool:
        nonlocal runs
        runs += 1
        runner = Runner(a, b, protocol, failed.seed, out=io.StringIO(), doubles_by_value=doubles_by_value)
        return not runner.run(0, groups) and runner.failed_name == name

    def ddmin(items: list) -> list:
        chunks = 2
        while len(items) >= 2 and runs < MINIMIZE_RUNS_MAX and time.monotonic() < deadline:
            size = -(-len(items) // chunks)
            for start in range(0, len(items), size):
                candidate = items[:start] + items[start + size:]
                if candidate and fails(candidate):
                    items = candidate
                    chunks = max(chunks - 1, 2)
                    break
            else:
                if chunks >= len(items):
                    break
                chunks = min(chunks * 2, len(items))
        return items

    groups = ddmin(list(failed.executed))
    steps = ddmin([[step] for group in groups for step in group])
    if not fails(steps):
        steps = groups
    runner = Runner(a, b, protocol, failed.seed, out=io.StringIO(), history=None,
                    doubles_by_value=doubles_by_value)
    runner.run(0, steps)
    print(f"minimised after {runs} replays to {sum(len(g) for g in steps)} steps "
          f"(replayed on emptied servers):", file=out)
    print("\n".join(runner.failure.splitlines()[3:]), file=out)


def address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return (host or "127.0.0.1", int(port))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    parser.add_argument("--commands", type=int, default=100_000)
    parser.add_argument("--resp", type=int, choices=[2, 3], default=2)
    parser.add_argument("--a", type=address, help="reference server host:port")
    parser.add_argument("--b", type=address, help="server under test host:port")
    parser.add_argument("--skip", default="", help="comma-separated families to leave out: " + " ".join(FAMILIES))
    parser.add_argument("--only", default="", help="comma-separated families to run, all others skipped")
    parser.add_argument("--doubles-by-value", action="store_true",
                        help="compare doubles by value, not text (Redis 7.2 prints them shorter than 7.0)")
    parser.add_argument("--minimize", action="store_true",
                        help="after a difference, shrink the run to a short sequence that still differs")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--against-redis", action="store_true",
                      help="start a fresh redis-server (A) and a fresh weft (B)")
    mode.add_argument("--redis-vs-redis", action="store_true",
                      help="start two fresh redis-servers (validates the normalisation)")
    options = parser.parse_args(argv)
    seed = options.seed if options.seed is not None else random.randrange(2**32)
    processes = []
    weft = None
    try:
        if options.against_redis or options.redis_vs_redis:
            process, port_a = start_redis()
            processes.append(process)
            a = ("127.0.0.1", port_a)
            if options.redis_vs_redis:
                process, port_b = start_redis()
                processes.append(process)
            else:
                config = Path(tempfile.mkdtemp(prefix="weft-differential-")) / "weft.toml"
                config.write_text("[caches.default]\nresp-database = 0\n")
                weft, port_b = start_weft(config)
                weft.stdout = DrainedOutput(weft.stdout)
            b = ("127.0.0.1", port_b)
        elif options.a and options.b:
            a, b = options.a, options.b
        else:
            parser.error("give --a and --b, or --against-redis, or --redis-vs-redis")
        started = time.monotonic()
        print(f"differential: seed {seed}, {options.commands} commands, RESP{options.resp}, A {a}, B {b}",
              flush=True)
        skip = frozenset(f for f in options.skip.split(",") if f)
        if options.only:
            only = {f for f in options.only.split(",") if f}
            skip |= frozenset(f for f in FAMILIES if f not in only)
        runner = run_differential(a, b, seed, options.commands, options.resp, skip=skip,
                                  doubles_by_value=options.doubles_by_value)
        elapsed = time.monotonic() - started
        if runner.ok:
            print(f"no difference in {runner.sent} commands ({elapsed:.1f}s)")
            summary = ", ".join(f"{n} {c}/{runner.errors[n]}" for n, c in sorted(runner.counts.items()))
            print(f"WRONGTYPE replies: {runner.wrongtype}")
            if runner.restored_types:
                restored = ", ".join(f"type {t}: {n}" for t, n in sorted(runner.restored_types.items()))
                print(f"DUMP payloads restored both ways, by RDB type: {restored}")
            print(f"commands sent (count/errors): {summary}")
            gaps = coverage_gaps(runner)
            print(f"required commands never sent or never successful: {' '.join(gaps) or 'none'}"
                  + (f" (families skipped: {','.join(sorted(skip))})" if skip else ""))
        elif options.minimize:
            minimize(a, b, options.resp, runner, doubles_by_value=options.doubles_by_value)
        return 0 if runner.ok else 1
    finally:
        if weft is not None:
            stop_weft_cleanly(weft)
        for process in processes:
            stop(process)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
