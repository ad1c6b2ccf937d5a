"""scripts/redis-test-suite's reading of runtest's output and its naming of failure causes, on
canned output: no server, no Redis sources."""

import importlib.util
import sys
from importlib.machinery import SourceFileLoader
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "redis-test-suite"
# The script has no .py suffix, so its loader is named explicitly; it is registered in
# sys.modules before it runs because its dataclasses look their module up there.
_loader = SourceFileLoader("redis_test_suite", str(SCRIPT))
suite = importlib.util.module_from_spec(importlib.util.spec_from_loader(_loader.name, _loader))
sys.modules[_loader.name] = suite
_loader.exec_module(suite)

# Shaped as runtest 7.0.15 prints it: a failure's message follows its [err] line, and the
# summary at the end repeats each failure after "*** ".
OUTPUT = """\
Cleanup: may take some time... OK
Starting test server at port 21079
[ready]: 9103
Testing unit/type/incr
[ok]: INCR against non existing key (0 ms)
[ok]: INCR against key created by incr itself (1 ms)
[ignore]: INCR uses shared objects in the 0-9999 range: Tag: needs:debug denied
[err]: INCRBYFLOAT does not allow NaN or Infinity in tests/unit/type/incr.tcl
Expected 'ERR unknown command 'incrbyfloat', with args beginning with: 'foo' '+inf'' to match '*would produce*'
[skip]: A skipped test
[ok]: string to double with null terminator (0 ms)
[1/1 done]: unit/type/incr (0 seconds)

                   The End

Execution time of different units:
  0 seconds - unit/type/incr

!!! WARNING The following tests failed:

*** [err]: INCRBYFLOAT does not allow NaN or Infinity in tests/unit/type/incr.tcl
Expected 'ERR unknown command 'incrbyfloat', with args beginning with: 'foo' '+inf'' to match '*would produce*'
Cleanup: may take some time... OK
"""


def test_parse_counts_each_status_once_and_keeps_failure_messages():
    # Proves the summary's "*** [err]" repeats are not counted again and a message is kept.
    result = suite.parse("unit/type/incr", OUTPUT)
    assert (result.passed, result.failed, result.exceptions, result.skipped) == (3, 1, 0, 2)
    assert result.finished
    assert result.failures == [{
        "test": "INCRBYFLOAT does not allow NaN or Infinity",
        "message": "Expected 'ERR unknown command 'incrbyfloat', with args beginning with: "
                   "'foo' '+inf'' to match '*would produce*'",
    }]


def test_parse_records_an_exception_and_an_unfinished_unit():
    # Proves an [exception] (which ends a unit without --durable) is kept with its stack.
    output = """\
Testing unit/type/incr
[exception]: Executing test client: ERR DB index is out of range.
ERR DB index is out of range
    while executing
"$client select 9"
"""
    result = suite.parse("unit/type/incr", output)
    assert (result.passed, result.exceptions, result.finished) == (0, 1, False)
    assert result.exception.startswith("Executing test client: ERR DB index is out of range.")
    assert '"$client select 9"' in result.exception
    assert suite.cause(result.exception) == "SELECT: DB index is out of range"


def test_parse_marks_a_durable_error_outside_any_test():
    # Proves --durable's [err] for an error outside a test block is not taken for a test name.
    output = """\
[ok]: Check encoding (0 ms)
[err]: n command 'config', with args beginning with: 'get' 'zset-max-ziplist-entries'
ERR unknown command 'config', with args beginning with: 'get' 'zset-max-ziplist-entries'
    while executing
"r config get zset-max-ziplist-entries"
[1/1 done]: unit/type/zset (0 seconds)
"""
    result = suite.parse("unit/type/zset", output)
    assert result.failures[0]["test"] == "(outside a test)"
    assert suite.cause(result.failures[0]["message"]) == "unknown command CONFIG GET"


def test_cause_names_commands_subcommands_and_replies():
    # Proves each kind of message gets the short cause the tables group by.
    cases = {
        "ERR unknown command 'geoadd', with args beginning with: 'Sicily' '13.36'":
            "unknown command GEOADD",
        "ERR unknown command 'monitor', with args beginning with:": "unknown command MONITOR",
        "ERR unknown command 'function', with args beginning with: 'flush'":
            "unknown command FUNCTION FLUSH",
        "Expected 'ERR unknown command 'CONFIG', with args beginning with: 'GET_XX'' to match x":
            "unknown command CONFIG",
        "ERR unknown subcommand 'pause'. Try CLIENT HELP.": "unknown subcommand CLIENT PAUSE",
        "I/O error reading reply": "connection closed by the server",
        "Expected 'listpack' to be equal to 'quicklist' (context: cmd {assert_encoding x})":
            "OBJECT ENCODING differs",
        "ERR The client ID you want redirect to does not exist":
            "error reply: ERR The client ID you want redirect to does not exist",
        "Expected 'a' to be equal to 'b'": "wrong reply (assertion)",
    }
    for message, expected in cases.items():
        assert suite.cause(message) == expected, message


def test_tests_lost_add_up_to_what_redis_passes_and_weft_does_not():
    # Proves the accounting: failing tests plus the tests a blocker kept from running.
    redis = {"unit/a": suite.UnitResult("unit/a", passed=10)}
    weft = {"unit/a": suite.UnitResult("unit/a", passed=4, failed=2, finished=True, failures=[
        {"test": "t1", "message": "ERR unknown command 'sort', with args beginning with: 'x'"},
        {"test": "(outside a test)",
         "message": "ERR unknown command 'config', with args beginning with: 'get' 'x'"},
    ])}
    rows = suite.failure_causes(weft, redis)
    lost = {name: tests_lost for name, _, tests_lost, _ in rows}
    assert lost == {"unknown command CONFIG GET": 5, "unknown command SORT": 1}
    assert sum(lost.values()) == 10 - 4
