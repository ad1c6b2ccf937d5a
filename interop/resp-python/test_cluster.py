"""redis-py's cluster client (RedisCluster) against three Weft nodes: it reads CLUSTER SLOTS,
sends each key to its slot's master, and everything it writes through one node reads back
through the others. The cache uses Redis' slots as segments (key-partitioner = "redis-slots"),
so the client's routing is the cluster's: no request is forwarded."""

import sys
import tempfile
import urllib.request
from pathlib import Path

import pytest
import redis
from redis.cluster import ClusterNode, RedisCluster

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


def forwarded(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        for line in response.read().decode().splitlines():
            if line.startswith('weft_cluster_forwarded_total{protocol="resp"}'):
                return int(float(line.split()[-1]))
    return 0


@pytest.fixture(scope="module")
def cluster_ports():
    if not WEFT_BIN.exists():
        pytest.fail(f"{WEFT_BIN} missing: run `cargo build --release -p weft-server`")
    work = Path(tempfile.mkdtemp(prefix="weft-resp-cluster-"))
    config = work / "weft.toml"
    config.write_text(CONFIG)
    ports, processes = launch_nodes(3, config)
    try:
        wait_ready(ports, processes)
        yield ports
    finally:
        for process in processes:
            stop(process)


def test_cluster_client_routes_by_slot_and_sees_every_write(cluster_ports):
    client = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", cluster_ports[0])],
                          decode_responses=True)
    try:
        nodes = {(n.host, n.port) for n in client.get_nodes()}
        assert nodes == {("127.0.0.1", p) for p in cluster_ports}
        before = sum(forwarded(p) for p in cluster_ports)
        for i in range(300):
            assert client.set(f"user:{i}", f"value-{i}")
        for i in range(300):
            assert client.get(f"user:{i}") == f"value-{i}"
        # Hash tags keep related keys on one slot, so multi-key commands work.
        client.mset_nonatomic({"{account:7}:name": "ada", "{account:7}:plan": "pro"})
        assert client.mget_nonatomic(["{account:7}:name", "{account:7}:plan"]) == ["ada", "pro"]
        assert client.hset("{account:7}:profile", mapping={"city": "paris", "lang": "fr"}) == 2
        assert client.hgetall("{account:7}:profile") == {"city": "paris", "lang": "fr"}
        after = sum(forwarded(p) for p in cluster_ports)
        assert after == before, f"{after - before} requests were forwarded"
        assert client.keyslot("foo") == 12182
        # The client scans every master, each of which covers its own slots: every key once.
        scanned = list(client.scan_iter(match="user:*", count=25))
        assert len(scanned) == len(set(scanned)) == 300
    finally:
        client.close()
    # Every node answers for every key, cluster client or not.
    for port in cluster_ports:
        plain = redis.Redis(port=port, decode_responses=True)
        assert plain.get("user:17") == "value-17"
        assert plain.dbsize() == 303
        plain.close()
