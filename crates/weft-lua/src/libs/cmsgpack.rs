//! `cmsgpack`: lua-cmsgpack 0.4.0 as Redis 7.0 vendors it, MessagePack for Lua 5.1.
//!
//! Packing: a table whose keys are exactly 1..n is an array (so `{}` is an empty array),
//! any other table a map; a number that is an integer in the int64 range packs as the
//! smallest integer encoding, any other number as a float when a float holds it exactly,
//! else as a double; tables nested deeper than [`NESTING_MAX`] pack as nil, which is how
//! the library survives circular references; functions, userdata and nil pack as nil.
//!
//! Unpacking reads untrusted bytes: every read is bounds-checked ("Missing bytes in
//! input."), unknown type bytes (bin, ext) are "Bad data format in input.", nesting is
//! walked with an explicit stack, and the values and open containers together are
//! bounded by Lua's C stack exactly where the C library's `luaL_checkstack` stops.

use mlua::{Lua, Table, Value};

use super::{
    FunctionFactory, LUA_C_STACK_SLOTS_MAX, LibError, LibResult, check_integer, check_string,
    f64_to_i32_x86, f64_to_i64_x86, opt_integer, results_fit,
};

/// Tables nested deeper than this pack as nil (`LUACMSGPACK_MAX_NESTING`).
pub const NESTING_MAX: usize = 16;

/// The message of the C library's stack check while unpacking.
const TOO_MANY_VALUES: &str =
    "stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)";

/// Opens `cmsgpack` as a global table.
///
/// # Errors
/// Lua's error when a table or function cannot be created (out of memory).
pub fn open(lua: &Lua) -> mlua::Result<()> {
    let factory = FunctionFactory::new(lua)?;
    let table = lua.create_table()?;
    factory.set(lua, &table, "pack", pack)?;
    factory.set(lua, &table, "unpack", |lua, arguments| {
        let stack_base = arguments.len();
        unpack_full(lua, "unpack", &arguments, stack_base, 0, 0)
    })?;
    factory.set(lua, &table, "unpack_one", |lua, arguments| {
        let offset = opt_integer(lua, "unpack_one", &arguments, 2, 0)?;
        unpack_full(lua, "unpack_one", &arguments, 1, 1, offset)
    })?;
    factory.set(lua, &table, "unpack_limit", |lua, arguments| {
        let limit = check_integer(lua, "unpack_limit", &arguments, 2)?;
        let offset = opt_integer(lua, "unpack_limit", &arguments, 3, 0)?;
        unpack_full(lua, "unpack_limit", &arguments, 1, limit, offset)
    })?;
    table.raw_set("_NAME", "cmsgpack")?;
    table.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    table.raw_set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    table.raw_set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    lua.globals().raw_set("cmsgpack", table)
}

/// `cmsgpack.pack(values...)`: each value packed, concatenated.
fn pack(lua: &Lua, arguments: Vec<Value>) -> LibResult<Vec<Value>> {
    if arguments.is_empty() {
        return Err(LibError::argument(
            "pack",
            0,
            "MessagePack pack needs input.",
        ));
    }
    // The C function needs room for a packed string per argument beside the arguments.
    if arguments.len() * 2 > LUA_C_STACK_SLOTS_MAX {
        return Err(LibError::argument(
            "pack",
            0,
            "Too many arguments for MessagePack pack.",
        ));
    }
    let mut output = Vec::new();
    for value in &arguments {
        encode_value(&mut output, value, 0)?;
    }
    Ok(vec![Value::String(lua.create_string(output)?)])
}

fn encode_value(output: &mut Vec<u8>, value: &Value, level: usize) -> LibResult<()> {
    match value {
        Value::String(string) => encode_bytes(output, &string.as_bytes()),
        Value::Boolean(true) => output.push(0xc3),
        Value::Boolean(false) => output.push(0xc2),
        Value::Integer(integer) => encode_number(output, *integer as f64),
        Value::Number(number) => encode_number(output, *number),
        Value::Table(table) if level < NESTING_MAX => encode_table(output, table, level)?,
        _ => output.push(0xc0),
    }
    Ok(())
}

fn encode_bytes(output: &mut Vec<u8>, bytes: &[u8]) {
    let length = bytes.len();
    if length < 32 {
        output.push(0xa0 | length as u8);
    } else if length <= 0xff {
        output.extend_from_slice(&[0xd9, length as u8]);
    } else if length <= 0xffff {
        output.push(0xda);
        output.extend_from_slice(&(length as u16).to_be_bytes());
    } else {
        // Longer than 4 GiB cannot happen in a Lua string Redis accepts; the header
        // keeps the low 32 bits as the C library does.
        output.push(0xdb);
        output.extend_from_slice(&(length as u32).to_be_bytes());
    }
    output.extend_from_slice(bytes);
}

fn encode_number(output: &mut Vec<u8>, number: f64) {
    let integer = f64_to_i64_x86(number);
    if !number.is_infinite() && integer as f64 == number {
        encode_integer(output, integer);
    } else if f64::from(number as f32) == number {
        output.push(0xca);
        output.extend_from_slice(&(number as f32).to_be_bytes());
    } else {
        output.push(0xcb);
        output.extend_from_slice(&number.to_be_bytes());
    }
}

fn encode_integer(output: &mut Vec<u8>, integer: i64) {
    if integer >= 0 {
        if integer <= 127 {
            output.push(integer as u8);
        } else if integer <= 0xff {
            output.extend_from_slice(&[0xcc, integer as u8]);
        } else if integer <= 0xffff {
            output.push(0xcd);
            output.extend_from_slice(&(integer as u16).to_be_bytes());
        } else if integer <= 0xffff_ffff {
            output.push(0xce);
            output.extend_from_slice(&(integer as u32).to_be_bytes());
        } else {
            output.push(0xcf);
            output.extend_from_slice(&(integer as u64).to_be_bytes());
        }
    } else if integer >= -32 {
        output.push(integer as i8 as u8);
    } else if integer >= -128 {
        output.extend_from_slice(&[0xd0, integer as i8 as u8]);
    } else if integer >= -32768 {
        output.push(0xd1);
        output.extend_from_slice(&(integer as i16).to_be_bytes());
    } else if integer >= -2_147_483_648 {
        output.push(0xd2);
        output.extend_from_slice(&(integer as i32).to_be_bytes());
    } else {
        output.push(0xd3);
        output.extend_from_slice(&integer.to_be_bytes());
    }
}

fn encode_table(output: &mut Vec<u8>, table: &Table, level: usize) -> LibResult<()> {
    if table_is_an_array(table)? {
        let length = table.raw_len();
        encode_container_header(output, length as u64, 0x90, 0xdc);
        for index in 1..=length {
            let value: Value = table.raw_get(index)?;
            encode_value(output, &value, level + 1)?;
        }
    } else {
        // Counting first and encoding on a second walk keeps one key and value alive
        // at a time, however large the table.
        let mut count: u64 = 0;
        for pair in table.pairs::<Value, Value>() {
            pair?;
            count += 1;
        }
        encode_container_header(output, count, 0x80, 0xde);
        for pair in table.pairs::<Value, Value>() {
            let (key, value) = pair?;
            encode_value(output, &key, level + 1)?;
            encode_value(output, &value, level + 1)?;
        }
    }
    Ok(())
}

/// Whether the keys are exactly 1..n: all numbers that are positive `int`s, as many as
/// the largest. The empty table is an array.
fn table_is_an_array(table: &Table) -> LibResult<bool> {
    let mut count: i64 = 0;
    let mut largest: i32 = 0;
    for pair in table.pairs::<Value, Value>() {
        let (key, _) = pair?;
        let number = match key {
            Value::Integer(integer) => integer as f64,
            Value::Number(number) => number,
            _ => return Ok(false),
        };
        if number <= 0.0 || number.is_infinite() || f64::from(f64_to_i32_x86(number)) != number {
            return Ok(false);
        }
        if number > f64::from(largest) {
            largest = f64_to_i32_x86(number);
        }
        count += 1;
    }
    Ok(i64::from(largest) == count)
}

fn encode_container_header(output: &mut Vec<u8>, count: u64, fix_tag: u8, tag16: u8) {
    if count <= 15 {
        output.push(fix_tag | count as u8);
    } else if count <= 0xffff {
        output.push(tag16);
        output.extend_from_slice(&(count as u16).to_be_bytes());
    } else {
        // The 32-bit tag follows the 16-bit one in both families (0xdd, 0xdf).
        output.push(tag16 + 1);
        output.extend_from_slice(&(count as u32).to_be_bytes());
    }
}

/// Why decoding stopped.
enum DecodeError {
    /// The input ends inside a value.
    MissingBytes,
    /// A type byte this library does not decode (bin, ext, 0xc1).
    BadFormat,
    /// More values and open containers than Lua's C stack holds.
    TooManyValues,
    /// Anything else, reported as is.
    Lib(LibError),
}

impl From<LibError> for DecodeError {
    fn from(error: LibError) -> Self {
        DecodeError::Lib(error)
    }
}

impl From<mlua::Error> for DecodeError {
    fn from(error: mlua::Error) -> Self {
        DecodeError::Lib(LibError::Lua(error))
    }
}

/// A bounds-checked read position in the input.
struct Cursor<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Cursor<'a> {
    fn left(&self) -> usize {
        self.bytes.len() - self.position
    }

    /// The next `count` bytes, consumed; `MissingBytes` when fewer are left.
    fn take(&mut self, count: usize) -> Result<&'a [u8], DecodeError> {
        let end = self
            .position
            .checked_add(count)
            .filter(|&end| end <= self.bytes.len())
            .ok_or(DecodeError::MissingBytes)?;
        let taken = &self.bytes[self.position..end];
        self.position = end;
        Ok(taken)
    }

    fn take_array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut array = [0; N];
        array.copy_from_slice(self.take(N)?);
        Ok(array)
    }
}

/// A container being filled.
enum Open {
    Array {
        table: Table,
        remaining: u64,
        next_index: u64,
    },
    Map {
        table: Table,
        remaining: u64,
        key: Option<Value>,
    },
}

/// What one type byte starts.
enum Item {
    Value(Value),
    Array(u64),
    Map(u64),
}

/// Decodes top-level values from the first argument starting at `offset`, at most
/// `limit` (0 and 0: all, without the position result). `stack_base` is how many
/// arguments the C function still has on Lua's stack while decoding (`unpack_one` and
/// `unpack_limit` drop all but the first).
fn unpack_full(
    lua: &Lua,
    function: &str,
    arguments: &[Value],
    stack_base: usize,
    limit: i64,
    offset: i64,
) -> LibResult<Vec<Value>> {
    let data = check_string(lua, function, arguments, 1)?;
    let data = data.as_bytes();
    let length = data.len();
    let decode_all = limit == 0 && offset == 0;
    if offset < 0 || limit < 0 {
        // The C library prints the input length where it means the limit.
        return Err(LibError::script(format!(
            "Invalid request to unpack with offset of {} and limit of {}.",
            offset as i32, length as i32
        )));
    }
    let start = usize::try_from(offset)
        .ok()
        .filter(|&start| start <= length)
        .ok_or_else(|| {
            LibError::script(format!(
                "Start offset {} greater than input length {}.",
                offset as i32, length as i32
            ))
        })?;
    let limit = if decode_all {
        i64::from(i32::MAX)
    } else {
        limit
    };
    let mut cursor = Cursor {
        bytes: &data,
        position: start,
    };
    let mut results = Vec::new();
    let mut count = 0;
    while cursor.left() > 0 && count < limit {
        let value = decode_one(lua, &mut cursor, stack_base + results.len());
        match value {
            Ok(value) => results.push(value),
            Err(DecodeError::MissingBytes) => {
                return Err(LibError::script("Missing bytes in input."));
            }
            Err(DecodeError::BadFormat) => {
                return Err(LibError::script("Bad data format in input."));
            }
            Err(DecodeError::TooManyValues) => return Err(LibError::script(TOO_MANY_VALUES)),
            Err(DecodeError::Lib(error)) => return Err(error),
        }
        count += 1;
    }
    if !decode_all {
        if !results_fit(stack_base, results.len() + 1) {
            return Err(LibError::script(
                "stack overflow (in function mp_unpack_full)",
            ));
        }
        let next = if cursor.left() == 0 {
            -1
        } else {
            cursor.position as i64
        };
        results.insert(0, Value::Integer(next));
    }
    Ok(results)
}

/// Decodes one complete value. `slots_used` counts what is already on the C library's
/// stack; each open array adds two slots (table and index), each open map one, plus one
/// while its pending key waits for its value.
fn decode_one(lua: &Lua, cursor: &mut Cursor<'_>, slots_used: usize) -> Result<Value, DecodeError> {
    let mut open: Vec<Open> = Vec::new();
    let mut nesting_slots = 0;
    loop {
        if cursor.left() == 0 {
            return Err(DecodeError::MissingBytes);
        }
        if !results_fit(slots_used + nesting_slots, 1) {
            return Err(DecodeError::TooManyValues);
        }
        let mut value = match decode_item(lua, cursor)? {
            Item::Value(value) => value,
            Item::Array(0) | Item::Map(0) => Value::Table(lua.create_table()?),
            Item::Array(remaining) => {
                let table = lua.create_table_with_capacity(capacity(remaining, cursor), 0)?;
                open.push(Open::Array {
                    table,
                    remaining,
                    next_index: 1,
                });
                nesting_slots += 2;
                continue;
            }
            Item::Map(remaining) => {
                let table = lua.create_table_with_capacity(0, capacity(remaining, cursor))?;
                open.push(Open::Map {
                    table,
                    remaining,
                    key: None,
                });
                nesting_slots += 1;
                continue;
            }
        };
        // Store the finished value in its container; a container that is now full is
        // itself a finished value for the one around it.
        loop {
            let finished = match open.last_mut() {
                None => return Ok(value),
                Some(Open::Array {
                    table,
                    remaining,
                    next_index,
                }) => {
                    table.raw_set(*next_index, value)?;
                    *next_index += 1;
                    *remaining -= 1;
                    *remaining == 0
                }
                Some(Open::Map {
                    table,
                    remaining,
                    key,
                }) => match key.take() {
                    None => {
                        *key = Some(value);
                        nesting_slots += 1;
                        false
                    }
                    Some(pending) => {
                        nesting_slots -= 1;
                        set_field(table, pending, value)?;
                        *remaining -= 1;
                        *remaining == 0
                    }
                },
            };
            if !finished {
                break;
            }
            value = match open.pop() {
                Some(Open::Array { table, .. }) => {
                    nesting_slots -= 2;
                    Value::Table(table)
                }
                Some(Open::Map { table, .. }) => {
                    nesting_slots -= 1;
                    Value::Table(table)
                }
                // Unreachable: the container that just filled up is still open.
                None => return Err(DecodeError::BadFormat),
            };
        }
    }
}

/// A preallocation hint that untrusted counts cannot inflate: no more entries than
/// bytes left, since each takes at least one.
fn capacity(count: u64, cursor: &Cursor<'_>) -> usize {
    usize::try_from(count)
        .unwrap_or(usize::MAX)
        .min(cursor.left())
}

/// `t[key] = value` as `lua_settable` does it on a plain table, including its errors.
fn set_field(table: &Table, key: Value, value: Value) -> Result<(), DecodeError> {
    match key {
        Value::Nil => Err(LibError::Runtime(b"table index is nil".to_vec()).into()),
        Value::Number(number) if number.is_nan() => {
            Err(LibError::Runtime(b"table index is NaN".to_vec()).into())
        }
        key => Ok(table.raw_set(key, value)?),
    }
}

/// Reads one type byte and, for scalars, the value it introduces.
fn decode_item(lua: &Lua, cursor: &mut Cursor<'_>) -> Result<Item, DecodeError> {
    let [tag] = cursor.take_array::<1>()?;
    let number = |number: f64| Ok(Item::Value(Value::Number(number)));
    match tag {
        0xc0 => Ok(Item::Value(Value::Nil)),
        0xc2 => Ok(Item::Value(Value::Boolean(false))),
        0xc3 => Ok(Item::Value(Value::Boolean(true))),
        0xcc => number(f64::from(cursor.take_array::<1>()?[0])),
        0xcd => number(f64::from(u16::from_be_bytes(cursor.take_array()?))),
        0xce => number(f64::from(u32::from_be_bytes(cursor.take_array()?))),
        // Lua 5.1 receives an unsigned 64-bit value through a signed integer.
        0xcf => number(u64::from_be_bytes(cursor.take_array()?) as i64 as f64),
        0xd0 => number(f64::from(cursor.take_array::<1>()?[0] as i8)),
        0xd1 => number(f64::from(i16::from_be_bytes(cursor.take_array()?))),
        0xd2 => number(f64::from(i32::from_be_bytes(cursor.take_array()?))),
        0xd3 => number(i64::from_be_bytes(cursor.take_array()?) as f64),
        0xca => number(f64::from(f32::from_be_bytes(cursor.take_array()?))),
        0xcb => number(f64::from_be_bytes(cursor.take_array()?)),
        0xd9 => {
            let length = usize::from(cursor.take_array::<1>()?[0]);
            string(lua, cursor.take(length)?)
        }
        0xda => {
            let length = usize::from(u16::from_be_bytes(cursor.take_array()?));
            string(lua, cursor.take(length)?)
        }
        0xdb => {
            let length = u32::from_be_bytes(cursor.take_array()?);
            let length = usize::try_from(length).map_err(|_| DecodeError::MissingBytes)?;
            string(lua, cursor.take(length)?)
        }
        0xdc => Ok(Item::Array(u64::from(u16::from_be_bytes(
            cursor.take_array()?,
        )))),
        0xdd => Ok(Item::Array(u64::from(u32::from_be_bytes(
            cursor.take_array()?,
        )))),
        0xde => Ok(Item::Map(u64::from(u16::from_be_bytes(
            cursor.take_array()?,
        )))),
        0xdf => Ok(Item::Map(u64::from(u32::from_be_bytes(
            cursor.take_array()?,
        )))),
        _ if tag & 0x80 == 0 => number(f64::from(tag)),
        _ if tag & 0xe0 == 0xe0 => number(f64::from(tag as i8)),
        _ if tag & 0xe0 == 0xa0 => string(lua, cursor.take(usize::from(tag & 0x1f))?),
        _ if tag & 0xf0 == 0x90 => Ok(Item::Array(u64::from(tag & 0x0f))),
        _ if tag & 0xf0 == 0x80 => Ok(Item::Map(u64::from(tag & 0x0f))),
        _ => Err(DecodeError::BadFormat),
    }
}

fn string(lua: &Lua, bytes: &[u8]) -> Result<Item, DecodeError> {
    Ok(Item::Value(Value::String(lua.create_string(bytes)?)))
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{error_of, eval, lua_with};
    use super::*;

    const HEX: &str = "local function hex(s)
          return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end))
        end
        local function unhex(h)
          return (h:gsub('..', function(b) return string.char(tonumber(b, 16)) end))
        end\n";

    fn hex_of(lua: &Lua, expression: &str) -> String {
        eval(lua, &format!("{HEX} return hex({expression})"))
    }

    #[test]
    fn redis_pack_double_and_negative_int64() {
        // Proves the two exact encodings Redis' scripting.tcl checks.
        let lua = lua_with(open);
        assert_eq!(hex_of(&lua, "cmsgpack.pack(0.1)"), "cb3fb999999999999a");
        assert_eq!(
            hex_of(&lua, "cmsgpack.pack(-1099511627776)"),
            "d3ffffff0000000000"
        );
    }

    #[test]
    fn redis_pack_unpack_smoke_test() {
        // Proves Redis' smoke test: every size class round-trips, unpack_one and unpack_limit walk a stream.
        let lua = lua_with(open);
        eval::<()>(
            &lua,
            r#"
            local str_lt_32 = string.rep("x", 30)
            local str_lt_255 = string.rep("x", 250)
            local str_lt_65535 = string.rep("x", 65530)
            local str_long = string.rep("x", 100000)
            local array_lt_15 = {1, 2, 3, 4, 5}
            local array_lt_65535 = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}
            local array_big = {}
            for i=1, 100000 do array_big[i] = i end
            local map_lt_15 = {a=1, b=2}
            local map_big = {}
            for i=1, 100000 do map_big[tostring(i)] = i end
            local some_map = {
                s1=str_lt_32, s2=str_lt_255, s3=str_lt_65535, s4=str_long,
                d1=0.1, i1=1, i2=250, i3=65530, i4=100000, i5=2^40, i6=-1, i7=-120,
                i8=-32000, i9=-100000, i10=-3147483648,
                a1=array_lt_15, a2=array_lt_65535, a3=array_big, m1=map_lt_15, m2=map_big,
                b1=false, b2=true, n=nil
            }
            local encoded = cmsgpack.pack(some_map)
            local decoded = cmsgpack.unpack(encoded)
            assert(table.concat(some_map) == table.concat(decoded))
            for k, v in pairs(some_map) do
              if type(v) ~= 'table' then assert(decoded[k] == v, k) end
            end
            assert(#decoded.a3 == 100000 and decoded.a3[99999] == 99999)
            assert(decoded.m2['77'] == 77)
            local offset, decoded_one = cmsgpack.unpack_one(encoded, 0)
            assert(table.concat(some_map) == table.concat(decoded_one))
            assert(offset == -1)

            local encoded_multiple = cmsgpack.pack(str_lt_32, str_lt_255, str_lt_65535, str_long)
            local offset, obj = cmsgpack.unpack_limit(encoded_multiple, 1, 0)
            assert(obj == str_lt_32)
            offset, obj = cmsgpack.unpack_limit(encoded_multiple, 1, offset)
            assert(obj == str_lt_255)
            offset, obj = cmsgpack.unpack_limit(encoded_multiple, 1, offset)
            assert(obj == str_lt_65535)
            offset, obj = cmsgpack.unpack_limit(encoded_multiple, 1, offset)
            assert(obj == str_long)
            assert(offset == -1)
            "#,
        );
    }

    #[test]
    fn redis_circular_references_pack_to_depth_16() {
        // Proves Redis' circular-reference test: the exact bytes and nil beyond depth 16.
        let lua = lua_with(open);
        let (encoded, deep_ok): (String, bool) = eval(
            &lua,
            &format!(
                "{HEX}
                local a = {{x=nil,y=5}}
                local b = {{x=a}}
                a['x'] = b
                local encoded = cmsgpack.pack(a)
                local re = cmsgpack.unpack(encoded)
                assert(re.x.x.y == re.y)
                assert(re.x.x.x.x.x.x.x.x.x.x.x.x.x.x.y == re.y)
                assert(re.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x)
                assert(re.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x == nil)
                return hex(encoded), re.x.x.x.x.x.x.x.x.y == re.y and re.y == 5"
            ),
        );
        assert_eq!(
            encoded,
            "82a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a178c0"
        );
        assert!(deep_ok);
    }

    #[test]
    fn integers_use_the_smallest_encoding() {
        // Proves each integer size class and the float/double choice.
        let lua = lua_with(open);
        let cases = [
            ("0", "00"),
            ("127", "7f"),
            ("128", "cc80"),
            ("255", "ccff"),
            ("256", "cd0100"),
            ("65536", "ce00010000"),
            ("2^32", "cf0000000100000000"),
            ("-1", "ff"),
            ("-32", "e0"),
            ("-33", "d0df"),
            ("-129", "d1ff7f"),
            ("-32769", "d2ffff7fff"),
            ("-2^31 - 1", "d3ffffffff7fffffff"),
            ("0.5", "ca3f000000"),
            ("1/0", "ca7f800000"),
            ("2^63", "ca5f000000"),
            ("-0.0", "00"),
            ("true", "c3"),
            ("false", "c2"),
            ("nil", "c0"),
            ("print", "c0"),
            ("{}", "90"),
            ("{1, 2}", "920102"),
            ("{[2] = 1}", "810201"),
            ("'abc'", "a3616263"),
        ];
        for (lua_value, expected) in cases {
            assert_eq!(
                hex_of(&lua, &format!("cmsgpack.pack({lua_value})")),
                expected,
                "{lua_value}"
            );
        }
        let nan: String = hex_of(&lua, "cmsgpack.pack(0/0)");
        assert!(nan.starts_with("cb"), "{nan}");
        assert_eq!(hex_of(&lua, "cmsgpack.pack(1, 'a', true)"), "01a161c3");
    }

    #[test]
    fn unpacks_every_type_byte() {
        // Proves the decoder's reading of each MessagePack type it supports.
        let lua = lua_with(open);
        eval::<()>(
            &lua,
            &format!(
                "{HEX}
                local function one(h) return cmsgpack.unpack(unhex(h)) end
                assert(one('cc80') == 128 and one('cdffff') == 65535 and one('ceffffffff') == 4294967295)
                assert(one('cfffffffffffffffff') == -1)
                assert(one('d080') == -128 and one('d18000') == -32768 and one('d280000000') == -2147483648)
                assert(one('d3ffffff0000000000') == -1099511627776)
                assert(one('ca3f000000') == 0.5 and one('cb3fb999999999999a') == 0.1)
                assert(one('d903616263') == 'abc' and one('da0003616263') == 'abc' and one('db00000003616263') == 'abc')
                assert(one('c0') == nil and one('c3') == true and one('c2') == false)
                assert(one('ff') == -1 and one('7f') == 127)
                local t = one('dc000201c0')
                assert(t[1] == 1 and t[2] == nil)
                local m = one('de0001a1610a')
                assert(m.a == 10)
                local m2 = one('df00000001a16101')
                assert(m2.a == 1)
                local a, b, c = cmsgpack.unpack(unhex('01a162c3'))
                assert(a == 1 and b == 'b' and c == true)
                assert(select('#', cmsgpack.unpack('')) == 0)
                local offset, v = cmsgpack.unpack_one(unhex('0102'), 1)
                assert(offset == -1 and v == 2)
                local offset2, x, y = cmsgpack.unpack_limit(unhex('010203'), 2)
                assert(offset2 == 2 and x == 1 and y == 2)
                assert(cmsgpack.unpack_one(unhex('01'), 1) == -1)
                "
            ),
        );
    }

    #[test]
    fn truncated_and_malformed_input_are_lua_errors() {
        // Proves untrusted bytes never read past the buffer and give the C library's messages.
        let lua = lua_with(open);
        for truncated in [
            "cc",
            "cd01",
            "ce010203",
            "cf01",
            "d3",
            "ca0000",
            "cb00",
            "d905",
            "da0005",
            "db00000005",
            "dc0001",
            "dd00000001",
            "de0001",
            "de0001c0",
            "df00000001",
            "a3",
            "91",
            "81",
            "8101",
            "dbffffffff",
            "ddffffffff",
            "9f9f9f",
        ] {
            assert_eq!(
                error_of(
                    &lua,
                    &format!("{HEX} cmsgpack.unpack(unhex('{truncated}'))")
                ),
                "Missing bytes in input.",
                "{truncated}"
            );
        }
        for malformed in ["c1", "c4", "c7", "d4", "d8", "91c1"] {
            assert_eq!(
                error_of(
                    &lua,
                    &format!("{HEX} cmsgpack.unpack(unhex('{malformed}'))")
                ),
                "Bad data format in input.",
                "{malformed}"
            );
        }
        assert_eq!(
            error_of(&lua, &format!("{HEX} cmsgpack.unpack(unhex('81c001'))")),
            "table index is nil"
        );
        assert_eq!(
            error_of(
                &lua,
                &format!("{HEX} cmsgpack.unpack(unhex('81cbfff8000000000000' .. '01'))")
            ),
            "table index is NaN"
        );
    }

    #[test]
    fn argument_errors() {
        // Proves the library's argument checks and their (quirky) messages.
        let lua = lua_with(open);
        assert_eq!(
            error_of(&lua, "cmsgpack.pack()"),
            "bad argument #0 to 'pack' (MessagePack pack needs input.)"
        );
        assert_eq!(
            error_of(&lua, "cmsgpack.unpack()"),
            "bad argument #1 to 'unpack' (string expected, got no value)"
        );
        assert_eq!(
            error_of(&lua, "cmsgpack.unpack_one('abc', -1)"),
            "Invalid request to unpack with offset of -1 and limit of 3."
        );
        assert_eq!(
            error_of(&lua, "cmsgpack.unpack_one('abc', 4)"),
            "Start offset 4 greater than input length 3."
        );
        assert_eq!(
            error_of(&lua, "cmsgpack.unpack_limit('abc')"),
            "bad argument #2 to 'unpack_limit' (number expected, got no value)"
        );
        assert_eq!(
            error_of(&lua, "cmsgpack.unpack_limit('abc', -1)"),
            "Invalid request to unpack with offset of 0 and limit of 3."
        );
        assert_eq!(
            error_of(
                &lua,
                "local t = {} for i = 1, 4001 do t[i] = i end cmsgpack.pack(unpack(t))"
            ),
            "bad argument #0 to 'pack' (Too many arguments for MessagePack pack.)"
        );
    }

    #[test]
    fn deep_nesting_and_many_values_stop_at_the_lua_stack() {
        // Proves hostile nesting or value counts are a Lua error, not a stack overflow or panic.
        let lua = lua_with(open);
        let message = error_of(
            &lua,
            "cmsgpack.unpack(string.rep('\\145', 100000) .. '\\1')",
        );
        assert_eq!(message, TOO_MANY_VALUES);
        let message = error_of(
            &lua,
            "cmsgpack.unpack(string.rep('\\129\\1', 100000) .. '\\1')",
        );
        assert_eq!(message, TOO_MANY_VALUES);
        let message = error_of(&lua, "cmsgpack.unpack(string.rep('\\1', 100000))");
        assert_eq!(message, TOO_MANY_VALUES);
        // Moderate nesting decodes.
        let depth: i64 = eval(
            &lua,
            "local t = cmsgpack.unpack(string.rep('\\145', 3000) .. '\\1')
             local depth = 0
             while type(t) == 'table' do t = t[1]; depth = depth + 1 end
             return depth",
        );
        assert_eq!(depth, 3000);
        let count: i64 = eval(
            &lua,
            "return select('#', cmsgpack.unpack(string.rep('\\1', 7000)))",
        );
        assert_eq!(count, 7000);
    }

    #[test]
    fn metadata_fields() {
        // Proves the module's metadata as lua-cmsgpack sets it.
        let lua = lua_with(open);
        let version: String = eval(&lua, "return cmsgpack._VERSION .. '|' .. cmsgpack._NAME");
        assert_eq!(version, "lua-cmsgpack 0.4.0|cmsgpack");
    }
}
