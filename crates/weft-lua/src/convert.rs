//! Replies into Lua values and Lua values into replies, exactly as Redis 7.0 converts them
//! (`redisProtocolToLuaType` and `luaReplyToRedisReply`).
//!
//! A command a script calls answers in RESP, as it would answer a client; that reply is
//! parsed into Lua values: integers become numbers, bulk strings strings, a null bulk or
//! array `false`, a status `{ok=...}`, an error `{err=...}`, and RESP3's types tables
//! (`{map=...}`, `{set=...}`, `{double=...}`, `{big_number=...}`,
//! `{verbatim_string={format=..., string=...}}`) or `nil` and booleans. A script's result
//! goes the other way, written straight into the client's output.

use bytes::BytesMut;
use mlua::{Lua, Table, Value};
use weft_resp::Protocol;

/// How deep replies may nest either way. Redis stops at its Lua stack limit; a script can
/// return a table that contains itself.
pub const DEPTH_MAX: usize = 256;

/// Why a reply could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// The bytes end inside a reply.
    #[error("truncated reply")]
    Truncated,
    /// A type byte or a length that is not RESP.
    #[error("malformed reply")]
    Malformed,
    /// Deeper than [`DEPTH_MAX`].
    #[error("reply nested too deeply")]
    TooDeep,
    /// The interpreter failed (out of memory).
    #[error("lua: {0}")]
    Lua(#[from] mlua::Error),
}

/// Redis' error text from `buffer` (`luaPushErrorBuff`): `-CODE message` keeps its code,
/// anything else gets `ERR`; trailing line breaks go.
#[must_use]
pub fn error_text(buffer: &[u8]) -> Vec<u8> {
    let (code, message): (&[u8], &[u8]) = match buffer.strip_prefix(b"-") {
        Some(rest) => match rest.iter().position(|&b| b == b' ') {
            Some(space) => (&rest[..space], &rest[space + 1..]),
            None => (b"ERR", rest),
        },
        None => (b"ERR", buffer),
    };
    let mut end = message.len();
    while end > 0 && matches!(message[end - 1], b'\r' | b'\n') {
        end -= 1;
    }
    let mut start = 0;
    while start < end && matches!(message[start], b'\r' | b'\n') {
        start += 1;
    }
    let mut text = Vec::with_capacity(code.len() + 1 + end - start);
    text.extend_from_slice(code);
    text.push(b' ');
    text.extend_from_slice(&message[start..end]);
    text
}

/// A Redis error table: `{err=text}`, marked as already counted in the error statistics
/// when it came from a command.
///
/// # Errors
/// Lua's error when the table cannot be made.
pub fn error_table(lua: &Lua, text: &[u8], from_command: bool) -> mlua::Result<Table> {
    let table = lua.create_table_with_capacity(0, 2)?;
    table.raw_set("err", lua.create_string(text)?)?;
    if from_command {
        table.raw_set("ignore_error_stats_update", true)?;
    }
    Ok(table)
}

/// Reads the one reply `bytes` holds into a Lua value.
///
/// # Errors
/// [`ParseError`] when `bytes` is not one whole RESP reply.
pub fn reply_to_lua(lua: &Lua, bytes: &[u8]) -> Result<Value, ParseError> {
    let mut reader = Reader { bytes, at: 0 };
    reader.value(lua, 0)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    /// The line from here to CRLF, without it.
    fn line(&mut self) -> Result<&[u8], ParseError> {
        let rest = self.bytes.get(self.at..).ok_or(ParseError::Truncated)?;
        let end = memchr_crlf(rest).ok_or(ParseError::Truncated)?;
        self.at += end + 2;
        Ok(&rest[..end])
    }

    fn number(&mut self) -> Result<i64, ParseError> {
        let line = self.line()?;
        weft_resp::parse_i64_strict(line).ok_or(ParseError::Malformed)
    }

    fn count(&mut self) -> Result<Option<usize>, ParseError> {
        let n = self.number()?;
        if n < 0 {
            return Ok(None);
        }
        let n = usize::try_from(n).map_err(|_| ParseError::Malformed)?;
        // Every element takes at least three bytes: a count beyond what is left is a lie.
        if n > self.bytes.len().saturating_sub(self.at) / 3 {
            return Err(ParseError::Truncated);
        }
        Ok(Some(n))
    }

    fn blob(&mut self, len: usize) -> Result<&[u8], ParseError> {
        let end = self.at.checked_add(len).ok_or(ParseError::Malformed)?;
        let blob = self.bytes.get(self.at..end).ok_or(ParseError::Truncated)?;
        if self.bytes.get(end..end + 2) != Some(b"\r\n") {
            return Err(ParseError::Truncated);
        }
        self.at = end + 2;
        Ok(blob)
    }

    fn value(&mut self, lua: &Lua, depth: usize) -> Result<Value, ParseError> {
        if depth > DEPTH_MAX {
            return Err(ParseError::TooDeep);
        }
        let kind = *self.bytes.get(self.at).ok_or(ParseError::Truncated)?;
        self.at += 1;
        Ok(match kind {
            b':' => Value::Number(self.number()? as f64),
            b'$' => match self.count_blob()? {
                Some(blob) => Value::String(lua.create_string(blob)?),
                None => Value::Boolean(false),
            },
            b'+' => {
                let line = self.line()?;
                let table = lua.create_table_with_capacity(0, 1)?;
                table.raw_set("ok", lua.create_string(line)?)?;
                Value::Table(table)
            }
            b'-' => {
                let line = self.line()?;
                let mut buffer = Vec::with_capacity(line.len() + 1);
                buffer.push(b'-');
                buffer.extend_from_slice(line);
                Value::Table(error_table(lua, &error_text(&buffer), true)?)
            }
            b'*' => match self.count()? {
                None => Value::Boolean(false),
                Some(n) => {
                    let table = lua.create_table_with_capacity(n, 0)?;
                    for i in 1..=n {
                        let element = self.value(lua, depth + 1)?;
                        table.raw_set(i, element)?;
                    }
                    Value::Table(table)
                }
            },
            b'%' => {
                let n = self.count()?.ok_or(ParseError::Malformed)?;
                let map = lua.create_table_with_capacity(0, n)?;
                for _ in 0..n {
                    let key = self.value(lua, depth + 1)?;
                    let value = self.value(lua, depth + 1)?;
                    if !key.is_nil() {
                        map.raw_set(key, value)?;
                    }
                }
                wrapped(lua, "map", Value::Table(map))?
            }
            b'~' => {
                let n = self.count()?.ok_or(ParseError::Malformed)?;
                let set = lua.create_table_with_capacity(0, n)?;
                for _ in 0..n {
                    let member = self.value(lua, depth + 1)?;
                    if !member.is_nil() {
                        set.raw_set(member, true)?;
                    }
                }
                wrapped(lua, "set", Value::Table(set))?
            }
            b'|' => {
                // Attributes are read and dropped; the reply they describe follows.
                let n = self.count()?.ok_or(ParseError::Malformed)?;
                for _ in 0..n * 2 {
                    self.value(lua, depth + 1)?;
                }
                self.value(lua, depth)?
            }
            b'_' => {
                self.line()?;
                Value::Nil
            }
            b'#' => match self.line()? {
                b"t" => Value::Boolean(true),
                b"f" => Value::Boolean(false),
                _ => return Err(ParseError::Malformed),
            },
            b',' => {
                let line = self.line()?;
                let d = parse_double(line).ok_or(ParseError::Malformed)?;
                wrapped(lua, "double", Value::Number(d))?
            }
            b'(' => {
                let line = self.line()?;
                wrapped(lua, "big_number", Value::String(lua.create_string(line)?))?
            }
            b'=' => {
                let blob = self.count_blob()?.ok_or(ParseError::Malformed)?;
                if blob.len() < 4 || blob[3] != b':' {
                    return Err(ParseError::Malformed);
                }
                let inner = lua.create_table_with_capacity(0, 2)?;
                inner.raw_set("string", lua.create_string(&blob[4..])?)?;
                inner.raw_set("format", lua.create_string(&blob[..3])?)?;
                wrapped(lua, "verbatim_string", Value::Table(inner))?
            }
            _ => return Err(ParseError::Malformed),
        })
    }

    /// A `$`/`=` length and its blob; `None` for a null (`-1`).
    fn count_blob(&mut self) -> Result<Option<&[u8]>, ParseError> {
        let n = self.number()?;
        if n < 0 {
            return Ok(None);
        }
        let len = usize::try_from(n).map_err(|_| ParseError::Malformed)?;
        self.blob(len).map(Some)
    }
}

fn memchr_crlf(bytes: &[u8]) -> Option<usize> {
    let mut from = 0;
    while let Some(offset) = bytes.get(from..)?.iter().position(|&b| b == b'\r') {
        let at = from + offset;
        if bytes.get(at + 1) == Some(&b'\n') {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

fn parse_double(line: &[u8]) -> Option<f64> {
    match line {
        b"inf" => Some(f64::INFINITY),
        b"-inf" => Some(f64::NEG_INFINITY),
        b"nan" => Some(f64::NAN),
        _ => std::str::from_utf8(line).ok()?.parse().ok(),
    }
}

/// `{name=value}`.
fn wrapped(lua: &Lua, name: &str, value: Value) -> mlua::Result<Value> {
    let table = lua.create_table_with_capacity(0, 1)?;
    table.raw_set(name, value)?;
    Ok(Value::Table(table))
}

/// Writes a script's result as the reply to a client speaking `protocol`; `script_resp3`
/// is the protocol the script chose with `redis.setresp` (it decides what `true` and
/// `false` become).
///
/// # Errors
/// Lua's error when reading a table fails (a metamethod cannot run: reads are raw).
pub fn lua_to_reply(
    value: &Value,
    out: &mut BytesMut,
    protocol: Protocol,
    script_resp3: bool,
) -> mlua::Result<()> {
    write_value(value, out, protocol, script_resp3, 0)
}

/// `text` without the line breaks at either end (Redis' `sdstrim(s, "\r\n")`).
fn trim_line_breaks(text: &[u8]) -> &[u8] {
    let start = text
        .iter()
        .position(|b| !matches!(b, b'\r' | b'\n'))
        .unwrap_or(text.len());
    let end = text
        .iter()
        .rposition(|b| !matches!(b, b'\r' | b'\n'))
        .map_or(start, |at| at + 1);
    &text[start..end.max(start)]
}

fn sanitized(text: &[u8]) -> String {
    String::from_utf8_lossy(text)
        .chars()
        .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
        .collect()
}

fn write_value(
    value: &Value,
    out: &mut BytesMut,
    protocol: Protocol,
    script_resp3: bool,
    depth: usize,
) -> mlua::Result<()> {
    use weft_resp as w;
    if depth > DEPTH_MAX {
        w::write_error(out, "ERR reached lua stack limit");
        return Ok(());
    }
    match value {
        Value::String(s) => w::write_bulk(out, &s.as_bytes()),
        Value::Boolean(b) => {
            if script_resp3 {
                w::write_bool(out, *b, protocol);
            } else if *b {
                w::write_integer(out, 1);
            } else {
                w::write_null(out, protocol);
            }
        }
        #[allow(clippy::cast_possible_truncation)]
        Value::Number(n) => w::write_integer(out, *n as i64),
        Value::Integer(n) => w::write_integer(out, *n),
        Value::Table(table) => write_table(table, out, protocol, script_resp3, depth)?,
        _ => w::write_null(out, protocol),
    }
    Ok(())
}

fn write_table(
    table: &Table,
    out: &mut BytesMut,
    protocol: Protocol,
    script_resp3: bool,
    depth: usize,
) -> mlua::Result<()> {
    use weft_resp as w;
    if let Value::String(err) = table.raw_get::<Value>("err")? {
        // Written as is after the `-`, as Redis' `"-%s"` does: an `err` that starts with
        // `-` itself gives `--...` on the wire.
        let bytes = err.as_bytes();
        let text = sanitized(trim_line_breaks(&bytes));
        out.extend_from_slice(b"-");
        out.extend_from_slice(text.as_bytes());
        out.extend_from_slice(b"\r\n");
        return Ok(());
    }
    if let Value::String(ok) = table.raw_get::<Value>("ok")? {
        w::write_simple(out, &sanitized(&ok.as_bytes()));
        return Ok(());
    }
    // mlua hands integral Lua numbers over as integers.
    match table.raw_get::<Value>("double")? {
        Value::Number(d) => {
            w::write_double(out, d, protocol);
            return Ok(());
        }
        #[allow(clippy::cast_precision_loss)]
        Value::Integer(n) => {
            w::write_double(out, n as f64, protocol);
            return Ok(());
        }
        _ => {}
    }
    if let Value::String(digits) = table.raw_get::<Value>("big_number")? {
        w::write_big_number(out, &sanitized(&digits.as_bytes()), protocol);
        return Ok(());
    }
    if let Value::Table(verbatim) = table.raw_get::<Value>("verbatim_string")?
        && let Value::String(format) = verbatim.raw_get::<Value>("format")?
        && let Value::String(text) = verbatim.raw_get::<Value>("string")?
    {
        let format = format.as_bytes();
        let mut three = [b' '; 3];
        for (slot, byte) in three.iter_mut().zip(format.iter()) {
            *slot = *byte;
        }
        w::write_verbatim(out, &three, &text.as_bytes(), protocol);
        return Ok(());
    }
    if let Value::Table(map) = table.raw_get::<Value>("map")? {
        let pairs: Vec<(Value, Value)> =
            map.pairs::<Value, Value>().collect::<mlua::Result<_>>()?;
        w::write_map_len(out, pairs.len(), protocol);
        for (key, value) in &pairs {
            write_value(key, out, protocol, script_resp3, depth + 1)?;
            write_value(value, out, protocol, script_resp3, depth + 1)?;
        }
        return Ok(());
    }
    if let Value::Table(set) = table.raw_get::<Value>("set")? {
        let members: Vec<Value> = set
            .pairs::<Value, Value>()
            .map(|pair| pair.map(|(key, _)| key))
            .collect::<mlua::Result<_>>()?;
        w::write_set_len(out, members.len(), protocol);
        for member in &members {
            write_value(member, out, protocol, script_resp3, depth + 1)?;
        }
        return Ok(());
    }
    // An array: elements 1, 2, ... up to the first nil.
    let mut elements = Vec::new();
    loop {
        let element: Value = table.raw_get(elements.len() + 1)?;
        if element.is_nil() {
            break;
        }
        elements.push(element);
    }
    w::write_array_len(out, elements.len());
    for element in &elements {
        write_value(element, out, protocol, script_resp3, depth + 1)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves Redis' error texts: a code kept, ERR added, line breaks trimmed.
    #[test]
    fn error_texts() {
        assert_eq!(error_text(b"-WRONGTYPE bad\r\n"), b"WRONGTYPE bad");
        assert_eq!(error_text(b"-oops"), b"ERR oops");
        assert_eq!(error_text(b"plain words"), b"ERR plain words");
        assert_eq!(error_text(b"-My Error"), b"My Error");
    }

    // Proves every RESP type becomes the Lua value Redis makes of it, and back.
    #[test]
    fn round_trips() {
        let lua = Lua::new();
        let cases: &[(&[u8], &[u8])] = &[
            (b":42\r\n", b":42\r\n"),
            (b"$3\r\nabc\r\n", b"$3\r\nabc\r\n"),
            (b"$-1\r\n", b"$-1\r\n"),
            (b"*-1\r\n", b"$-1\r\n"),
            (b"+OK\r\n", b"+OK\r\n"),
            (b"-ERR bad thing\r\n", b"-ERR bad thing\r\n"),
            (b"*2\r\n:1\r\n$1\r\nx\r\n", b"*2\r\n:1\r\n$1\r\nx\r\n"),
            (b"_\r\n", b"$-1\r\n"),
            (b"#t\r\n", b":1\r\n"),
        ];
        for (input, expected) in cases {
            let value = reply_to_lua(&lua, input).expect("parses");
            let mut out = BytesMut::new();
            lua_to_reply(&value, &mut out, Protocol::Resp2, false).expect("writes");
            assert_eq!(&out[..], *expected, "{}", String::from_utf8_lossy(input));
        }
    }

    // Proves a truncated or malformed reply is an error, never a panic.
    #[test]
    fn malformed_replies_are_errors() {
        let lua = Lua::new();
        for input in [
            &b""[..],
            b"*3\r\n:1\r\n",
            b"$10\r\nabc\r\n",
            b"?x\r\n",
            b":notanumber\r\n",
            b"*99999999999\r\n",
            b"=3\r\nabc\r\n",
        ] {
            assert!(reply_to_lua(&lua, input).is_err());
        }
    }

    // Proves a table that contains itself ends in Redis' stack-limit error.
    #[test]
    fn recursive_tables_end() {
        let lua = Lua::new();
        let value: Value = lua
            .load("local a = {}; local b = {a}; a[1] = b; return a")
            .eval()
            .expect("runs");
        let mut out = BytesMut::new();
        lua_to_reply(&value, &mut out, Protocol::Resp2, false).expect("writes");
        assert!(out.ends_with(b"-ERR reached lua stack limit\r\n"));
    }
}
