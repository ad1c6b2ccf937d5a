"""A grid of three members in this process on loopback: a distributed cache written
through one member and read through the others, a member leaving with nothing lost, and a
cache defined at run time reaching every member."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import weft
from support import eventually

CACHES = {"caches": {"orders": {"mode": "distributed", "owners": 2}}}
SETTLE_S = 60


@pytest.fixture(scope="module")
def members() -> Iterator[list[weft.Grid]]:
    a = weft.Grid("a", secret="test-secret", caches=CACHES)
    b = weft.Grid("b", join=[a.address], secret="test-secret", caches=CACHES)
    c = weft.Grid("c", join=[a.address], secret="test-secret", caches=CACHES)
    grids = [a, b, c]
    try:
        for grid in grids:
            grid.wait_stable(3, timeout=SETTLE_S)
        # Formed: all three stable with each other at once (one may have been stable while
        # another still finished a rebalance that follows a join).
        eventually(lambda: all(grid.is_stable_with(3) for grid in grids), SETTLE_S,
                   "every member stable with 3 members at once")
        yield grids
    finally:
        for grid in grids:
            grid.leave()


def test_members_agree(members: list[weft.Grid]) -> None:
    # Proves the three members formed one cluster.
    for grid in members:
        assert grid.members() == ["a", "b", "c"]
        assert grid.is_stable_with(3)
        assert grid.address.startswith("127.0.0.1:")
    assert members[0].cache_names() == ["orders"]


def test_writes_through_one_member_are_read_through_the_others(members: list[weft.Grid]) -> None:
    # Proves routing to owners: every key written through a is read back through b and c,
    # each stored on exactly two members (owners = 2).
    a, b, c = (grid.cache("orders") for grid in members)
    assert a.kind == "grid"
    entries = {f"order-{i}": f"v-{i}" for i in range(200)}
    for key, value in entries.items():
        a.put(key, value)
    for key, value in entries.items():
        assert b.get(key) == value.encode()
        assert c.as_text()[key] == value
    assert len(b) == 200
    assert sorted(c.keys()) == sorted(k.encode() for k in entries)
    held = sum(grid.cache("orders").stats()["entries"] for grid in members)
    assert held == 2 * 200


def test_conditional_and_versioned_writes_at_the_owner(members: list[weft.Grid]) -> None:
    # Proves conditional writes decide at the owner, whichever member they are sent through.
    a, b, _ = (grid.cache("orders") for grid in members)
    assert a.put_if_absent("cas", "1") is True
    assert b.put_if_absent("cas", "2") is False
    found = b.get_with_version("cas")
    assert found is not None
    assert a.replace_if_version("cas", "3", found[1]) is True
    assert b.replace_if_version("cas", "4", found[1]) is False
    assert b.get("cas") == b"3"
    assert b.remove("cas") is True
    assert a.get("cas") is None
    b.put_all({"bulk-1": "x", "bulk-2": "y"})
    assert a.get_all(["bulk-1", "bulk-2", "none"]) == {b"bulk-1": b"x", b"bulk-2": b"y"}


def test_cache_defined_at_run_time_reaches_every_member(members: list[weft.Grid]) -> None:
    # Proves define_cache goes through the cluster: the others create it too.
    a, b, c = members
    events = a.define_cache("events", {"mode": "replicated"})
    events.put("e", "1")
    eventually(lambda: "events" in c.cache_names(), timeout_s=SETTLE_S, what="c has `events`")
    assert c.cache("events").get("e") == b"1"
    with pytest.raises(weft.CacheNotFoundError):
        b.cache("no-such-cache")


def test_a_member_leaves_and_nothing_is_lost() -> None:
    # Proves a graceful leave hands the member's data over, and a left member refuses calls.
    caches = {"caches": {"stock": {"mode": "distributed", "owners": 2}}}
    first = weft.Grid("x", caches=caches)
    second = weft.Grid("y", join=[first.address], caches=caches)
    third = weft.Grid("z", join=[first.address], caches=caches)
    try:
        for grid in (first, second, third):
            grid.wait_stable(3, timeout=SETTLE_S)
        stock = first.cache("stock")
        for i in range(100):
            stock.put(f"item-{i}", str(i))
        with third:
            pass  # leaves on exit
        assert third.left
        with pytest.raises(weft.ClosedError):
            third.cache("stock")
        first.wait_stable(2, timeout=SETTLE_S)
        survivor = second.cache("stock")
        assert [survivor.get(f"item-{i}") for i in range(100)] == [
            str(i).encode() for i in range(100)
        ]
    finally:
        for grid in (first, second, third):
            grid.leave()
