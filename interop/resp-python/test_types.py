"""redis-py against Redis' data types, pub/sub, transactions, client tracking and expiration —
every test over RESP2 and RESP3, first against a real redis-server, then against Weft (the
`server` fixture in conftest.py), so that every expectation here is proved on Redis itself.

Run: cargo build --release -p weft-server && pytest -q test_types.py
(`-k on-redis` runs the Redis half alone; WEFT_BIN and REDIS_SERVER_BIN override the binaries.)
"""

import socket
import threading
import time

import pytest
import redis

from differential import Connection

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def protocol(request) -> int:
    return request.param


@pytest.fixture
def r(server, protocol):
    """A redis-py client on database 0 of an emptied server."""
    client = redis.Redis(host="127.0.0.1", port=server, protocol=protocol, decode_responses=True,
                         socket_timeout=10)
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def other(server, protocol):
    """A second client of the same server (another connection, as another application)."""
    client = redis.Redis(host="127.0.0.1", port=server, protocol=protocol, decode_responses=True,
                         socket_timeout=10)
    yield client
    client.close()


def error_text(call) -> str:
    with pytest.raises(redis.ResponseError) as raised:
        call()
    return str(raised.value)


def pairs(reply) -> list[tuple]:
    """Member/score replies as a list of tuples: redis-py gives tuples over RESP2, lists over
    RESP3, and a flat [member, score] for ZPOPMIN without a count over RESP3."""
    if reply and not isinstance(reply[0], (list, tuple)):
        return [tuple(reply)]
    return [tuple(item) for item in reply]


# ------------------------------------------------------------------------------------------
# Hashes


# Proves HSET/HGET/HMGET/HGETALL/HDEL/HEXISTS/HLEN/HKEYS/HVALS/HSETNX and their replies.
def test_hash_basics(r):
    assert r.hset("h", mapping={"a": "1", "b": "2"}) == 2
    assert r.hset("h", "a", "10") == 0
    assert r.hset("h", items=["c", "3", "d", "4"]) == 2
    assert r.hget("h", "a") == "10"
    assert r.hget("h", "missing") is None
    assert r.hget("nokey", "a") is None
    assert r.hmget("h", ["a", "nope", "c"]) == ["10", None, "3"]
    assert r.hgetall("h") == {"a": "10", "b": "2", "c": "3", "d": "4"}
    assert r.hgetall("nokey") == {}
    assert r.hlen("h") == 4
    assert r.hexists("h", "b") is True
    assert r.hexists("h", "z") is False
    assert sorted(r.hkeys("h")) == ["a", "b", "c", "d"]
    assert sorted(r.hvals("h")) == ["10", "2", "3", "4"]
    assert r.hsetnx("h", "a", "x") == 0
    assert r.hsetnx("h", "e", "5") == 1
    assert r.hdel("h", "a", "nope", "e") == 2
    assert r.hdel("h", "b", "c", "d") == 3
    assert r.exists("h") == 0, "a hash without fields is deleted"
    assert r.hset("h", "", "") == 1
    assert r.hgetall("h") == {"": ""}


# Proves HINCRBY and HINCRBYFLOAT, their results and their errors.
def test_hash_counters(r):
    assert r.hincrby("h", "n", 5) == 5
    assert r.hincrby("h", "n", -7) == -2
    assert r.hincrbyfloat("h", "f", 10.5) == 10.5
    assert r.hincrbyfloat("h", "f", 0.1) == pytest.approx(10.6)
    assert r.hget("h", "f") == "10.6"
    r.hset("h", "text", "abc")
    assert error_text(lambda: r.hincrby("h", "text", 1)) == "hash value is not an integer"
    assert error_text(lambda: r.hincrbyfloat("h", "text", 1)) == "hash value is not a float"
    r.hset("h", "max", str(2**63 - 1))
    assert error_text(lambda: r.hincrby("h", "max", 1)) == "increment or decrement would overflow"
    assert error_text(lambda: r.execute_command("HINCRBY", "h", "n", "1.5")) == \
        "value is not an integer or out of range"
    assert error_text(lambda: r.execute_command("HINCRBYFLOAT", "h", "f", "inf")) == \
        "value is NaN or Infinity"
    assert error_text(lambda: r.execute_command("HINCRBYFLOAT", "h", "f", "x")) == \
        "value is not a valid float"


# Proves HSCAN visits every field of small and large hashes, with MATCH, exactly once as a set.
def test_hash_scan(r):
    r.hset("small", mapping={"a1": "1", "a2": "2", "b1": "3"})
    assert dict(r.hscan_iter("small")) == {"a1": "1", "a2": "2", "b1": "3"}
    assert dict(r.hscan_iter("small", match="a*")) == {"a1": "1", "a2": "2"}
    big = {f"f{i}": str(i) for i in range(1000)}
    r.hset("big", mapping=big)
    assert dict(r.hscan_iter("big", count=50)) == big
    assert dict(r.hscan_iter("nokey")) == {}


# Proves HRANDFIELD's counts: one field, distinct fields up to the size, repeats for a
# negative count, WITHVALUES pairs that exist, and nothing for a missing key.
def test_hash_randfield(r):
    fields = {f"f{i}": str(i) for i in range(5)}
    r.hset("h", mapping=fields)
    assert r.hrandfield("h") in fields
    assert r.hrandfield("nokey") is None
    assert r.hrandfield("nokey", 3) == []
    some = r.hrandfield("h", 3)
    assert len(some) == 3 and len(set(some)) == 3 and set(some) <= set(fields)
    assert sorted(r.hrandfield("h", 10)) == sorted(fields)
    repeated = r.hrandfield("h", -12)
    assert len(repeated) == 12 and set(repeated) <= set(fields)
    assert r.hrandfield("h", 0) == []
    with_values = r.hrandfield("h", 2, withvalues=True)
    if with_values and isinstance(with_values[0], list):  # RESP3: [[field, value], ...]
        with_values = [x for pair in with_values for x in pair]
    assert len(with_values) == 4
    for field, value in zip(with_values[::2], with_values[1::2]):
        assert fields[field] == value


# ------------------------------------------------------------------------------------------
# Lists


# Proves pushes and pops at both ends, with counts, LRANGE/LINDEX/LLEN/LSET and their errors.
def test_list_basics(r):
    assert r.rpush("l", "a", "b", "c") == 3
    assert r.lpush("l", "z", "y") == 5
    assert r.lrange("l", 0, -1) == ["y", "z", "a", "b", "c"]
    assert r.lrange("l", -2, 100) == ["b", "c"]
    assert r.lrange("l", 3, 1) == []
    assert r.lindex("l", 0) == "y"
    assert r.lindex("l", -1) == "c"
    assert r.lindex("l", 99) is None
    assert r.llen("l") == 5
    assert r.llen("nokey") == 0
    assert r.lset("l", 1, "Z") is True
    assert error_text(lambda: r.lset("l", 99, "x")) == "index out of range"
    assert error_text(lambda: r.lset("nokey", 0, "x")) == "no such key"
    assert r.lpop("l") == "y"
    assert r.rpop("l") == "c"
    assert r.lpop("l", 2) == ["Z", "a"]
    assert r.rpop("l", 5) == ["b"]
    assert r.exists("l") == 0, "a list without elements is deleted"
    assert r.lpop("l") is None
    assert r.lpop("l", 2) is None
    r.rpush("l", "x")
    assert r.lpop("l", 0) == []
    assert error_text(lambda: r.lpop("l", -1)) == "value is out of range, must be positive"


# Proves LREM in both directions, LTRIM, LINSERT and LPOS with RANK, COUNT and MAXLEN.
def test_list_edits_and_search(r):
    r.rpush("l", "a", "b", "a", "c", "a", "b")
    assert r.lrem("l", -1, "a") == 1
    assert r.lrange("l", 0, -1) == ["a", "b", "a", "c", "b"]
    assert r.lrem("l", 1, "b") == 1
    assert r.lrem("l", 0, "a") == 2
    assert r.lrange("l", 0, -1) == ["c", "b"]
    assert r.linsert("l", "BEFORE", "b", "x") == 3
    assert r.linsert("l", "AFTER", "b", "y") == 4
    assert r.linsert("l", "AFTER", "nope", "y") == -1
    assert r.linsert("nokey", "AFTER", "a", "y") == 0
    assert r.lrange("l", 0, -1) == ["c", "x", "b", "y"]
    assert r.ltrim("l", 1, -2) is True
    assert r.lrange("l", 0, -1) == ["x", "b"]
    r.delete("l")
    r.rpush("l", "a", "b", "c", "b", "a", "b")
    assert r.lpos("l", "b") == 1
    assert r.lpos("l", "b", rank=2) == 3
    assert r.lpos("l", "b", rank=-1) == 5
    assert r.lpos("l", "b", count=0) == [1, 3, 5]
    assert r.lpos("l", "b", count=2, rank=-1) == [5, 3]
    assert r.lpos("l", "b", maxlen=2) == 1
    assert r.lpos("l", "c", maxlen=2) is None
    assert r.lpos("l", "zz") is None
    assert r.lpos("l", "zz", count=1) == []
    assert "RANK can't be zero" in error_text(lambda: r.lpos("l", "b", rank=0))
    assert error_text(lambda: r.lpos("l", "b", count=-1)) == "COUNT can't be negative"


# Proves LMOVE between ends and lists, on one list (rotation), and from a missing list.
def test_list_move(r):
    r.rpush("src", "1", "2", "3")
    assert r.lmove("src", "dst", "LEFT", "RIGHT") == "1"
    assert r.lmove("src", "dst", "RIGHT", "LEFT") == "3"
    assert r.lrange("dst", 0, -1) == ["3", "1"]
    assert r.lmove("dst", "dst", "LEFT", "RIGHT") == "3"
    assert r.lrange("dst", 0, -1) == ["1", "3"]
    r.rpush("one", "x")
    r.expire("one", 100)
    assert r.lmove("one", "one", "RIGHT", "LEFT") == "x"
    assert 99 <= r.ttl("one") <= 100, "rotating a one-element list keeps the key and its TTL"
    assert r.lmove("nokey", "dst") is None
    r.set("str", "x")
    assert error_text(lambda: r.lmove("src", "str")) == WRONGTYPE
    assert r.lrange("src", 0, -1) == ["2"], "a failed move leaves the source alone"
    assert error_text(lambda: r.execute_command("LMOVE", "src", "dst", "UP", "LEFT")) == "syntax error"


# Proves BLPOP/BRPOP/BLMOVE answer at once from a list with data, time out with None on an
# empty one (and not before the timeout), and check the timeout argument.
def test_blocking_immediate_and_timeout(r):
    r.rpush("l", "a", "b")
    assert tuple(r.blpop(["empty", "l"], timeout=1)) == ("l", "a")
    assert tuple(r.brpop(["l"], timeout=1)) == ("l", "b")
    started = time.monotonic()
    assert r.blpop(["l", "empty"], timeout=0.2) is None
    assert time.monotonic() - started >= 0.18
    assert r.brpop("empty", timeout=0.05) is None
    assert r.blmove("empty", "dst", 0.05) is None
    r.rpush("l", "x")
    assert r.blmove("l", "dst", 1, "LEFT", "LEFT") == "x"
    assert error_text(lambda: r.blpop("l", timeout=-1)) == "timeout is negative"
    assert error_text(lambda: r.execute_command("BLPOP", "l", "abc")) == \
        "timeout is not a float or out of range"
    r.set("str", "x")
    assert error_text(lambda: r.blpop(["empty", "str"], timeout=0.05)) == WRONGTYPE


def blocked_call(call) -> tuple[threading.Thread, list]:
    """Runs `call` on a thread; the list receives its result or exception."""
    outcome: list = []

    def run():
        try:
            outcome.append(call())
        except Exception as error:  # noqa: BLE001 - handed to the test
            outcome.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


# Proves a BLPOP waiting on an empty list is woken by another client's RPUSH, which it consumes.
def test_blpop_woken_by_push(r, other):
    thread, outcome = blocked_call(lambda: r.blpop(["q1", "q2"], timeout=10))
    time.sleep(0.2)
    assert thread.is_alive(), f"BLPOP returned before any push: {outcome}"
    assert other.rpush("q2", "job") == 1
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert tuple(outcome[0]) == ("q2", "job")
    assert other.exists("q2") == 0, "the woken client consumed the element"


# Proves BRPOP and BLMOVE are woken by another client, and that two waiting clients are
# served in the order they blocked.
def test_blocking_wakeups_in_order(r, other, server, protocol):
    third = redis.Redis(host="127.0.0.1", port=server, protocol=protocol, decode_responses=True,
                        socket_timeout=10)
    try:
        first, first_outcome = blocked_call(lambda: r.brpop("q", timeout=10))
        time.sleep(0.15)
        second, second_outcome = blocked_call(lambda: third.blmove("q", "moved", 10, "LEFT", "RIGHT"))
        time.sleep(0.15)
        assert first.is_alive() and second.is_alive()
        other.rpush("q", "one")
        first.join(timeout=5)
        assert tuple(first_outcome[0]) == ("q", "one")
        assert second.is_alive()
        other.rpush("q", "two")
        second.join(timeout=5)
        assert second_outcome == ["two"]
        assert other.lrange("moved", 0, -1) == ["two"]
    finally:
        third.close()


# ------------------------------------------------------------------------------------------
# Sets


# Proves SADD/SREM/SMEMBERS/SISMEMBER/SMISMEMBER/SCARD and the removal of an emptied set.
def test_set_basics(r):
    assert r.sadd("s", "a", "b", "c", "a") == 3
    assert r.sadd("s", "c", "d") == 1
    assert r.smembers("s") == {"a", "b", "c", "d"}
    assert r.smembers("nokey") == set()
    assert bool(r.sismember("s", "a")) is True
    assert bool(r.sismember("s", "z")) is False
    assert [bool(x) for x in r.smismember("s", ["a", "z", "d"])] == [True, False, True]
    assert r.scard("s") == 4
    assert r.scard("nokey") == 0
    assert r.srem("s", "a", "z") == 1
    assert r.srem("s", "b", "c", "d") == 3
    assert r.exists("s") == 0
    assert r.sadd("ints", *range(10)) == 10
    assert r.smembers("ints") == {str(i) for i in range(10)}


# Proves SINTER/SUNION/SDIFF and their STORE forms, including missing keys and an
# empty result deleting the destination.
def test_set_algebra(r):
    r.sadd("a", "1", "2", "3", "x")
    r.sadd("b", "2", "3", "4")
    r.sadd("c", "3", "5")
    assert r.sinter("a", "b") == {"2", "3"}
    assert r.sinter("a", "b", "c") == {"3"}
    assert r.sinter("a", "nokey") == set()
    assert r.sunion("a", "b", "nokey") == {"1", "2", "3", "4", "x"}
    assert r.sdiff("a", "b") == {"1", "x"}
    assert r.sdiff("a", "b", "c") == {"1", "x"}
    assert r.sdiff("nokey", "a") == set()
    assert r.sinterstore("dst", ["a", "b"]) == 2
    assert r.smembers("dst") == {"2", "3"}
    assert r.sunionstore("dst", ["b", "c"]) == 4
    assert r.smembers("dst") == {"2", "3", "4", "5"}
    assert r.sdiffstore("dst", ["a", "b"]) == 2
    assert r.smembers("dst") == {"1", "x"}
    r.set("str", "v")
    assert r.sinterstore("str", ["a", "nokey"]) == 0
    assert r.exists("str") == 0, "an empty result deletes the destination, whatever it held"
    r.set("str", "v")
    assert error_text(lambda: r.sunion("a", "str")) == WRONGTYPE
    assert error_text(lambda: r.sinterstore("dst", ["a", "str"])) == WRONGTYPE


# Proves SPOP and SRANDMEMBER with and without counts, and SSCAN over small and large sets.
def test_set_random_and_scan(r):
    members = {str(i) for i in range(20)}
    r.sadd("s", *members)
    assert r.srandmember("s") in members
    some = r.srandmember("s", 5)
    assert len(some) == 5 and len(set(some)) == 5 and set(some) <= members
    assert set(r.srandmember("s", 50)) == members
    repeated = r.srandmember("s", -30)
    assert len(repeated) == 30 and set(repeated) <= members
    assert r.srandmember("nokey") is None
    assert r.srandmember("nokey", 3) == []
    popped = r.spop("s")
    assert popped in members and r.scard("s") == 19
    popped_many = r.spop("s", 4)
    assert len(set(popped_many)) == 4 and popped not in popped_many
    assert r.scard("s") == 15
    rest = r.spop("s", 100)
    assert len(rest) == 15 and r.exists("s") == 0
    assert r.spop("nokey") is None
    assert error_text(lambda: r.spop("s", -1)) == "value is out of range, must be positive"
    big = {f"m{i}" for i in range(700)}
    r.sadd("big", *big)
    assert set(r.sscan_iter("big", count=30)) == big
    assert set(r.sscan_iter("big", match="m1?")) == {f"m1{i}" for i in range(10)}


# ------------------------------------------------------------------------------------------
# Sorted sets


# Proves ZADD's options NX XX GT LT CH INCR, alone and combined, and their errors.
def test_zadd_options(r):
    assert r.zadd("z", {"a": 1, "b": 2}) == 2
    assert r.zadd("z", {"a": 5, "c": 3}, nx=True) == 1
    assert r.zscore("z", "a") == 1
    assert r.zadd("z", {"a": 5, "d": 4}, xx=True) == 0
    assert r.zscore("z", "a") == 5 and r.zscore("z", "d") is None
    assert r.zadd("z", {"a": 7, "b": 1}, xx=True, ch=True) == 2
    assert r.zadd("z", {"a": 6, "b": 9}, gt=True, ch=True) == 1
    assert (r.zscore("z", "a"), r.zscore("z", "b")) == (7, 9)
    assert r.zadd("z", {"a": 8, "b": 3, "new": 1}, lt=True, ch=True) == 2
    assert (r.zscore("z", "a"), r.zscore("z", "b"), r.zscore("z", "new")) == (7, 3, 1)
    assert r.zadd("z", {"a": 2.5}, incr=True) == 9.5
    assert r.zadd("z", {"a": 1}, incr=True, nx=True) is None
    assert r.zadd("z", {"a": -1}, incr=True, gt=True) is None
    assert r.zadd("z", {"inf": float("inf")}) == 1
    assert r.zscore("z", "inf") == float("inf")
    assert error_text(lambda: r.execute_command("ZADD", "z", "NX", "XX", 1, "a")) == \
        "XX and NX options at the same time are not compatible"
    assert error_text(lambda: r.execute_command("ZADD", "z", "GT", "LT", 1, "a")) == \
        "GT, LT, and/or NX options at the same time are not compatible"
    assert error_text(lambda: r.execute_command("ZADD", "z", "NX", "GT", 1, "a")) == \
        "GT, LT, and/or NX options at the same time are not compatible"
    assert error_text(lambda: r.execute_command("ZADD", "z", "INCR", 1, "a", 2, "b")) == \
        "INCR option supports a single increment-element pair"
    assert error_text(lambda: r.execute_command("ZADD", "z", "nan", "a")) == "value is not a valid float"
    assert error_text(lambda: r.execute_command("ZADD", "z", 1, "a", 2)) == "syntax error"
    assert error_text(lambda: r.execute_command("ZINCRBY", "z", "-inf", "inf")) == \
        "resulting score is not a number (NaN)"


# Proves ZREM/ZSCORE/ZMSCORE/ZINCRBY/ZCARD/ZCOUNT/ZRANK/ZREVRANK.
def test_zset_basics(r):
    r.zadd("z", {"a": 1, "b": 2, "c": 3, "d": 3})
    assert r.zcard("z") == 4
    assert r.zscore("z", "b") == 2.0
    assert r.zscore("z", "nope") is None
    assert r.zmscore("z", ["a", "nope", "d"]) == [1.0, None, 3.0]
    assert r.zincrby("z", 1.5, "a") == 2.5
    assert r.zincrby("z", 1, "new") == 1.0
    assert r.zcount("z", 2, 3) == 4
    assert r.zcount("z", "(2", "+inf") == 3
    assert r.zcount("z", "-inf", "(1") == 0
    assert r.zrank("z", "new") == 0
    assert r.zrank("z", "d") == 4
    assert r.zrevrank("z", "d") == 0
    assert r.zrank("z", "nope") is None
    assert r.zrem("z", "new", "nope") == 1
    assert r.zrem("z", "a", "b", "c", "d") == 4
    assert r.exists("z") == 0


# Proves ZRANGE by index, BYSCORE (exclusive and infinite bounds), BYLEX, REV, LIMIT and
# WITHSCORES, ZRANGEBYSCORE and their errors.
def test_zrange_forms(r):
    r.zadd("z", {"a": 1, "b": 2, "c": 2, "d": 4, "e": 5})
    assert r.zrange("z", 0, -1) == ["a", "b", "c", "d", "e"]
    assert r.zrange("z", -2, -1, withscores=True) and pairs(r.zrange("z", -2, -1, withscores=True)) == \
        [("d", 4.0), ("e", 5.0)]
    assert r.zrange("z", 0, 1, desc=True) == ["e", "d"]
    assert r.zrange("z", "(1", 4, byscore=True) == ["b", "c", "d"]
    assert r.zrange("z", "-inf", "+inf", byscore=True, offset=1, num=2) == ["b", "c"]
    assert r.zrange("z", "+inf", "(2", byscore=True, desc=True) == ["e", "d"]
    assert r.zrangebyscore("z", "(1", "(4") == ["b", "c"]
    assert pairs(r.zrangebyscore("z", 2, "+inf", withscores=True, start=1, num=5)) == \
        [("c", 2.0), ("d", 4.0), ("e", 5.0)]
    assert r.zrangebyscore("z", 5, 1) == []
    r.zadd("lex", {m: 0 for m in "abcdef"})
    assert r.zrange("lex", "[b", "(e", bylex=True) == ["b", "c", "d"]
    assert r.zrange("lex", "-", "+", bylex=True, offset=4, num=10) == ["e", "f"]
    assert r.zrange("lex", "+", "(d", bylex=True, desc=True) == ["f", "e"]
    assert error_text(lambda: r.execute_command("ZRANGE", "z", 0, 1, "LIMIT", 0, 1)) == \
        "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
    assert error_text(lambda: r.execute_command("ZRANGE", "lex", "-", "+", "BYLEX", "WITHSCORES")) == \
        "syntax error, WITHSCORES not supported in combination with BYLEX"
    assert error_text(lambda: r.execute_command("ZRANGE", "lex", "a", "+", "BYLEX")) == \
        "min or max not valid string range item"
    assert error_text(lambda: r.execute_command("ZRANGEBYSCORE", "z", "x", 1)) == "min or max is not a float"


# Proves ZREMRANGEBYSCORE, ZPOPMIN/ZPOPMAX with and without counts, and ZSCAN.
def test_zset_removals_and_scan(r):
    r.zadd("z", {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5})
    assert r.zremrangebyscore("z", "(1", 2) == 1
    assert r.zremrangebyscore("z", 10, 20) == 0
    assert pairs(r.zpopmin("z")) == [("a", 1.0)]
    assert pairs(r.zpopmax("z", 2)) == [("e", 5.0), ("d", 4.0)]
    assert pairs(r.zpopmin("z", 10)) == [("c", 3.0)]
    assert r.exists("z") == 0
    assert r.zpopmin("z") == []
    assert error_text(lambda: r.zpopmin("z", -1)) == "value is out of range, must be positive"
    members = {f"m{i}": float(i) for i in range(300)}
    r.zadd("big", members)
    assert dict(r.zscan_iter("big", count=40)) == members
    assert dict(r.zscan_iter("big", match="m29?")) == {f"m29{i}": 290.0 + i for i in range(10)}


# ------------------------------------------------------------------------------------------
# Types, encodings, WRONGTYPE, expiration


def make_every_type(r) -> dict[str, str]:
    r.set("string", "v")
    r.hset("hash", "f", "v")
    r.rpush("list", "a")
    r.sadd("set", "a")
    r.zadd("zset", {"a": 1})
    return {"string": "string", "hash": "hash", "list": "list", "set": "set", "zset": "zset"}


# Proves TYPE names every type, and every type's commands refuse the others' keys with WRONGTYPE.
def test_type_and_wrongtype(r):
    for key, kind in make_every_type(r).items():
        assert r.type(key) == kind
    assert r.type("nokey") == "none"
    calls = {
        "string": lambda k: r.get(k), "hash": lambda k: r.hget(k, "f"),
        "list": lambda k: r.lpush(k, "x"), "set": lambda k: r.sadd(k, "x"),
        "zset": lambda k: r.zadd(k, {"x": 1}),
    }
    for key in calls:
        for kind, call in calls.items():
            if kind != key:
                assert error_text(lambda: call(key)) == WRONGTYPE, (kind, key)


# Proves OBJECT ENCODING answers as Redis 7.0 does for compact and converted encodings.
def test_object_encoding(r):
    r.set("int", "12345")
    r.set("short", "hello")
    r.set("long", "x" * 60)
    r.hset("hash", "f", "v")
    r.hset("bighash", mapping={f"f{i}": i for i in range(600)})
    r.rpush("list", "a")
    r.sadd("intset", 1, 2, 3)
    r.sadd("strset", "a")
    r.zadd("zset", {"a": 1})
    r.zadd("bigzset", {f"m{i}": i for i in range(200)})
    r.set("appended", "1")
    r.append("appended", "2")
    expected = {"int": "int", "short": "embstr", "long": "raw", "appended": "raw", "hash": "listpack",
                "bighash": "hashtable", "list": "quicklist", "intset": "intset",
                "strset": "hashtable", "zset": "listpack", "bigzset": "skiplist"}
    assert {key: r.object("encoding", key) for key in expected} == expected
    assert r.object("encoding", "nokey") is None


# Proves EXPIRE/TTL/PERSIST on a key of every type, that changing a collection keeps its TTL,
# that expired keys of every type are gone, and that emptying a collection clears its TTL.
def test_expiration_every_type(r):
    keys = make_every_type(r)
    for key in keys:
        assert r.expire(key, 100) is True
        assert 99 <= r.ttl(key) <= 100
    r.hset("hash", "g", "w")
    r.rpush("list", "b")
    r.sadd("set", "b")
    r.zadd("zset", {"b": 2})
    for key in ["hash", "list", "set", "zset"]:
        assert 99 <= r.ttl(key) <= 100, f"a change to {key} dropped its TTL"
    r.set("string", "new")
    assert r.ttl("string") == -1, "SET drops the TTL"
    assert r.persist("hash") is True and r.ttl("hash") == -1
    assert r.rename("list", "renamed") is True and 99 <= r.ttl("renamed") <= 100
    assert r.rename("renamed", "list") is True
    for key in keys:
        assert r.pexpire(key, 30) is True
    time.sleep(0.1)
    for key in keys:
        assert r.exists(key) == 0, key
        assert r.type(key) == "none"
        assert r.ttl(key) == -2
    r.sadd("set", "x")
    r.expire("set", 100)
    r.srem("set", "x")
    r.sadd("set", "y")
    assert r.ttl("set") == -1, "an emptied set was deleted with its TTL"


# ------------------------------------------------------------------------------------------
# Transactions


# Proves MULTI/EXEC through a transactional pipeline: replies in order, a runtime error in
# its place without undoing the rest, and a queueing error aborting everything.
def test_multi_exec_pipeline(r):
    with r.pipeline(transaction=True) as pipe:
        pipe.set("a", 1).incr("a").lpush("a", "x").get("a").hset("h", "f", "v")
        results = pipe.execute(raise_on_error=False)
    assert results[:2] == [True, 2]
    assert isinstance(results[2], redis.ResponseError) and str(results[2]) == WRONGTYPE
    assert results[3:] == ["2", 1]
    with r.pipeline(transaction=True) as pipe:
        pipe.set("b", 1).execute_command("NOSUCH").set("c", 1)
        with pytest.raises(redis.ResponseError, match="unknown command 'NOSUCH'"):
            pipe.execute()
    assert r.exists("b", "c") == 0, "a transaction with a queueing error runs nothing"
    with r.pipeline(transaction=True) as pipe:
        pipe.set("b", 1).execute_command("GET")
        with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'get' command"):
            pipe.execute()
    assert r.exists("b") == 0


# Proves MULTI/EXEC/DISCARD errors on a raw connection: nesting, EXEC/DISCARD without MULTI,
# WATCH inside MULTI, and EXECABORT.
def test_multi_errors(server, protocol):
    conn = Connection("127.0.0.1", server, protocol)
    try:
        conn.send([[b"FLUSHALL"], [b"EXEC"], [b"DISCARD"], [b"MULTI"], [b"MULTI"], [b"WATCH", b"k"],
                   [b"SET", b"k", b"v"], [b"GET"], [b"EXEC"], [b"GET", b"k"],
                   [b"MULTI"], [b"SET", b"k", b"v"], [b"DISCARD"], [b"GET", b"k"]])
        replies = [conn.read() for _ in range(14)]
    finally:
        conn.close()
    null = ("_", None) if protocol == 3 else ("$", None)
    assert replies == [
        ("+", b"OK"), ("-", b"ERR EXEC without MULTI"), ("-", b"ERR DISCARD without MULTI"),
        ("+", b"OK"), ("-", b"ERR MULTI calls can not be nested"),
        ("-", b"ERR WATCH inside MULTI is not allowed"), ("+", b"QUEUED"),
        ("-", b"ERR wrong number of arguments for 'get' command"),
        ("-", b"EXECABORT Transaction discarded because of previous errors."), null,
        ("+", b"OK"), ("+", b"QUEUED"), ("+", b"OK"), null,
    ]


# Proves WATCH: another client's change of a watched key fails the transaction with
# WatchError and nothing of it runs; an unrelated change or UNWATCH lets it through.
def test_watch(r, other):
    r.set("k", "0")
    with r.pipeline() as pipe:
        pipe.watch("k")
        assert pipe.get("k") == "0"
        other.set("k", "changed")
        pipe.multi()
        pipe.set("k", "mine")
        pipe.set("side", "effect")
        with pytest.raises(redis.WatchError):
            pipe.execute()
    assert r.get("k") == "changed" and r.exists("side") == 0
    with r.pipeline() as pipe:
        pipe.watch("k")
        other.set("unrelated", "x")
        pipe.multi()
        pipe.set("k", "mine")
        assert pipe.execute() == [True]
    with r.pipeline() as pipe:
        pipe.watch("k")
        pipe.unwatch()
        other.set("k", "again")
        pipe.multi()
        pipe.set("k", "mine2")
        assert pipe.execute() == [True]
    assert r.get("k") == "mine2"
    # Every change of the watched key fails the transaction; a write that changes nothing
    # (adding a member it has, removing one it lacks) does not — except LTRIM, which Redis
    # signals even when it keeps every element.
    as_set = lambda: other.sadd("wk", "m")  # noqa: E731
    as_list = lambda: other.rpush("wk", "a")  # noqa: E731
    changes = [
        (as_set, lambda: other.sadd("wk", "new"), True), (as_set, lambda: other.srem("wk", "m"), True),
        (as_set, lambda: other.expire("wk", 1000), True), (as_set, lambda: other.delete("wk"), True),
        (as_set, lambda: other.rename("wk", "moved"), True), (as_set, lambda: other.sadd("wk", "m"), False),
        (as_set, lambda: other.srem("wk", "absent"), False), (as_set, lambda: other.delete("absent"), False),
        (as_list, lambda: other.ltrim("wk", 0, -1), True), (as_list, lambda: other.lrem("wk", 0, "zz"), False),
    ]
    for number, (setup, change, fails) in enumerate(changes):
        other.delete("wk", "moved")
        setup()
        with r.pipeline() as pipe:
            pipe.watch("wk")
            change()
            pipe.multi()
            pipe.set("after", number)
            if fails:
                with pytest.raises(redis.WatchError):
                    pipe.execute()
            else:
                assert pipe.execute() == [True], f"change {number} changed nothing"


# Proves redis-py's transaction() helper retries a watched read-modify-write until it wins.
def test_transaction_helper_retries(r, other):
    r.set("counter", "10")
    attempts = []

    def increment(pipe):
        value = int(pipe.get("counter"))
        if not attempts:
            other.incr("counter")  # a concurrent change the first attempt must lose to
        attempts.append(value)
        pipe.multi()
        pipe.set("counter", value + 1)

    r.transaction(increment, "counter")
    assert attempts == [10, 11]
    assert r.get("counter") == "12"


# ------------------------------------------------------------------------------------------
# Pub/sub


def next_message(pubsub, timeout_s: float = 5.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        message = pubsub.get_message(timeout=0.1)
        if message is not None:
            return message
    raise AssertionError("no message arrived")


# Proves SUBSCRIBE/PSUBSCRIBE through redis-py's PubSub: confirmations, messages and pattern
# messages, PUBLISH's receiver count, PUBSUB CHANNELS/NUMSUB/NUMPAT, and unsubscribing.
def test_pubsub_redis_py(r, other):
    pubsub = r.pubsub()
    try:
        pubsub.subscribe("news", "sport")
        assert next_message(pubsub) == {"type": "subscribe", "pattern": None, "channel": "news", "data": 1}
        assert next_message(pubsub) == {"type": "subscribe", "pattern": None, "channel": "sport", "data": 2}
        pubsub.psubscribe("n*")
        assert next_message(pubsub) == {"type": "psubscribe", "pattern": None, "channel": "n*", "data": 3}
        assert other.publish("news", "hello") == 2
        assert other.publish("nobody", "x") == 1
        assert other.publish("void", "x") == 0
        received = [next_message(pubsub) for _ in range(3)]
        assert {"type": "message", "pattern": None, "channel": "news", "data": "hello"} in received
        assert {"type": "pmessage", "pattern": "n*", "channel": "news", "data": "hello"} in received
        assert {"type": "pmessage", "pattern": "n*", "channel": "nobody", "data": "x"} in received
        assert sorted(other.pubsub_channels()) == ["news", "sport"]
        assert other.pubsub_channels("s*") == ["sport"]
        assert other.pubsub_numsub("news", "void") == [("news", 1), ("void", 0)]
        assert other.pubsub_numpat() == 1
        pubsub.unsubscribe("news")
        assert next_message(pubsub) == {"type": "unsubscribe", "pattern": None, "channel": "news", "data": 2}
        pubsub.punsubscribe()
        assert next_message(pubsub) == {"type": "punsubscribe", "pattern": None, "channel": "n*", "data": 1}
        assert other.publish("news", "again") == 0
        assert other.pubsub_numpat() == 0
    finally:
        pubsub.close()
    deadline = time.monotonic() + 5
    while other.pubsub_channels() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert other.pubsub_channels() == [], "a closed subscriber leaves no channel behind"


# Proves the frames of pub/sub on the wire: RESP2 arrays and RESP3 pushes, UNSUBSCRIBE with no
# channel, and which commands a subscribed RESP2 connection may still run (RESP3 runs all).
def test_pubsub_frames(server, protocol):
    subscriber = Connection("127.0.0.1", server, protocol)
    publisher = Connection("127.0.0.1", server, protocol)
    frame = ">" if protocol == 3 else "*"
    bulk = lambda text: ("$", text)  # noqa: E731
    try:
        subscriber.send([[b"SUBSCRIBE", b"ch"], [b"PING"], [b"PING", b"x"], [b"GET", b"k"]])
        assert subscriber.read() == (frame, (bulk(b"subscribe"), bulk(b"ch"), (":", 1)))
        if protocol == 2:
            assert subscriber.read() == ("*", (bulk(b"pong"), bulk(b"")))
            assert subscriber.read() == ("*", (bulk(b"pong"), bulk(b"x")))
            assert subscriber.read() == ("-", b"ERR Can't execute 'get': only (P|S)SUBSCRIBE / "
                                              b"(P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context")
        else:
            assert subscriber.read() == ("+", b"PONG")
            assert subscriber.read() == ("$", b"x")
            assert subscriber.read() == ("_", None)
        publisher.send([[b"PUBLISH", b"ch", b"hi"]])
        assert publisher.read() == (":", 1)
        assert subscriber.read() == (frame, (bulk(b"message"), bulk(b"ch"), bulk(b"hi")))
        subscriber.send([[b"PSUBSCRIBE", b"c*"], [b"UNSUBSCRIBE"], [b"PUNSUBSCRIBE"], [b"UNSUBSCRIBE"]])
        assert subscriber.read() == (frame, (bulk(b"psubscribe"), bulk(b"c*"), (":", 2)))
        assert subscriber.read() == (frame, (bulk(b"unsubscribe"), bulk(b"ch"), (":", 1)))
        assert subscriber.read() == (frame, (bulk(b"punsubscribe"), bulk(b"c*"), (":", 0)))
        no_channel = ("_", None) if protocol == 3 else ("$", None)
        assert subscriber.read() == (frame, (bulk(b"unsubscribe"), no_channel, (":", 0)))
        subscriber.send([[b"GET", b"k"]])
        assert subscriber.read() == (("_", None) if protocol == 3 else ("$", None))
    finally:
        subscriber.close()
        publisher.close()


# Proves a subscriber that stops reading is disconnected once its output passes the limit,
# and that the publisher and the server carry on.
def test_slow_subscriber_is_disconnected(server, protocol, other):
    subscriber = socket.create_connection(("127.0.0.1", server), timeout=10)
    subscriber.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        subscriber.sendall(b"*2\r\n$9\r\nSUBSCRIBE\r\n$4\r\nslow\r\n")
        assert subscriber.recv(1024).startswith(b"*3\r\n$9\r\nsubscribe")
        payload = "x" * (1 << 20)
        deadline = time.monotonic() + 60
        published = 0
        # Redis' pubsub hard limit is 32 MiB; publish up to 256 MiB and watch the count drop.
        while other.pubsub_numsub("slow")[0][1] == 1:
            assert published < 256 and time.monotonic() < deadline, "the slow subscriber was never dropped"
            other.publish("slow", payload)
            published += 1
        assert other.ping() is True
        assert other.pubsub_numsub("slow") == [("slow", 0)]
    finally:
        subscriber.close()


# ------------------------------------------------------------------------------------------
# Client-side caching (CLIENT TRACKING)
#
# redis-py 5.x's own client-side cache (cache_config=CacheConfig()) refuses servers older than
# 7.4, which redis-server 7.0 and Weft are, so tracking is driven on raw connections here:
# RESP3 invalidation pushes on the tracking connection, and RESP2 redirection to a connection
# subscribed to __redis__:invalidate.


def invalidation(keys: list[bytes] | None, push: bool):
    """The invalidation frame for `keys` (None: a flush)."""
    body = ("*", tuple(("$", k) for k in keys)) if keys is not None else (("_", None) if push else ("*", None))
    if push:
        return (">", (("$", b"invalidate"), body))
    return ("*", (("$", b"message"), ("$", b"__redis__:invalidate"), body))


# Proves RESP3 default-mode tracking: a key read is invalidated by another client's write
# (once: it must be read again to be tracked again), and FLUSHALL invalidates everything.
def test_tracking_resp3_push(server):
    tracker = Connection("127.0.0.1", server, 3)
    writer = Connection("127.0.0.1", server, 3)
    try:
        writer.send([[b"FLUSHALL"], [b"SET", b"k", b"v"], [b"HSET", b"h", b"f", b"v"]])
        assert [writer.read() for _ in range(3)] == [("+", b"OK"), ("+", b"OK"), (":", 1)]
        tracker.send([[b"CLIENT", b"TRACKING", b"ON"], [b"GET", b"k"], [b"HGET", b"h", b"f"]])
        assert [tracker.read() for _ in range(3)] == [("+", b"OK"), ("$", b"v"), ("$", b"v")]
        writer.send([[b"SET", b"k", b"v2"]])
        assert writer.read() == ("+", b"OK")
        assert tracker.read(timeout_s=5) == invalidation([b"k"], push=True)
        writer.send([[b"SET", b"k", b"v3"], [b"HDEL", b"h", b"f"]])
        assert [writer.read() for _ in range(2)] == [("+", b"OK"), (":", 1)]
        assert tracker.read(timeout_s=5) == invalidation([b"h"], push=True), \
            "k was not read again, so it is not invalidated twice"
        tracker.send([[b"GET", b"k"]])
        assert tracker.read() == ("$", b"v3")
        writer.send([[b"FLUSHALL"]])
        assert writer.read() == ("+", b"OK")
        assert tracker.read(timeout_s=5) == invalidation(None, push=True)
        tracker.send([[b"CLIENT", b"TRACKING", b"OFF"], [b"PING"]])
        assert [tracker.read() for _ in range(2)] == [("+", b"OK"), ("+", b"PONG")]
    finally:
        tracker.close()
        writer.close()


# Proves BCAST mode with PREFIX: writes to keys under a prefix are announced whether or not the
# tracker read them, writes elsewhere are not, and the tracker's own writes are too (no NOLOOP).
def test_tracking_bcast_prefix(server):
    tracker = Connection("127.0.0.1", server, 3)
    writer = Connection("127.0.0.1", server, 3)
    try:
        tracker.send([[b"CLIENT", b"TRACKING", b"ON", b"BCAST", b"PREFIX", b"user:"]])
        assert tracker.read() == ("+", b"OK")
        writer.send([[b"SET", b"other", b"1"], [b"SET", b"user:1", b"a"]])
        assert [writer.read() for _ in range(2)] == [("+", b"OK"), ("+", b"OK")]
        assert tracker.read(timeout_s=5) == invalidation([b"user:1"], push=True)
        tracker.send([[b"SADD", b"user:set", b"m"]])
        assert tracker.read() == (":", 1)
        assert tracker.read(timeout_s=5) == invalidation([b"user:set"], push=True)
        tracker.send([[b"CLIENT", b"TRACKING", b"ON"], [b"CLIENT", b"TRACKING", b"OFF"],
                      [b"CLIENT", b"TRACKING", b"ON", b"PREFIX", b"x"],
                      [b"CLIENT", b"TRACKING", b"ON", b"BCAST", b"PREFIX", b"a", b"PREFIX", b"ab"],
                      [b"CLIENT", b"TRACKING", b"maybe"]])
        assert [tracker.read() for _ in range(5)] == [
            ("-", b"ERR You can't switch BCAST mode on/off before disabling tracking for this client, "
                  b"and then re-enabling it with a different mode."),
            ("+", b"OK"),
            ("-", b"ERR PREFIX option requires BCAST mode to be enabled"),
            ("-", b"ERR Prefix 'a' overlaps with another provided prefix 'ab'. "
                  b"Prefixes for a single client must not overlap."),
            ("-", b"ERR syntax error"),
        ]
    finally:
        tracker.close()
        writer.close()


# Proves RESP2 tracking with REDIRECT: invalidations of keys read (of every type) arrive as
# pub/sub messages on the __redis__:invalidate channel of the client redirected to.
def test_tracking_resp2_redirect(server):
    listener = Connection("127.0.0.1", server, 2)
    tracker = Connection("127.0.0.1", server, 2)
    writer = Connection("127.0.0.1", server, 2)
    try:
        listener.send([[b"CLIENT", b"ID"], [b"SUBSCRIBE", b"__redis__:invalidate"]])
        listener_id = listener.read()
        assert listener_id[0] == ":"
        assert listener.read()[0] == "*"
        writer.send([[b"FLUSHALL"], [b"RPUSH", b"l", b"a"], [b"ZADD", b"z", b"1", b"m"]])
        [writer.read() for _ in range(3)]
        tracker.send([[b"CLIENT", b"TRACKING", b"ON", b"REDIRECT", str(listener_id[1]).encode()],
                      [b"LRANGE", b"l", b"0", b"-1"], [b"ZSCORE", b"z", b"m"]])
        assert [tracker.read() for _ in range(3)] == [("+", b"OK"), ("*", (("$", b"a"),)), ("$", b"1")]
        writer.send([[b"LPUSH", b"l", b"b"]])
        assert writer.read() == (":", 2)
        assert listener.read(timeout_s=5) == invalidation([b"l"], push=False)
        writer.send([[b"ZINCRBY", b"z", b"1", b"m"]])
        assert writer.read() == ("$", b"2")
        assert listener.read(timeout_s=5) == invalidation([b"z"], push=False)
        tracker.send([[b"CLIENT", b"TRACKING", b"ON", b"REDIRECT", b"999999"]])
        assert tracker.read() == ("-", b"ERR The client ID you want redirect to does not exist")
    finally:
        listener.close()
        tracker.close()
        writer.close()
