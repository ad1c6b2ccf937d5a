//! `bit`: LuaBitOp 1.0.2, bitwise operations on 32-bit integers for Lua 5.1.
//!
//! Every argument is normalised the way LuaBitOp does it on a double-number Lua: the
//! number plus 2^52 + 2^51, whose low 32 mantissa bits are the integer rounded to nearest
//! and wrapped modulo 2^32. Results are those 32 bits read as a signed integer.

use mlua::{Lua, Table, Value};

use super::{FunctionFactory, LibError, LibResult, lua_type_name, to_number};

/// 2^52 + 2^51: added to a double, it leaves the number's integer part, rounded to
/// nearest and modulo 2^32, in the low 32 bits of the representation.
const NORMALISING_ADDEND: f64 = 6_755_399_441_055_744.0;

/// Opens `bit` as a global table.
///
/// # Errors
/// Lua's error when a table or function cannot be created (out of memory).
pub fn open(lua: &Lua) -> mlua::Result<()> {
    let factory = FunctionFactory::new(lua)?;
    let table = lua.create_table()?;
    set_unary(lua, &factory, &table, "tobit", |bits| bits)?;
    set_unary(lua, &factory, &table, "bnot", |bits| !bits)?;
    set_unary(lua, &factory, &table, "bswap", u32::swap_bytes)?;
    set_fold(lua, &factory, &table, "band", |left, right| left & right)?;
    set_fold(lua, &factory, &table, "bor", |left, right| left | right)?;
    set_fold(lua, &factory, &table, "bxor", |left, right| left ^ right)?;
    set_shift(lua, &factory, &table, "lshift", |bits, count| bits << count)?;
    set_shift(lua, &factory, &table, "rshift", |bits, count| bits >> count)?;
    set_shift(lua, &factory, &table, "arshift", |bits, count| {
        ((bits as i32) >> count) as u32
    })?;
    set_shift(lua, &factory, &table, "rol", u32::rotate_left)?;
    set_shift(lua, &factory, &table, "ror", u32::rotate_right)?;
    factory.set(lua, &table, "tohex", |lua, arguments| {
        let bits = bit_argument(lua, "tohex", &arguments, 1)?;
        let digit_count = if arguments.len() < 2 {
            8
        } else {
            bit_argument(lua, "tohex", &arguments, 2)? as i32
        };
        Ok(vec![Value::String(
            lua.create_string(to_hex(bits, digit_count))?,
        )])
    })?;
    lua.globals().raw_set("bit", table)
}

fn set_unary(
    lua: &Lua,
    factory: &FunctionFactory,
    table: &Table,
    name: &'static str,
    operation: fn(u32) -> u32,
) -> mlua::Result<()> {
    factory.set(lua, table, name, move |lua, arguments| {
        let bits = bit_argument(lua, name, &arguments, 1)?;
        Ok(vec![result(operation(bits))])
    })
}

fn set_fold(
    lua: &Lua,
    factory: &FunctionFactory,
    table: &Table,
    name: &'static str,
    operation: fn(u32, u32) -> u32,
) -> mlua::Result<()> {
    factory.set(lua, table, name, move |lua, arguments| {
        let mut bits = bit_argument(lua, name, &arguments, 1)?;
        // LuaBitOp folds from the last argument down, so that is the order in which a
        // bad argument is reported.
        for index in (2..=arguments.len()).rev() {
            bits = operation(bits, bit_argument(lua, name, &arguments, index)?);
        }
        Ok(vec![result(bits)])
    })
}

fn set_shift(
    lua: &Lua,
    factory: &FunctionFactory,
    table: &Table,
    name: &'static str,
    operation: fn(u32, u32) -> u32,
) -> mlua::Result<()> {
    factory.set(lua, table, name, move |lua, arguments| {
        let bits = bit_argument(lua, name, &arguments, 1)?;
        let count = bit_argument(lua, name, &arguments, 2)? & 31;
        Ok(vec![result(operation(bits, count))])
    })
}

/// Argument `index` (1-based) as 32 bits; anything Lua cannot read as a number is an error.
fn bit_argument(lua: &Lua, function: &str, arguments: &[Value], index: usize) -> LibResult<u32> {
    let value = arguments.get(index - 1);
    match to_number(lua, value)? {
        Some(number) => Ok(normalise(number)),
        None => Err(LibError::argument(
            function,
            index,
            format!("number expected, got {}", lua_type_name(value)),
        )),
    }
}

fn normalise(number: f64) -> u32 {
    // Truncation to the low 32 bits is the point: they hold the wrapped integer.
    (number + NORMALISING_ADDEND).to_bits() as u32
}

fn result(bits: u32) -> Value {
    Value::Number(f64::from(bits as i32))
}

/// `bit.tohex`: the low `digit_count` hex digits, upper case when `digit_count` is negative.
fn to_hex(bits: u32, digit_count: i32) -> String {
    let upper = digit_count < 0;
    // LuaBitOp caps the width at 8; the negation of i32::MIN stays negative in C and
    // would read past its buffer, so it is capped here too.
    let width = digit_count.unsigned_abs().min(8);
    let text = if upper {
        format!("{bits:08X}")
    } else {
        format!("{bits:08x}")
    };
    text[8 - width as usize..].to_string()
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{error_of, eval, lua_with};
    use super::*;

    #[test]
    fn redis_minimal_bitop_functionality() {
        // Proves the checks Redis' scripting.tcl makes of the bit library pass.
        let lua = lua_with(open);
        eval::<()>(
            &lua,
            "assert(bit.tobit(1) == 1); assert(bit.band(1) == 1);
             assert(bit.bxor(1,2) == 3); assert(bit.bor(1,2,4,8,16,32,64,128) == 255)",
        );
    }

    #[test]
    fn numbers_wrap_modulo_2_pow_32_and_round_to_nearest() {
        // Proves arguments are normalised as LuaBitOp's 2^52+2^51 trick does.
        let lua = lua_with(open);
        eval::<()>(
            &lua,
            "assert(bit.tobit(0xffffffff) == -1)
             assert(bit.tobit(2^32 + 5) == 5)
             assert(bit.tobit(-1) == -1)
             assert(bit.tobit(1.5) == 2 and bit.tobit(2.5) == 2 and bit.tobit(-0.5) == 0)
             assert(bit.tobit('0x10') == 16)
             assert(bit.tobit(0/0) == 0)",
        );
    }

    #[test]
    fn operations_match_luabitop() {
        // Proves each operation against results LuaBitOp documents.
        let lua = lua_with(open);
        eval::<()>(
            &lua,
            "assert(bit.bnot(0) == -1)
             assert(bit.band(0x12345678, 0xff) == 0x78)
             assert(bit.bor(1, 2, 4) == 7)
             assert(bit.bxor(0xa5a5a5a5, 0xf0f0f0f0) == 0x55555555)
             assert(bit.lshift(1, 0) == 1 and bit.lshift(1, 8) == 256 and bit.lshift(1, 40) == 256)
             assert(bit.lshift(1, 31) == -2147483648)
             assert(bit.rshift(256, 8) == 1 and bit.rshift(-256, 8) == 16777215)
             assert(bit.arshift(-256, 8) == -1)
             assert(bit.rol(0x12345678, 12) == 0x45678123)
             assert(bit.ror(0x12345678, 12) == 0x67812345)
             assert(bit.rol(0x12345678, 0) == 0x12345678)
             assert(bit.bswap(0x12345678) == 0x78563412)
             assert(bit.bswap(0x78563412) == 0x12345678)",
        );
    }

    #[test]
    fn tohex_widths_and_case() {
        // Proves tohex's default width, truncation, cap at 8 and upper case for negative n.
        let lua = lua_with(open);
        eval::<()>(
            &lua,
            "assert(bit.tohex(1) == '00000001')
             assert(bit.tohex(-1) == 'ffffffff')
             assert(bit.tohex(0xffffffff) == 'ffffffff')
             assert(bit.tohex(-1, -8) == 'FFFFFFFF')
             assert(bit.tohex(0x21, 4) == '0021')
             assert(bit.tohex(0x87654321, -4) == '4321')
             assert(bit.tohex(0x87654321, 20) == '87654321')
             assert(bit.tohex(1, 0) == '')
             assert(bit.tohex(0xab, -2147483648) == '000000AB')",
        );
    }

    #[test]
    fn non_numbers_are_lua_errors() {
        // Proves bad arguments raise LuaBitOp's string messages, last argument first.
        let lua = lua_with(open);
        assert_eq!(
            error_of(&lua, "bit.band()"),
            "bad argument #1 to 'band' (number expected, got no value)"
        );
        assert_eq!(
            error_of(&lua, "bit.bor(1, 'x', {})"),
            "bad argument #3 to 'bor' (number expected, got table)"
        );
        assert_eq!(
            error_of(&lua, "bit.tohex(1, nil)"),
            "bad argument #2 to 'tohex' (number expected, got nil)"
        );
        assert_eq!(
            error_of(&lua, "bit.lshift(1)"),
            "bad argument #2 to 'lshift' (number expected, got no value)"
        );
    }
}
