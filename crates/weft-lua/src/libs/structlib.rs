//! `struct`: Roberto Ierusalimschy's library for packing and unpacking binary structures
//! (`struct.c` 1.7 with Redis' patches), as built on x86-64 Linux: `long` and `size_t` are
//! 8 bytes, `int` 4, native byte order little endian, maximum alignment 8.
//!
//! Format options: `>` big endian, `<` little endian, `![n]` maximum alignment (default 8),
//! `x` one byte of padding, `b`/`B` signed/unsigned byte, `h`/`H` short, `l`/`L` long,
//! `T` size_t, `i[n]`/`I[n]` integers of n bytes (default 4, at most 32), `f` float,
//! `d` double, `s` zero-terminated string, `c[n]` n characters (n = 0: the whole string
//! when packing, the previous number read when unpacking), and spaces, which are ignored.
//! A NUL byte ends the format, as it ends a C string.
//!
//! Every read is bounds-checked against the data string: truncated data is the error
//! "data string too short", never a read past the end.

use mlua::{Lua, Value};

use super::{
    FunctionFactory, LibError, LibResult, check_number, check_string, f64_to_i64_x86,
    f64_to_u64_x86, opt_integer, results_fit, to_number,
};

/// The widest integer a format may ask for, in bytes (`MAXINTSIZE`).
const INTEGRAL_SIZE_MAX: usize = 32;
/// The alignment `!` sets without a number: that of a double on x86-64.
const ALIGNMENT_DEFAULT: usize = 8;
/// The size of `int`, the default for `i` and `I`.
const INT_SIZE: usize = 4;

/// Opens `struct` as a global table.
///
/// # Errors
/// Lua's error when a table or function cannot be created (out of memory).
pub fn open(lua: &Lua) -> mlua::Result<()> {
    let factory = FunctionFactory::new(lua)?;
    let table = lua.create_table()?;
    factory.set(lua, &table, "pack", pack)?;
    factory.set(lua, &table, "unpack", unpack)?;
    factory.set(lua, &table, "size", size)?;
    lua.globals().raw_set("struct", table)
}

/// The options in force while walking a format.
struct Header {
    little_endian: bool,
    alignment: usize,
}

impl Header {
    fn new() -> Self {
        Header {
            little_endian: cfg!(target_endian = "little"),
            alignment: 1,
        }
    }
}

/// A format string walked byte by byte.
struct Format {
    bytes: Vec<u8>,
    position: usize,
}

impl Format {
    fn new(bytes: &[u8]) -> Self {
        // The C library reads the format as a C string, so a NUL ends it.
        let end = bytes
            .iter()
            .position(|&byte| byte == 0)
            .unwrap_or(bytes.len());
        Format {
            bytes: bytes[..end].to_vec(),
            position: 0,
        }
    }

    fn next_option(&mut self) -> Option<u8> {
        let option = self.bytes.get(self.position).copied()?;
        self.position += 1;
        Some(option)
    }

    /// The decimal number at the cursor, or `default` when there is none.
    fn number(&mut self, default: usize) -> LibResult<usize> {
        let mut digits_seen = false;
        let mut value: i32 = 0;
        while let Some(&byte) = self.bytes.get(self.position) {
            if !byte.is_ascii_digit() {
                break;
            }
            let digit = i32::from(byte - b'0');
            value = value
                .checked_mul(10)
                .and_then(|tens| tens.checked_add(digit))
                .ok_or_else(|| LibError::script("integral size overflow"))?;
            digits_seen = true;
            self.position += 1;
        }
        Ok(if digits_seen { value as usize } else { default })
    }

    /// The size in bytes of `option`, reading its count when it takes one.
    fn option_size(&mut self, option: u8) -> LibResult<usize> {
        Ok(match option {
            b'b' | b'B' | b'x' => 1,
            b'h' | b'H' => 2,
            b'l' | b'L' | b'T' | b'd' => 8,
            b'f' => 4,
            b'c' => self.number(1)?,
            b'i' | b'I' => {
                let size = self.number(INT_SIZE)?;
                if size > INTEGRAL_SIZE_MAX {
                    return Err(LibError::script(format!(
                        "integral size {size} is larger than limit of {INTEGRAL_SIZE_MAX}"
                    )));
                }
                size
            }
            _ => 0,
        })
    }

    /// Applies an option that sets endianness or alignment; anything else is an error.
    fn control(&mut self, function: &str, option: u8, header: &mut Header) -> LibResult<()> {
        match option {
            b' ' => {}
            b'>' => header.little_endian = false,
            b'<' => header.little_endian = true,
            b'!' => {
                let alignment = self.number(ALIGNMENT_DEFAULT)?;
                if !alignment.is_power_of_two() {
                    return Err(LibError::script(format!(
                        "alignment {alignment} is not a power of 2"
                    )));
                }
                header.alignment = alignment;
            }
            _ => {
                let mut reason = b"invalid format option '".to_vec();
                reason.push(option);
                reason.push(b'\'');
                return Err(LibError::argument(function, 1, reason));
            }
        }
        Ok(())
    }
}

/// Padding that puts an item of `size` bytes at `offset` on its alignment (never for `c`).
/// Sizes that are not powers of two give the odd padding the C arithmetic gives.
fn padding(offset: u64, header: &Header, option: u8, size: usize) -> u64 {
    if size == 0 || option == b'c' {
        return 0;
    }
    let size = size.min(header.alignment) as u64;
    let mask = size.wrapping_sub(1);
    size.wrapping_sub(offset & mask) & mask
}

fn is_integer_option(option: u8) -> bool {
    matches!(
        option,
        b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I'
    )
}

/// `struct.pack(format, values...)`.
fn pack(lua: &Lua, arguments: Vec<Value>) -> LibResult<Vec<Value>> {
    let format = check_string(lua, "pack", &arguments, 1)?;
    let mut format = Format::new(&format.as_bytes());
    let mut header = Header::new();
    let mut output = Vec::new();
    let mut argument = 2;
    while let Some(option) = format.next_option() {
        let mut size = format.option_size(option)?;
        let padding = padding(output.len() as u64, &header, option, size);
        output.resize(output.len() + padding as usize, 0);
        match option {
            _ if is_integer_option(option) => {
                let number = check_number(lua, "pack", &arguments, argument)?;
                argument += 1;
                put_integer(&mut output, number, header.little_endian, size);
            }
            b'x' => output.push(0),
            b'f' => {
                let number = check_number(lua, "pack", &arguments, argument)? as f32;
                argument += 1;
                output.extend_from_slice(&if header.little_endian {
                    number.to_le_bytes()
                } else {
                    number.to_be_bytes()
                });
            }
            b'd' => {
                let number = check_number(lua, "pack", &arguments, argument)?;
                argument += 1;
                output.extend_from_slice(&if header.little_endian {
                    number.to_le_bytes()
                } else {
                    number.to_be_bytes()
                });
            }
            b'c' | b's' => {
                let string = check_string(lua, "pack", &arguments, argument)?;
                argument += 1;
                let bytes = string.as_bytes();
                if size == 0 {
                    size = bytes.len();
                }
                match bytes.get(..size) {
                    Some(prefix) => output.extend_from_slice(prefix),
                    // The C library checks after moving to the next argument, so it names
                    // the argument after the short string; scripts see that number.
                    None => return Err(LibError::argument("pack", argument, "string too short")),
                }
                if option == b's' {
                    output.push(0);
                }
            }
            _ => format.control("pack", option, &mut header)?,
        }
    }
    Ok(vec![Value::String(lua.create_string(output)?)])
}

/// Appends `number` as a `size`-byte integer. Bytes beyond the eighth are zero, as the C
/// library shifts a 64-bit unsigned value.
fn put_integer(output: &mut Vec<u8>, number: f64, little_endian: bool, size: usize) {
    let mut value = if number < 0.0 {
        f64_to_i64_x86(number) as u64
    } else {
        f64_to_u64_x86(number)
    };
    let mut bytes = vec![0; size];
    for index in 0..size {
        let slot = if little_endian {
            index
        } else {
            size - 1 - index
        };
        bytes[slot] = (value & 0xff) as u8;
        value >>= 8;
    }
    output.extend_from_slice(&bytes);
}

/// Reads a `bytes.len()`-byte integer; only the last eight bytes read survive the shifts,
/// and the sign mask uses the shift count x86-64 uses, as the C library does.
fn get_integer(bytes: &[u8], little_endian: bool, signed: bool) -> f64 {
    let mut value: u64 = 0;
    let mut take = |byte: &u8| value = (value << 8) | u64::from(*byte);
    if little_endian {
        bytes.iter().rev().for_each(&mut take);
    } else {
        bytes.iter().for_each(&mut take);
    }
    if !signed {
        return value as f64;
    }
    let shift = bytes.len().wrapping_mul(8).wrapping_sub(1) as u32;
    let mask = u64::MAX.wrapping_shl(shift);
    if value & mask != 0 {
        value |= mask;
    }
    value as i64 as f64
}

/// `struct.unpack(format, data [, position])`: the values, then the position after them.
fn unpack(lua: &Lua, arguments: Vec<Value>) -> LibResult<Vec<Value>> {
    let format = check_string(lua, "unpack", &arguments, 1)?;
    let data = check_string(lua, "unpack", &arguments, 2)?;
    let data = data.as_bytes();
    let data_length = data.len() as u64;
    // A negative position becomes a huge unsigned offset, as in C: it passes this check
    // and then fails the bounds check below.
    let start = opt_integer(lua, "unpack", &arguments, 3, 1)? as u64;
    if start == 0 {
        return Err(LibError::argument(
            "unpack",
            3,
            "offset must be 1 or greater",
        ));
    }
    let mut position = start - 1;
    let mut format = Format::new(&format.as_bytes());
    let mut header = Header::new();
    let mut results: Vec<Value> = Vec::new();
    let too_short = || LibError::argument("unpack", 2, "data string too short");
    while let Some(option) = format.next_option() {
        let mut size = format.option_size(option)? as u64;
        position = position.wrapping_add(padding(position, &header, option, size as usize));
        if size > data_length || position > data_length - size {
            return Err(too_short());
        }
        // The C function keeps its arguments and every result on Lua's stack, and checks
        // for room for this item and the final position.
        if !results_fit(arguments.len(), results.len() + 2) {
            return Err(LibError::script("stack overflow (too many results)"));
        }
        // The check above makes every slice below in bounds; `get` keeps that local.
        let item = |size: u64| -> LibResult<&[u8]> {
            data.get(position as usize..(position + size) as usize)
                .ok_or_else(too_short)
        };
        match option {
            _ if is_integer_option(option) => {
                let signed = option.is_ascii_lowercase();
                let number = get_integer(item(size)?, header.little_endian, signed);
                results.push(Value::Number(number));
            }
            b'x' => {}
            b'f' => {
                let bytes: [u8; 4] = item(4)?.try_into().map_err(|_| too_short())?;
                let number = if header.little_endian {
                    f32::from_le_bytes(bytes)
                } else {
                    f32::from_be_bytes(bytes)
                };
                results.push(Value::Number(f64::from(number)));
            }
            b'd' => {
                let bytes: [u8; 8] = item(8)?.try_into().map_err(|_| too_short())?;
                let number = if header.little_endian {
                    f64::from_le_bytes(bytes)
                } else {
                    f64::from_be_bytes(bytes)
                };
                results.push(Value::Number(number));
            }
            b'c' => {
                if size == 0 {
                    let previous = match results.last() {
                        Some(value) => to_number(lua, Some(value))?,
                        None => None,
                    };
                    let Some(previous) = previous else {
                        return Err(LibError::script("format 'c0' needs a previous size"));
                    };
                    size = f64_to_u64_x86(previous);
                    results.pop();
                    if size > data_length || position > data_length - size {
                        return Err(too_short());
                    }
                }
                results.push(Value::String(lua.create_string(item(size)?)?));
            }
            b's' => {
                let rest = item(data_length - position)?;
                let Some(end) = rest.iter().position(|&byte| byte == 0) else {
                    return Err(LibError::script("unfinished string in data"));
                };
                size = end as u64 + 1;
                results.push(Value::String(lua.create_string(&rest[..end])?));
            }
            _ => format.control("unpack", option, &mut header)?,
        }
        position = position.wrapping_add(size);
    }
    results.push(Value::Integer(position.wrapping_add(1) as i64));
    Ok(results)
}

/// `struct.size(format)`: the bytes `pack` would produce, for formats of fixed size.
fn size(lua: &Lua, arguments: Vec<Value>) -> LibResult<Vec<Value>> {
    let format = check_string(lua, "size", &arguments, 1)?;
    let mut format = Format::new(&format.as_bytes());
    let mut header = Header::new();
    let mut position: u64 = 0;
    while let Some(option) = format.next_option() {
        let size = format.option_size(option)?;
        position = position.wrapping_add(padding(position, &header, option, size));
        if option == b's' {
            return Err(LibError::argument(
                "size",
                1,
                "option 's' has no fixed size",
            ));
        }
        if option == b'c' && size == 0 {
            return Err(LibError::argument(
                "size",
                1,
                "option 'c0' has no fixed size",
            ));
        }
        // Letters and digits that are not options are silently sized 0, as in C.
        if !option.is_ascii_alphanumeric() {
            format.control("size", option, &mut header)?;
        }
        position = position.wrapping_add(size as u64);
    }
    Ok(vec![Value::Integer(position as i64)])
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{error_of, eval, lua_with};
    use super::*;

    fn hex(lua: &Lua, expression: &str) -> String {
        eval(
            lua,
            &format!(
                "local s = {expression}
                 return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end))"
            ),
        )
    }

    #[test]
    fn integers_pack_in_both_byte_orders() {
        // Proves integer layouts, sizes and endianness match struct.c on x86-64.
        let lua = lua_with(open);
        assert_eq!(hex(&lua, "struct.pack('>i', 1)"), "00000001");
        assert_eq!(hex(&lua, "struct.pack('<i', 1)"), "01000000");
        assert_eq!(hex(&lua, "struct.pack('i', 1)"), "01000000");
        assert_eq!(hex(&lua, "struct.pack('>h', -2)"), "fffe");
        assert_eq!(
            hex(&lua, "struct.pack('>bBhHlL', 1, 255, 2, 3, 4, 5)"),
            "01ff0002000300000000000000040000000000000005"
        );
        assert_eq!(hex(&lua, "struct.pack('>T', 7)"), "0000000000000007");
        assert_eq!(hex(&lua, "struct.pack('>i3', 0x123456)"), "123456");
        // Beyond eight bytes the shifted-out value is zero, even for negative numbers.
        assert_eq!(hex(&lua, "struct.pack('<i10', -1)"), "ffffffffffffffff0000");
        assert_eq!(hex(&lua, "struct.pack('>i0', 5)"), "");
    }

    #[test]
    fn round_trips_every_option() {
        // Proves unpack reads back what pack wrote, and returns the next position.
        let lua = lua_with(open);
        eval::<()>(
            &lua,
            r#"
            local s = struct.pack('>bBhHlLi2I3fdc3sx', -1, 200, -300, 60000, -5, 7, -2, 70000, 0.5, 0.1, 'abc', 'zero')
            local b, B, h, H, l, L, i2, I3, f, d, c, str, nextpos = struct.unpack('>bBhHlLi2I3fdc3sx', s)
            assert(b == -1 and B == 200 and h == -300 and H == 60000 and l == -5 and L == 7)
            assert(i2 == -2 and I3 == 70000 and f == 0.5 and d == 0.1)
            assert(c == 'abc' and str == 'zero' and nextpos == #s + 1)
            local u = struct.pack('<d', -1.25)
            assert(struct.unpack('<d', u) == -1.25)
            "#,
        );
    }

    #[test]
    fn alignment_pads_to_the_item_size_up_to_the_maximum() {
        // Proves '!' alignment inserts the padding struct.c computes, and size() agrees.
        let lua = lua_with(open);
        assert_eq!(hex(&lua, "struct.pack('!<bi', 1, 2)"), "0100000002000000");
        assert_eq!(
            hex(&lua, "struct.pack('!<bi', 1, 2)").len() / 2,
            eval::<usize>(&lua, "return struct.size('!<bi')")
        );
        assert_eq!(hex(&lua, "struct.pack('!<bd', 1, 0)").len(), 32);
        assert_eq!(hex(&lua, "struct.pack('!2<bd', 1, 0)").len(), 20);
        assert_eq!(eval::<i64>(&lua, "return struct.size('!<bi')"), 8);
        assert_eq!(eval::<i64>(&lua, "return struct.size('bhil')"), 15);
        assert_eq!(eval::<i64>(&lua, "return struct.size('!bhil')"), 16);
        assert_eq!(eval::<i64>(&lua, "return struct.size('c10x')"), 11);
        eval::<()>(
            &lua,
            "local a, b, n = struct.unpack('!<bi', struct.pack('!<bi', 1, 2)); assert(a == 1 and b == 2 and n == 9)",
        );
    }

    #[test]
    fn c0_and_strings() {
        // Proves 'c0' packs the whole string and unpacks with the previous number as length.
        let lua = lua_with(open);
        eval::<()>(
            &lua,
            r#"
            assert(struct.pack('c0', 'hello') == 'hello')
            assert(struct.pack('c2', 'hello') == 'he')
            assert(struct.pack('s', 'hi') == 'hi\0')
            local s = struct.pack('>Ic0', 5, 'hello')
            local str, nextpos = struct.unpack('>Ic0', s)
            assert(str == 'hello' and nextpos == 10)
            local first, second = struct.unpack('c2c3', 'abcde')
            assert(first == 'ab' and second == 'cde')
            assert(struct.unpack('c1', 'xyz', 2) == 'y')
            assert(select(2, struct.unpack('c1', 'xyz', 3)) == 4)
            assert(select('#', struct.unpack('', 'x', 1)) == 1)
            "#,
        );
    }

    #[test]
    fn truncated_data_is_an_error_not_a_read_past_the_end() {
        // Proves every read is bounds-checked against the data string.
        let lua = lua_with(open);
        let too_short = "bad argument #2 to 'unpack' (data string too short)";
        assert_eq!(error_of(&lua, "struct.unpack('i', 'abc')"), too_short);
        assert_eq!(error_of(&lua, "struct.unpack('d', '1234567')"), too_short);
        assert_eq!(error_of(&lua, "struct.unpack('c5', 'abc')"), too_short);
        assert_eq!(error_of(&lua, "struct.unpack('b', 'a', 2)"), too_short);
        assert_eq!(error_of(&lua, "struct.unpack('b', 'a', -1)"), too_short);
        assert_eq!(error_of(&lua, "struct.unpack('bc0', '\\9abc')"), too_short);
        assert_eq!(
            error_of(&lua, "struct.unpack('bc0', '\\255abc')"),
            too_short
        );
        assert_eq!(
            error_of(&lua, "struct.unpack('s', 'abc')"),
            "unfinished string in data"
        );
        assert_eq!(
            error_of(&lua, "struct.unpack('c0', 'abc')"),
            "format 'c0' needs a previous size"
        );
        assert_eq!(
            error_of(&lua, "struct.unpack('b', 'a', 0)"),
            "bad argument #3 to 'unpack' (offset must be 1 or greater)"
        );
    }

    #[test]
    fn format_errors_use_struct_c_messages() {
        // Proves malformed formats and arguments raise struct.c's messages as strings.
        let lua = lua_with(open);
        assert_eq!(
            error_of(&lua, "struct.pack('i33', 1)"),
            "integral size 33 is larger than limit of 32"
        );
        assert_eq!(
            error_of(&lua, "struct.pack('!3i', 1)"),
            "alignment 3 is not a power of 2"
        );
        assert_eq!(
            error_of(&lua, "struct.size('c99999999999')"),
            "integral size overflow"
        );
        assert_eq!(
            error_of(&lua, "struct.pack('y', 1)"),
            "bad argument #1 to 'pack' (invalid format option 'y')"
        );
        assert_eq!(
            error_of(&lua, "struct.pack('i')"),
            "bad argument #2 to 'pack' (number expected, got no value)"
        );
        assert_eq!(
            error_of(&lua, "struct.pack('c5', 'abc')"),
            "bad argument #3 to 'pack' (string too short)"
        );
        assert_eq!(
            error_of(&lua, "struct.size('s')"),
            "bad argument #1 to 'size' (option 's' has no fixed size)"
        );
        assert_eq!(
            error_of(&lua, "struct.size('c0')"),
            "bad argument #1 to 'size' (option 'c0' has no fixed size)"
        );
        assert_eq!(
            error_of(&lua, "struct.unpack({}, 'x')"),
            "bad argument #1 to 'unpack' (string expected, got table)"
        );
        assert_eq!(eval::<i64>(&lua, "return struct.size('i\\0garbage')"), 4);
    }

    #[test]
    fn results_are_bounded_by_the_lua_stack() {
        // Proves a format asking for more results than Lua's stack holds is an error, not a panic.
        let lua = lua_with(open);
        let count: usize = eval(
            &lua,
            "return select('#', struct.unpack(string.rep('b', 7965), string.rep('a', 7965)))",
        );
        assert_eq!(count, 7966);
        for size in [7966, 9000] {
            assert_eq!(
                error_of(
                    &lua,
                    &format!("struct.unpack(string.rep('b', {size}), string.rep('a', {size}))")
                ),
                "stack overflow (too many results)"
            );
        }
    }
}
