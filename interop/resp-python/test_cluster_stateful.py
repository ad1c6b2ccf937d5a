"""redis-py's stateful commands against three Weft nodes: blocking pops, (sharded) pub/sub,
MULTI/EXEC with WATCH and client tracking, each with the client on one node, the key owned by
another and the write that should reach the client sent through a third. The cache uses Redis'
slots as segments (key-partitioner = "redis-slots"), as in test_cluster.py.

redis-py 5.x (the version pinned in requirements.txt) refuses transactions in a cluster
pipeline (`RedisCluster.pipeline(transaction=True)` raises "transaction is deprecated in
cluster mode"), so the transactions run through a plain `redis.Redis` on a node that owns
none of their keys: Weft runs MULTI/EXEC and WATCH at the keys' owner."""

import json
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import redis
from redis.cache import CacheConfig
from redis.cluster import ClusterNode, RedisCluster
from redis.connection import CacheProxyConnection, Connection

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from weft_process import WEFT_BIN, stop  # noqa: E402
from with_weft_cluster import launch_nodes, wait_ready  # noqa: E402

CONFIG = """
[caches.default]
mode = "distributed"
owners = 2
segments = 64
key-partitioner = "redis-slots"
"""
SEGMENTS = 64
REDIS_SLOTS = 16384

# How long a blocked client is given to reach the server and block before the push that
# should wake it; a pop that returns earlier fails the test (it did not block).
BLOCK_SETTLE_S = 0.5
# How long a message, wake-up or invalidation sent through another node may take to arrive.
DELIVERY_S = 1.0


@pytest.fixture(scope="module")
def cluster_ports():
    if not WEFT_BIN.exists():
        pytest.fail(f"{WEFT_BIN} missing: run `cargo build --release -p weft-server`")
    work = Path(tempfile.mkdtemp(prefix="weft-resp-cluster-stateful-"))
    config = work / "weft.toml"
    config.write_text(CONFIG)
    ports, processes = launch_nodes(3, config)
    try:
        wait_ready(ports, processes)
        yield ports
    finally:
        for process in processes:
            stop(process)


def owners(ports: list[int], key: str) -> list[int]:
    """The ports of the key's owners, primary first, from the REST topology (launch_nodes
    names node i `node-i`; segment s covers slots s*256..s*256+255)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{ports[0]}/rest/v2/cluster/topology",
                                timeout=5) as response:
        report = json.load(response)
    (cache,) = [c for c in report["caches"] if c["cache"] == "default"]
    with redis.Redis(port=ports[0]) as plain:
        slot = plain.execute_command("CLUSTER", "KEYSLOT", key)
    names = cache["owners"][slot // (REDIS_SLOTS // SEGMENTS)]
    return [ports[int(name.rsplit("-", 1)[1])] for name in names]


def roles(ports: list[int], key: str) -> tuple[int, int, int]:
    """(primary, backup, stranger): the key's two owners and the node owning none of it."""
    primary, backup = owners(ports, key)
    (stranger,) = [p for p in ports if p not in (primary, backup)]
    return primary, backup, stranger


def in_thread(call):
    """Runs call() in a daemon thread; returns (thread, result dict with "value" or "error",
    "at": the monotonic time it returned)."""
    result = {}

    def run():
        try:
            result["value"] = call()
        except Exception as error:  # noqa: BLE001 — reported by the test
            result["error"] = error
        result["at"] = time.monotonic()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def blocked_then_woken(call, wake) -> object:
    """Starts the blocking call, checks it is still blocked after BLOCK_SETTLE_S, runs wake()
    and returns what the call returned, which must come within DELIVERY_S."""
    thread, result = in_thread(call)
    thread.join(BLOCK_SETTLE_S)
    assert thread.is_alive(), f"the blocking call returned at once: {result}"
    woken_at = time.monotonic()
    wake()
    thread.join(DELIVERY_S)
    assert not thread.is_alive(), f"not woken within {DELIVERY_S}s of the push"
    assert "error" not in result, result["error"]
    assert result["at"] - woken_at <= DELIVERY_S
    return result["value"]


# ---------------------------------------------------------------- blocking pops


def test_cluster_client_blocked_pops_are_woken_by_a_push_through_another_node(cluster_ports):
    rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", cluster_ports[0])],
                      decode_responses=True, socket_timeout=10)
    try:
        for command, key in (("blpop", "queue:left"), ("brpop", "queue:right")):
            primary, backup, stranger = roles(cluster_ports, key)
            assert rc.get_node_from_key(key).port == primary
            # Pushed through the node that owns none of the key, not the one the client waits on.
            pusher = redis.Redis(port=stranger, decode_responses=True)
            got = blocked_then_woken(lambda: getattr(rc, command)([key], timeout=5),
                                     lambda: pusher.rpush(key, "first", "second"))
            expected = "first" if command == "blpop" else "second"
            assert list(got) == [key, expected], command
            assert pusher.lrange(key, 0, -1) == ["second" if command == "blpop" else "first"]
            pusher.delete(key)
            pusher.close()
            # Nothing to pop: the timeout answers None.
            started = time.monotonic()
            assert getattr(rc, command)([key + ":empty"], timeout=1) is None
            assert 0.9 <= time.monotonic() - started < 3
    finally:
        rc.close()


def test_plain_client_on_a_non_owner_blocks_and_is_woken_by_a_push_through_a_third_node(cluster_ports):
    key = "{jobs}:pending"
    primary, backup, stranger = roles(cluster_ports, key)
    # The client waits on the node that owns none of the key; the push goes through the backup.
    waiter = redis.Redis(port=stranger, decode_responses=True, socket_timeout=10)
    pusher = redis.Redis(port=backup, decode_responses=True)
    try:
        got = blocked_then_woken(lambda: waiter.blpop([key], timeout=5),
                                 lambda: pusher.rpush(key, "job-1"))
        assert list(got) == [key, "job-1"]
        got = blocked_then_woken(lambda: waiter.brpop([key], timeout=5),
                                 lambda: pusher.lpush(key, "job-2", "job-3"))
        assert list(got) == [key, "job-2"]
        assert pusher.lrange(key, 0, -1) == ["job-3"]
        pusher.delete(key)
        # Several keys of one slot: the push to the second wakes the pop of both.
        other = "{jobs}:urgent"
        got = blocked_then_woken(lambda: waiter.blpop([key, other], timeout=5),
                                 lambda: pusher.rpush(other, "urgent-1"))
        assert list(got) == [other, "urgent-1"]
        # A timeout answers None, on the non-owner as on the owner.
        started = time.monotonic()
        assert waiter.blpop([key], timeout=1) is None
        assert waiter.brpop([key], timeout=1) is None
        assert 1.8 <= time.monotonic() - started < 5
        # The connection is still in step after the timeouts.
        pusher.rpush(key, "after")
        assert waiter.lpop(key) == "after"
    finally:
        waiter.close()
        pusher.close()


# ---------------------------------------------------------------- pub/sub


def next_message(pubsub, kind: str, get=None) -> dict:
    """The next message of `kind` (skipping subscribe confirmations), within DELIVERY_S."""
    get = get or (lambda timeout: pubsub.get_message(timeout=timeout))
    deadline = time.monotonic() + DELIVERY_S
    while (left := deadline - time.monotonic()) > 0:
        message = get(left)
        if message is not None and message["type"] == kind:
            return message
    pytest.fail(f"no {kind} within {DELIVERY_S}s")


def confirm(pubsub, kind: str, get=None) -> None:
    """Waits for the subscription's confirmation, so that what is published next must arrive."""
    assert next_message(pubsub, kind, get)["type"] == kind


def test_shard_subscribers_receive_what_is_spublished_on_another_node(cluster_ports):
    channel = "orders:{eu}"
    primary, backup, stranger = roles(cluster_ports, channel)
    # redis-py's cluster pubsub subscribes at the channel's slot owner.
    rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", cluster_ports[0])],
                      decode_responses=True)
    cluster_sub = rc.pubsub()
    # A plain client subscribes on the node that owns none of the channel's slot.
    plain_sub = redis.Redis(port=stranger, decode_responses=True).pubsub()
    publisher = redis.Redis(port=backup, decode_responses=True)
    try:
        cluster_sub.ssubscribe(channel)
        plain_sub.ssubscribe(channel)

        def cluster_get(timeout):
            return cluster_sub.get_sharded_message(timeout=timeout)

        confirm(cluster_sub, "ssubscribe", cluster_get)
        confirm(plain_sub, "ssubscribe")
        publisher.spublish(channel, "parcel-1")
        message = next_message(cluster_sub, "smessage", cluster_get)
        assert (message["channel"], message["data"]) == (channel, "parcel-1")
        message = next_message(plain_sub, "smessage")
        assert (message["channel"], message["data"]) == (channel, "parcel-1")
        # And the other way round: published through the stranger, received at the owner.
        redis.Redis(port=stranger, decode_responses=True).spublish(channel, "parcel-2")
        assert next_message(cluster_sub, "smessage", cluster_get)["data"] == "parcel-2"
        assert next_message(plain_sub, "smessage")["data"] == "parcel-2"
    finally:
        cluster_sub.close()
        plain_sub.close()
        publisher.close()
        rc.close()


def test_subscriber_on_one_node_receives_what_is_published_on_another(cluster_ports):
    a, b, c = cluster_ports
    subscriber = redis.Redis(port=a, decode_responses=True).pubsub()
    pattern_subscriber = redis.Redis(port=c, decode_responses=True).pubsub()
    publisher = redis.Redis(port=b, decode_responses=True)
    try:
        subscriber.subscribe("news")
        pattern_subscriber.psubscribe("ne*")
        confirm(subscriber, "subscribe")
        confirm(pattern_subscriber, "psubscribe")
        publisher.publish("news", "hello from b")
        message = next_message(subscriber, "message")
        assert (message["channel"], message["data"]) == ("news", "hello from b")
        message = next_message(pattern_subscriber, "pmessage")
        assert (message["pattern"], message["channel"], message["data"]) == ("ne*", "news", "hello from b")
    finally:
        subscriber.close()
        pattern_subscriber.close()
        publisher.close()


# ---------------------------------------------------------------- MULTI/EXEC and WATCH


def test_transactions_through_every_node_are_atomic_at_the_owner(cluster_ports):
    tag = "{ledger}"
    debit, credit = f"{tag}:debit", f"{tag}:credit"
    threads_per_node, transactions = 2, 40
    seen_uneven = []
    failures = []

    def work(port: int) -> None:
        client = redis.Redis(port=port, decode_responses=True)
        try:
            for _ in range(transactions):
                pipe = client.pipeline(transaction=True)
                pipe.incr(debit)
                pipe.incr(credit)
                first, second = pipe.execute()
                # Both counters move together in every transaction: no other transaction's
                # INCR may come between the two.
                if first != second:
                    seen_uneven.append((port, first, second))
        except Exception as error:  # noqa: BLE001 — reported below
            failures.append((port, repr(error)))
        finally:
            client.close()

    # Clients on every node, the owner included: all of them run at the owner.
    workers = [threading.Thread(target=work, args=(port,), daemon=True)
               for port in cluster_ports for _ in range(threads_per_node)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    assert not any(worker.is_alive() for worker in workers), "transactions still running after 30s"
    assert not failures, failures
    assert not seen_uneven, f"transactions interleaved: {seen_uneven[:5]}"
    total = len(workers) * transactions
    check = redis.Redis(port=cluster_ports[0], decode_responses=True)
    assert check.mget(debit, credit) == [str(total), str(total)]
    check.close()


def test_watch_on_a_non_owner_sees_a_change_made_through_another_node(cluster_ports):
    key, other = "{cart:42}:total", "{cart:42}:items"
    primary, backup, stranger = roles(cluster_ports, key)
    client = redis.Redis(port=stranger, decode_responses=True)
    meddler = redis.Redis(port=backup, decode_responses=True)
    try:
        client.set(key, 10)
        # Unchanged: the transaction commits.
        with client.pipeline(transaction=True) as pipe:
            pipe.watch(key)
            total = int(pipe.get(key))
            pipe.multi()
            pipe.set(key, total + 5)
            pipe.rpush(other, "apple")
            assert pipe.execute() == [True, 1]
        assert client.get(key) == "15"
        # Changed through another node between WATCH and EXEC: EXEC is refused.
        with client.pipeline(transaction=True) as pipe:
            pipe.watch(key)
            total = int(pipe.get(key))
            meddler.set(key, 100)
            pipe.multi()
            pipe.set(key, total + 5)
            pipe.rpush(other, "pear")
            with pytest.raises(redis.WatchError):
                pipe.execute()
        assert client.get(key) == "100"
        assert client.lrange(other, 0, -1) == ["apple"]
        # Changed through the owner itself, by a command of another type (it deletes the key).
        with client.pipeline(transaction=True) as pipe:
            pipe.watch(other)
            pipe.multi()
            pipe.rpush(other, "plum")
            with redis.Redis(port=primary) as owner:
                owner.delete(other)
            with pytest.raises(redis.WatchError):
                pipe.execute()
        assert client.exists(other) == 0
    finally:
        client.close()
        meddler.close()


# ---------------------------------------------------------------- client tracking


TRACKED_KEYS = [f"tracked:{i}" for i in range(40)]


def test_tracking_connection_gets_an_invalidation_for_every_key_written_on_another_node(cluster_ports):
    a, _, c = cluster_ports
    writer = redis.Redis(port=c, decode_responses=True)
    for key in TRACKED_KEYS:
        writer.set(key, "old")
    invalidated: dict[str, float] = {}

    def on_invalidation(push) -> None:
        # ["invalidate", [key, ...]] (a null list means everything: the test fails on it).
        keys = push[1]
        assert keys is not None, f"flush-all invalidation: {push}"
        for key in keys:
            key = key.decode() if isinstance(key, bytes) else key
            invalidated.setdefault(key, time.monotonic())

    tracker = Connection(port=a, protocol=3, socket_timeout=5)
    try:
        tracker.connect()
        tracker._parser.set_invalidation_push_handler(on_invalidation)
        tracker.send_command("CLIENT", "TRACKING", "ON")
        assert tracker.read_response() in (b"OK", "OK")
        for key in TRACKED_KEYS:
            tracker.send_command("GET", key)
            assert tracker.read_response() == b"old"
        written_at = {}
        for key in TRACKED_KEYS:
            writer.set(key, "new")
            written_at[key] = time.monotonic()
        # Pushes are timestamped when read, from here on: an upper bound of their delay.
        deadline = time.monotonic() + DELIVERY_S
        while len(invalidated) < len(TRACKED_KEYS) and (left := deadline - time.monotonic()) > 0:
            if tracker.can_read(timeout=left):
                tracker.read_response(push_request=True)
        missing = sorted(set(TRACKED_KEYS) - set(invalidated))
        assert not missing, f"{len(missing)} keys not invalidated within {DELIVERY_S}s, e.g. {missing[:5]}"
        late = {key: round(invalidated[key] - written_at[key], 3) for key in TRACKED_KEYS
                if invalidated[key] - written_at[key] > DELIVERY_S}
        assert not late, f"invalidations later than {DELIVERY_S}s after the write: {late}"
    finally:
        tracker.disconnect()
        writer.close()


def test_client_side_cache_on_one_node_never_serves_a_value_overwritten_on_another(cluster_ports, monkeypatch):
    a, _, c = cluster_ports
    # redis-py 5.x enables its client-side cache only for servers whose HELLO says Redis 7.4 or
    # later, and Weft says 7.2.0 (the command set it implements). The cache only needs
    # CLIENT TRACKING and RESP3 invalidation pushes, which Weft has: lower the gate.
    monkeypatch.setattr(CacheProxyConnection, "MIN_ALLOWED_VERSION", "7.2.0")
    writer = redis.Redis(port=c, decode_responses=True)
    keys = [f"cached:{i}" for i in range(40)]
    for key in keys:
        writer.set(key, "v1")
    cached = redis.Redis(port=a, protocol=3, cache_config=CacheConfig(), decode_responses=True)
    try:
        assert [cached.get(key) for key in keys] == ["v1"] * len(keys)
        cache = cached.get_cache()
        assert cache.size == len(keys), "redis-py did not cache the reads"
        # From now on redis-py answers these reads from its cache until an invalidation arrives.
        for key in keys:
            writer.set(key, "v2")
        deadline = time.monotonic() + DELIVERY_S
        stale = keys
        while stale and time.monotonic() < deadline:
            stale = [key for key in keys if cached.get(key) != "v2"]
            if stale:
                time.sleep(0.02)
        assert not stale, f"{len(stale)} keys still served stale after {DELIVERY_S}s, e.g. {stale[:5]}"
    finally:
        cached.close()
        writer.close()
