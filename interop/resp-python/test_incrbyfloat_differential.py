"""Differential test: INCRBYFLOAT on Weft against a real redis-server, reply for reply.

Redis adds in C `long double` (x87 80-bit extended precision on x86-64), parses with
`strtold` and prints with `%.17Lf` plus trimming; Weft emulates that in software. Random
increments (decimal of varied magnitude and precision, exponents, negatives, hexadecimal,
invalid and out-of-range texts, exact negations) are applied to the same keys on both
servers, with the occasional SET of a random text, and every reply, value or error text,
must be identical, as must the final values.

Run: cargo build --release -p weft-server && pytest -q test_incrbyfloat_differential.py
(WEFT_BIN overrides the Weft binary, default target/release/weft from the repository root;
REDIS_SERVER_BIN the redis-server binary, default the one on PATH; the test fails
without one; INCRBYFLOAT_SEED picks another random sequence.)
"""

import os
import random
import shutil
import subprocess
import time

import pytest
import redis

from weft_process import free_port, stop, wait_for_port

REDIS_SERVER_BIN = os.environ.get("REDIS_SERVER_BIN") or shutil.which("redis-server")
SEED = int(os.environ.get("INCRBYFLOAT_SEED", "20240607"))

OPERATIONS = 2_000
KEYS = [f"f{i}" for i in range(8)]
# One SET of a random text per this many INCRBYFLOATs, on average.
SET_EVERY = 10
TIME_LIMIT_S = 120.0


@pytest.fixture(scope="module")
def servers(weft_port):
    """Ports of the module's Weft (interop/conftest.py) and a fresh redis-server on loopback."""
    if REDIS_SERVER_BIN is None:
        pytest.fail("redis-server not installed (set REDIS_SERVER_BIN); .ci/run installs it")
    redis_port = free_port()
    real = subprocess.Popen(
        [REDIS_SERVER_BIN, "--port", str(redis_port), "--bind", "127.0.0.1",
         "--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "yes"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(redis_port, "redis-server")
        yield weft_port, redis_port
    finally:
        stop(real)


def client(port: int) -> redis.Redis:
    conn = redis.Redis(host="127.0.0.1", port=port, protocol=2, socket_timeout=10)
    # Keep INCRBYFLOAT's bulk string as bytes: the text is what is compared.
    conn.set_response_callback("INCRBYFLOAT", lambda response, **kwargs: response)
    return conn


def reply(conn: redis.Redis, *args):
    """("ok", bytes) or ("error", text) for one command."""
    try:
        return ("ok", conn.execute_command(*args))
    except redis.ResponseError as error:
        return ("error", str(error))


def digits(rng: random.Random, count: int) -> str:
    return "".join(rng.choice("0123456789") for _ in range(count))


def random_number(rng: random.Random) -> str:
    """A number text: mostly valid decimals of every shape Redis accepts, sometimes
    hexadecimal, out of range or malformed."""
    sign = rng.choice(["", "", "", "-", "+"])
    kind = rng.random()
    if kind < 0.30:
        # Plain decimal, few to many fraction digits.
        integer = digits(rng, rng.randint(0, 7))
        fraction = digits(rng, rng.randint(0, 22))
        text = integer + ("." + fraction if fraction or rng.random() < 0.1 else "")
        return sign + (text if text.strip(".") else "0")
    if kind < 0.55:
        # Scientific notation of moderate magnitude.
        mantissa = digits(rng, rng.randint(1, 21))
        exponent = rng.randint(-25, 25)
        point = rng.randint(1, len(mantissa))
        return (sign + mantissa[:point] + ("." + mantissa[point:] if point < len(mantissa) else "")
                + rng.choice("eE") + rng.choice(["", "+"] if exponent >= 0 else [""]) + str(exponent))
    if kind < 0.65:
        # Integers, up to past 2^64.
        return sign + str(rng.randint(0, 10 ** rng.randint(1, 22)))
    if kind < 0.72:
        # Extreme magnitudes: huge, tiny (including subnormal and underflowing), near the limits.
        mantissa = digits(rng, rng.randint(1, 20)).lstrip("0") or "1"
        exponent = rng.choice([rng.randint(-330, 330), rng.randint(-4960, -4900),
                               rng.randint(4900, 4935), rng.randint(-4000, 4000)])
        return sign + mantissa[0] + "." + mantissa[1:] + "e" + str(exponent)
    if kind < 0.78:
        # Hexadecimal floats.
        mantissa = format(rng.getrandbits(rng.choice([4, 16, 53, 64, 72])), "x")
        point = rng.randint(0, len(mantissa))
        mantissa = mantissa[:point] + ("." if rng.random() < 0.5 else "") + mantissa[point:]
        return (sign + rng.choice(["0x", "0X"]) + mantissa
                + (rng.choice("pP") + str(rng.randint(-80, 40)) if rng.random() < 0.8 else ""))
    if kind < 0.82:
        # Long digit strings, where correct rounding matters most.
        text = digits(rng, rng.randint(25, 300))
        point = rng.randint(0, len(text))
        return sign + text[:point] + "." + text[point:]
    if kind < 0.85:
        return rng.choice([
            "inf", "-inf", "+Infinity", "nan", "-NaN", "abc", "", " 1", "1 ", "1e", "1e+", ".",
            "-", "0x", "0x1p", "1.2.3", "1,5", "e5", "1e4933", "-1e5000", "1e-5000", "infinit",
            "0x1p16384", "0x1p-16446", "1" * 5200, "0x1p-16445", "18446744073709551617",
        ])
    # Short and friendly: the everyday INCRBYFLOAT increments.
    return sign + rng.choice(["0.1", "0.2", "0.3", "1.1", "2.2", "10.5", "-5", "3.0e3", "5.0e3",
                              "2.0e2", "1e-10", "0.5", "1", "100", "0.01", "99.99", "1e-17",
                              "5e-18", "0.000003814697265625"])


# Proves Weft's INCRBYFLOAT replies and stored values are byte-identical to Redis 7's for
# thousands of random increments and stored texts.
def test_incrbyfloat_matches_redis(servers):
    weft_port, redis_port = servers
    weft, real = client(weft_port), client(redis_port)
    rng = random.Random(SEED)
    started = time.monotonic()
    last_value = {key: None for key in KEYS}
    mismatches = []
    outcomes = {"short": 0, "long": 0, "error": 0}
    try:
        for conn in (weft, real):
            conn.delete(*KEYS)
        for step in range(OPERATIONS):
            assert time.monotonic() - started < TIME_LIMIT_S, f"too slow at step {step}"
            key = rng.choice(KEYS)
            if last_value[key] and len(last_value[key]) > 40 and rng.random() < 0.5:
                # A huge sum swamps every later increment: start the key afresh.
                for conn in (weft, real):
                    conn.delete(key)
                last_value[key] = None
            if rng.random() < 1 / SET_EVERY:
                text = random_number(rng)
                for conn in (weft, real):
                    conn.set(key, text)
                last_value[key] = text.encode()
            if last_value[key] and rng.random() < 0.03:
                # Exact negation of the current value: cancellation to zero.
                current = last_value[key].decode(errors="replace")
                increment = current[1:] if current.startswith("-") else "-" + current
            else:
                increment = random_number(rng)
            command = ("INCRBYFLOAT", key, increment)
            expected = reply(real, *command)
            got = reply(weft, *command)
            if expected[0] == "ok":
                last_value[key] = expected[1]
                outcomes["short" if len(expected[1]) <= 40 else "long"] += 1
            else:
                outcomes["error"] += 1
            if got != expected:
                mismatches.append((step, command, expected, got))
        for key in KEYS:
            if weft.get(key) != real.get(key):
                mismatches.append(("final", key, real.get(key), weft.get(key)))
    finally:
        weft.close()
        real.close()
    shown = "\n".join(repr(m)[:400] for m in mismatches[:20])
    assert not mismatches, f"{len(mismatches)} of {OPERATIONS} replies differ:\n{shown}"
    # The mix exercised everyday values most, and huge values and errors too.
    assert outcomes["short"] > OPERATIONS // 2, outcomes
    assert outcomes["long"] > 0 and outcomes["error"] > 0, outcomes
