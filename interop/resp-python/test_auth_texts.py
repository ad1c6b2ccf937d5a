"""Authentication replies, byte for byte as redis-server 7.0 sends them: each sequence of
commands runs on a fresh connection to redis-server (`requirepass`, or none) and to Weft
(`[server] password`, or none), and the raw replies must be the same bytes."""

import socket
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from differential import start_redis  # noqa: E402
from weft_process import start_weft, stop, stop_weft_cleanly  # noqa: E402

PASSWORD = "s3cret-interop"


def command(*args: str) -> bytes:
    out = f"*{len(args)}\r\n".encode()
    for arg in args:
        data = arg.encode()
        out += b"$%d\r\n%s\r\n" % (len(data), data)
    return out


def replies(port: int, commands: list[tuple[str, ...]]) -> list[bytes]:
    """Sends `commands` one at a time on one new connection; each raw reply (one line each:
    every reply compared here is a simple string or an error)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        reader = conn.makefile("rb")
        answers = []
        for args in commands:
            conn.sendall(command(*args))
            answers.append(reader.readline())
        return answers


# With a password: what an unauthenticated client is told, wrong credentials of every form,
# then the right ones.
WITH_PASSWORD = [
    [("GET", "k")],
    [("SHUTDOWN",)],
    [("AUTH", "wrong")],
    [("AUTH", "default", "wrong")],
    [("AUTH", "nosuchuser", "x")],
    [("AUTH", "a", "b", "c")],
    [("HELLO", "3", "AUTH", "default", "wrong")],
    [("HELLO", "3")],
    [("AUTH", "wrong"), ("GET", "k"), ("AUTH", PASSWORD), ("SET", "k", "v")],
    [("AUTH", "default", PASSWORD), ("PING",)],
]

# Without a password.
WITHOUT_PASSWORD = [
    [("AUTH", PASSWORD)],
    [("AUTH", "default", PASSWORD)],
    [("AUTH", "default", "anything"), ("PING",)],
]


@pytest.fixture(scope="module")
def with_password(tmp_path_factory):
    redis, redis_port = start_redis(["--requirepass", PASSWORD])
    config = tmp_path_factory.mktemp("weft-password") / "weft.toml"
    config.write_text(f'[server]\npassword = "{PASSWORD}"\n')
    weft, weft_port = start_weft(config)
    try:
        yield redis_port, weft_port
    finally:
        stop(redis)
        stop_weft_cleanly(weft)


@pytest.fixture(scope="module")
def without_password():
    redis, redis_port = start_redis()
    weft, weft_port = start_weft()
    try:
        yield redis_port, weft_port
    finally:
        stop(redis)
        stop_weft_cleanly(weft)


@pytest.mark.parametrize("commands", WITH_PASSWORD, ids=lambda c: " / ".join(" ".join(a) for a in c))
def test_replies_with_a_password_are_redis_bytes(with_password, commands):
    redis_port, weft_port = with_password
    assert replies(weft_port, commands) == replies(redis_port, commands)


@pytest.mark.parametrize("commands", WITHOUT_PASSWORD, ids=lambda c: " / ".join(" ".join(a) for a in c))
def test_replies_without_a_password_are_redis_bytes(without_password, commands):
    redis_port, weft_port = without_password
    assert replies(weft_port, commands) == replies(redis_port, commands)
