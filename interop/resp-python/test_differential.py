"""Differential test: seeded random command streams (differential.py) against a fresh
redis-server and Weft, every reply compared at the protocol level, over RESP2 and RESP3 —
and, first, against a second redis-server, which proves the harness normalises only what
Redis itself leaves undefined.

Run: cargo build --release -p weft-server && pytest -q test_differential.py
(DIFFERENTIAL_COMMANDS sets the commands per stream, default 100,000 per protocol;
DIFFERENTIAL_SEED another sequence; DIFFERENTIAL_DOUBLES_BY_VALUE=1 compares doubles by value,
since redis-server 7.0 prints them with %.17g where 7.2 prints the shortest text; WEFT_BIN
and REDIS_SERVER_BIN the binaries. A failure prints the seed, the last commands with both
replies, and the run shrunk to a short sequence that still differs.)
"""

import io
import os

import pytest

from differential import coverage_gaps, minimize, run_differential, start_redis
from weft_process import stop

COMMANDS = int(os.environ.get("DIFFERENTIAL_COMMANDS", "100000"))
SEED = int(os.environ.get("DIFFERENTIAL_SEED", "20240611"))
DOUBLES_BY_VALUE = os.environ.get("DIFFERENTIAL_DOUBLES_BY_VALUE", "") not in ("", "0")
# Seconds a failure may spend shrinking the run to a short sequence, so CI stays quick.
MINIMIZE_TIME_S = 30.0
# Commands of the harness self-check (two redis-servers), which only guards the normalisation.
SELF_CHECK_COMMANDS = min(COMMANDS, 20_000)


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def protocol(request) -> int:
    return request.param


def run(a_port: int, b_port: int, seed: int, commands: int, protocol: int):
    out = io.StringIO()
    a, b = ("127.0.0.1", a_port), ("127.0.0.1", b_port)
    runner = run_differential(a, b, seed, commands, protocol, out=out, doubles_by_value=DOUBLES_BY_VALUE)
    if not runner.ok:
        minimize(a, b, protocol, runner, out=out, doubles_by_value=DOUBLES_BY_VALUE,
                 time_budget_s=MINIMIZE_TIME_S)
    assert runner.ok, f"\n{out.getvalue()}"
    return runner


# Proves two redis-servers agree on a random stream once normalised: the comparison forgives
# only what Redis does not define (set orders, random picks, scan pages, TTL rounding).
def test_harness_sees_no_difference_between_two_redis_servers(redis_port, protocol):
    process, other_port = start_redis()
    try:
        runner = run(redis_port, other_port, SEED + 100 + protocol, SELF_CHECK_COMMANDS, protocol)
    finally:
        stop(process)
    assert coverage_gaps(runner) == []


# Proves Weft answers a random stream of every issue-6 data-type command (with WRONGTYPE,
# edge-case arguments, transactions, WATCH from a second client, blocking pops, scans and
# random picks) exactly as redis-server does.
def test_weft_answers_as_redis(redis_port, weft_port, protocol):
    runner = run(redis_port, weft_port, SEED + protocol, COMMANDS, protocol)
    assert coverage_gaps(runner) == [], "the stream did not exercise every command"
