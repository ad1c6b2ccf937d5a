"""Raw-socket malformed and extreme input for the data-type commands, sent byte for byte to a
real redis-server and to Weft, over RESP2 and RESP3: whatever Redis answers (a protocol error
and a closed connection, or a reply, or silence) Weft must answer with the same bytes, close
when Redis closes, and keep the connection usable when Redis does.

Complements crates/weft-server/tests/resp_malformed.rs (bulk and multibulk lengths, binary
garbage, inline limits, quotes, disconnects) with negative and signed lengths inside a
command's arguments, lengths with leading zeros, bulks not followed by CRLF, empty multibulks
between commands, inline forms of the new commands, and counts at the edges of 64 bits.

Run: cargo build --release -p weft-server && pytest -q test_resp_malformed.py
"""

import socket
import time

import pytest

from differential import Connection

SENTINEL = b"*2\r\n$4\r\nECHO\r\n$8\r\nSENTINEL\r\n"
# How long one exchange may take before the test calls it a hang.
EXCHANGE_TIMEOUT_S = 5.0

SETUP = (b"*1\r\n$8\r\nFLUSHALL\r\n"
         b"*5\r\n$5\r\nRPUSH\r\n$1\r\nl\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\na\r\n"
         b"*4\r\n$4\r\nSADD\r\n$1\r\ns\r\n$1\r\nx\r\n$1\r\ny\r\n"
         b"*4\r\n$4\r\nHSET\r\n$1\r\nh\r\n$1\r\nf\r\n$1\r\nv\r\n"
         b"*6\r\n$4\r\nZADD\r\n$1\r\nz\r\n$1\r\n1\r\n$1\r\na\r\n$1\r\n2\r\n$1\r\nb\r\n")


def command(*args: bytes | str) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        arg = arg.encode() if isinstance(arg, str) else arg
        parts.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(parts)


MAX = "9223372036854775807"
MIN = "-9223372036854775808"

CASES = {
    # Lengths that are not lengths, inside a data-type command.
    "negative bulk length in LPUSH": b"*3\r\n$5\r\nLPUSH\r\n$1\r\nl\r\n$-1\r\n",
    "negative bulk length in SADD, data following": b"*3\r\n$4\r\nSADD\r\n$1\r\ns\r\n$-5\r\nabc\r\n",
    "plus-signed bulk length in HSET": b"*4\r\n$4\r\nHSET\r\n$1\r\nh\r\n$1\r\ng\r\n$+1\r\nv\r\n",
    "bulk length with leading zero": b"*2\r\n$04\r\nLLEN\r\n$1\r\nl\r\n",
    "multibulk count with leading zero": b"*02\r\n$4\r\nLLEN\r\n$1\r\nl\r\n",
    "bulk length with a space": b"*2\r\n$ 4\r\nLLEN\r\n$1\r\nl\r\n",
    "bulk length not a number": b"*2\r\n$4x\r\nLLEN\r\n$1\r\nl\r\n",
    "multibulk count past 32 bits": b"*2147483648\r\n",
    "bulk length past 64 bits": b"*2\r\n$99999999999999999999\r\nLLEN\r\n",
    "bulk not followed by CRLF": b"*2\r\n$4\r\nLLENXY$1\r\nl\r\n",
    "argument bulk not followed by CRLF": b"*3\r\n$5\r\nRPUSH\r\n$1\r\nl\r\n$3\r\nabcXY",
    "array marker where a bulk is due": b"*2\r\n$4\r\nLLEN\r\n*1\r\n",
    # Empty and null multibulks between commands are skipped.
    "null multibulk then a command": b"*-1\r\n" + command("LLEN", "l"),
    "empty multibulk then a command": b"*0\r\n" + command("SCARD", "s"),
    "blank inline line then a command": b"   \r\n\r\n" + command("HLEN", "h"),
    # Inline forms of the new commands, with quoting and escapes.
    "inline ZADD with quoted members": b"ZADD z 3 \"c d\" 4 'e'\r\nZRANGE z 0 -1 WITHSCORES\r\n",
    "inline HSET with hex escape": b"HSET h \"f\\x41\" v\r\nHGET h fA\r\n",
    "inline RPUSH with empty argument": b"RPUSH l \"\"\r\nLRANGE l 0 -1\r\n",
    # Counts and indexes at the edges of 64 bits (never a huge negative SRANDMEMBER/HRANDFIELD
    # count without WITHVALUES: Redis would build that reply).
    "LPOP with the largest count": command("LPOP", "l", MAX),
    "RPOP with the smallest count": command("RPOP", "l", MIN),
    "LRANGE to the largest index": command("LRANGE", "l", MIN, MAX),
    "LINDEX at the smallest index": command("LINDEX", "l", MIN),
    "LPOS with extreme options": command("LPOS", "l", "a", "RANK", MIN, "COUNT", MAX, "MAXLEN", MAX),
    "LPOS with the largest rank": command("LPOS", "l", "a", "RANK", MAX),
    "LSET past 64 bits": command("LSET", "l", "9223372036854775808", "x"),
    "LTRIM with extreme indexes": command("LTRIM", "l", MIN, MAX) + command("LRANGE", "l", "0", "-1"),
    "LREM with the smallest count": command("LREM", "l", MIN, "a"),
    # (on a one-member set: the order of several random picks is not defined)
    "SPOP with the largest count": command("SADD", "one", "m") + command("SPOP", "one", MAX),
    "SRANDMEMBER with the smallest count": command("SRANDMEMBER", "s", MIN),
    "SRANDMEMBER with the largest count": command("SADD", "one", "m") + command("SRANDMEMBER", "one", MAX),
    "HRANDFIELD WITHVALUES with a huge negative count": command("HRANDFIELD", "h", "-9223372036854775807", "WITHVALUES"),
    "HRANDFIELD with the largest count": command("HRANDFIELD", "h", MAX, "WITHVALUES")
    + command("HRANDFIELD", "h", MAX),
    "HINCRBY past 64 bits": command("HINCRBY", "h", "n", "9223372036854775808"),
    "HINCRBY to overflow": command("HINCRBY", "h", "n", MAX) + command("HINCRBY", "h", "n", "1"),
    "ZPOPMIN with the smallest count": command("ZPOPMIN", "z", MIN),
    "ZPOPMAX with the largest count": command("ZPOPMAX", "z", MAX),
    "ZRANGE with extreme LIMIT": command("ZRANGE", "z", "-inf", "+inf", "BYSCORE", "LIMIT", MAX, MAX),
    "ZRANGE with negative LIMIT count": command("ZRANGE", "z", "-inf", "+inf", "BYSCORE", "LIMIT", "0", MIN),
    "ZRANGEBYSCORE LIMIT past 64 bits": command("ZRANGEBYSCORE", "z", "0", "1", "LIMIT", "0", "9223372036854775808"),
    "ZADD with a huge exponent": command("ZADD", "z", "1e308", "big", "1e309", "bigger"),
    "ZINCRBY to infinity": command("ZINCRBY", "z", "1.7976931348623157e308", "a")
    + command("ZINCRBY", "z", "1.7976931348623157e308", "a"),
    "BLPOP with an overflowing timeout": command("BLPOP", "l", MAX),
    "BLMOVE with a huge timeout on data": command("BLMOVE", "l", "l2", "LEFT", "RIGHT", "1e15"),
    "EXPIRE on a hash past 64 bits of ms": command("EXPIRE", "h", "9223372036854775"),
    "SSCAN with an overflowing cursor": command("SSCAN", "s", "18446744073709551616"),
    "HSCAN with the largest COUNT": command("HSCAN", "h", "0", "COUNT", MAX),
    "SADD of 100000 members in one command": command("SADD", "big", *[str(i) for i in range(100_000)])
    + command("SCARD", "big"),
}


def exchange(port: int, protocol: int, payload: bytes) -> tuple[bytes, bool]:
    """Sends the setup, the payload and a sentinel ECHO; returns every byte received after the
    setup's replies, and whether the server closed the connection."""
    conn = Connection("127.0.0.1", port, protocol)
    try:
        conn.sock.sendall(SETUP)
        for _ in range(5):
            reply = conn.read()
            assert reply[0] not in ("-", "timeout", "closed"), reply
        sock = conn.sock
        sock.sendall(payload + SENTINEL)
        received = conn.buf[conn.pos:]
        closed = False
        deadline = time.monotonic() + EXCHANGE_TIMEOUT_S
        sock.settimeout(0.2)
        while not received.endswith(b"SENTINEL\r\n"):
            if time.monotonic() > deadline:
                break
            try:
                chunk = sock.recv(1 << 20)
            except socket.timeout:
                continue
            except ConnectionResetError:
                closed = True
                break
            if not chunk:
                closed = True
                break
            received += chunk
        return received, closed
    finally:
        conn.close()


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def protocol(request) -> int:
    return request.param


# Proves the reference itself: Redis answers a negative argument length with its protocol error
# and closes, and skips an empty multibulk (so the cases below compare meaningful behaviour).
def test_redis_reference_behaviour(redis_port, protocol):
    received, closed = exchange(redis_port, protocol, CASES["negative bulk length in LPUSH"])
    assert (received, closed) == (b"-ERR Protocol error: invalid bulk length\r\n", True)
    received, closed = exchange(redis_port, protocol, CASES["empty multibulk then a command"])
    assert (received, closed) == (b":2\r\n$8\r\nSENTINEL\r\n", False)


# Proves Weft answers each malformed or extreme request with Redis' exact bytes, closing the
# connection exactly when Redis does, and still serves other clients afterwards.
@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_weft_answers_malformed_input_as_redis(redis_port, weft_port, protocol, case):
    expected = exchange(redis_port, protocol, CASES[case])
    got = exchange(weft_port, protocol, CASES[case])
    assert got == expected, f"{case}: Redis {expected!r}, Weft {got!r}"
    # The server is still healthy for a fresh client.
    conn = Connection("127.0.0.1", weft_port, protocol)
    try:
        conn.send([[b"PING"]])
        assert conn.read() == ("+", b"PONG")
    finally:
        conn.close()


# Counts whose reply Redis itself would try to build in full (|count| random picks with
# repetition): never sent to redis-server, which would hang; Weft must answer something —
# an error, or a closed connection — without stopping, for every other client.
HUGE_RANDOM_COUNTS = {
    "SRANDMEMBER -10^17": command("SRANDMEMBER", "s", "-100000000000000000"),
    "SRANDMEMBER -(2^63-1)": command("SRANDMEMBER", "s", "-9223372036854775807"),
    "HRANDFIELD -10^17": command("HRANDFIELD", "h", "-100000000000000000"),
    "HRANDFIELD -(2^63-1) WITHVALUES": command("HRANDFIELD", "h", "-9223372036854775807", "WITHVALUES"),
    "ZRANDMEMBER -10^17": command("ZRANDMEMBER", "z", "-100000000000000000"),
    "ZRANDMEMBER -(2^63-1) WITHSCORES": command("ZRANDMEMBER", "z", "-9223372036854775807", "WITHSCORES"),
}


# Proves a random-pick count of 10^17 or more does not bring Weft down (no allocation sized
# by the count, no abort): the server keeps serving other clients.
@pytest.mark.parametrize("case", list(HUGE_RANDOM_COUNTS), ids=list(HUGE_RANDOM_COUNTS))
def test_huge_random_counts_leave_weft_running(weft_port, protocol, case):
    exchange(weft_port, protocol, HUGE_RANDOM_COUNTS[case])
    conn = Connection("127.0.0.1", weft_port, protocol)
    try:
        conn.send([[b"PING"]])
        assert conn.read() == ("+", b"PONG"), "the server stopped"
    finally:
        conn.close()
