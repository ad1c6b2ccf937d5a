//! `cjson`: lua-cjson 2.1.0 as Redis 7.0 vendors it, JSON for Lua 5.1.
//!
//! Encoding: a table whose keys are all positive integers is an array (holes become
//! `null`) unless it is excessively sparse; any other table, and the empty table, is an
//! object; numbers print as `%.14g` (precision configurable); `/` is escaped as `\/`;
//! `cjson.null` (a NULL lightuserdata) and nil encode as `null`; NaN and infinity are an
//! error unless `encode_invalid_numbers` allows them.
//!
//! Decoding reads untrusted text: the input is read as a C string (a NUL byte ends it),
//! numbers are parsed as `strtod` parses them (so hexadecimal, `inf` and `nan` pass when
//! `decode_invalid_numbers` is on, the default), `null` decodes to `cjson.null`, nesting
//! deeper than `decode_max_depth` (1000) is an error, and nothing recurses: both
//! directions walk nesting with explicit stacks, bounded by the depth settings and by Lua's
//! C stack where the C library's `lua_checkstack` stops.

use std::sync::{Arc, Mutex, PoisonError};

use mlua::{Function, Lua, Table, Value};

use super::{
    FunctionFactory, LibError, LibResult, check_integer, check_string, f64_to_i32_x86,
    lua_type_name, results_fit,
};

/// Nesting allowed by default in both directions (`DEFAULT_ENCODE_MAX_DEPTH`,
/// `DEFAULT_DECODE_MAX_DEPTH`).
pub const DEPTH_MAX_DEFAULT: i32 = 1000;
/// Significant digits of encoded numbers by default, and at most.
pub const NUMBER_PRECISION_DEFAULT: i32 = 14;
/// An array whose largest index is more than this many times its element count is
/// "excessively sparse" by default...
pub const SPARSE_RATIO_DEFAULT: i32 = 2;
/// ...unless its largest index is at most this.
pub const SPARSE_SAFE_DEFAULT: i32 = 10;

/// The configuration functions change; one per module table (`cjson.new()` makes another).
#[derive(Debug, Clone, Copy)]
struct Settings {
    sparse_convert: bool,
    sparse_ratio: i32,
    sparse_safe: i32,
    encode_max_depth: i32,
    decode_max_depth: i32,
    /// 0: NaN and infinity are errors; 1: encoded as `nan`, `inf`; 2: encoded as `null`.
    encode_invalid_numbers: i32,
    decode_invalid_numbers: bool,
    encode_keep_buffer: bool,
    encode_number_precision: i32,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            sparse_convert: false,
            sparse_ratio: SPARSE_RATIO_DEFAULT,
            sparse_safe: SPARSE_SAFE_DEFAULT,
            encode_max_depth: DEPTH_MAX_DEFAULT,
            decode_max_depth: DEPTH_MAX_DEFAULT,
            encode_invalid_numbers: 0,
            decode_invalid_numbers: true,
            encode_keep_buffer: true,
            encode_number_precision: NUMBER_PRECISION_DEFAULT,
        }
    }
}

type SharedSettings = Arc<Mutex<Settings>>;

fn read(settings: &SharedSettings) -> Settings {
    // The lock is never held across code that can panic, so poisoning cannot happen;
    // should it, the settings themselves are still valid.
    *settings.lock().unwrap_or_else(PoisonError::into_inner)
}

fn update(settings: &SharedSettings, change: impl FnOnce(&mut Settings)) -> Settings {
    let mut guard = settings.lock().unwrap_or_else(PoisonError::into_inner);
    change(&mut guard);
    *guard
}

/// Opens `cjson` as a global table.
///
/// # Errors
/// Lua's error when a table or function cannot be created (out of memory).
pub fn open(lua: &Lua) -> mlua::Result<()> {
    let tools = Tools {
        factory: FunctionFactory::new(lua)?,
        next: lua.globals().raw_get::<Function>("next")?,
    };
    let module = new_module(lua, &tools)?;
    lua.globals().raw_set("cjson", module)
}

/// What building a module needs: the trampoline factory and Lua's `next` (the encoder
/// walks objects one key at a time with it, so nesting needs no recursion).
#[derive(Clone)]
struct Tools {
    factory: FunctionFactory,
    next: Function,
}

fn new_module(lua: &Lua, tools: &Tools) -> mlua::Result<Table> {
    let settings: SharedSettings = Arc::default();
    let table = lua.create_table()?;
    let factory = &tools.factory;

    let shared = settings.clone();
    let next = tools.next.clone();
    factory.set(lua, &table, "encode", move |lua, arguments| {
        if arguments.len() != 1 {
            return Err(LibError::argument("encode", 1, "expected 1 argument"));
        }
        let encoded = Encoder::new(&next, read(&shared)).encode(&arguments[0])?;
        Ok(vec![Value::String(lua.create_string(encoded)?)])
    })?;

    let shared = settings.clone();
    factory.set(lua, &table, "decode", move |lua, arguments| {
        if arguments.len() != 1 {
            return Err(LibError::argument("decode", 1, "expected 1 argument"));
        }
        let text = check_string(lua, "decode", &arguments, 1)?;
        Ok(vec![decode(lua, &text.as_bytes(), read(&shared))?])
    })?;

    let shared = settings.clone();
    factory.set(lua, &table, "encode_sparse_array", move |lua, arguments| {
        const NAME: &str = "encode_sparse_array";
        check_argument_count(NAME, &arguments, 3)?;
        let mut current = read(&shared);
        let convert = bool_option(lua, NAME, &arguments, 1, current.sparse_convert)?;
        let ratio = integer_option(lua, NAME, &arguments, 2, current.sparse_ratio, 0, i32::MAX)?;
        let safe = integer_option(lua, NAME, &arguments, 3, current.sparse_safe, 0, i32::MAX)?;
        current = update(&shared, |settings| {
            settings.sparse_convert = convert;
            settings.sparse_ratio = ratio;
            settings.sparse_safe = safe;
        });
        Ok(vec![
            Value::Boolean(current.sparse_convert),
            Value::Integer(i64::from(current.sparse_ratio)),
            Value::Integer(i64::from(current.sparse_safe)),
        ])
    })?;

    set_integer_setting(
        lua,
        factory,
        &table,
        &settings,
        "encode_max_depth",
        1,
        i32::MAX,
        |s| &mut s.encode_max_depth,
    )?;
    set_integer_setting(
        lua,
        factory,
        &table,
        &settings,
        "decode_max_depth",
        1,
        i32::MAX,
        |s| &mut s.decode_max_depth,
    )?;
    set_integer_setting(
        lua,
        factory,
        &table,
        &settings,
        "encode_number_precision",
        1,
        NUMBER_PRECISION_DEFAULT,
        |s| &mut s.encode_number_precision,
    )?;
    set_bool_setting(lua, factory, &table, &settings, "encode_keep_buffer", |s| {
        &mut s.encode_keep_buffer
    })?;
    set_bool_setting(
        lua,
        factory,
        &table,
        &settings,
        "decode_invalid_numbers",
        |s| &mut s.decode_invalid_numbers,
    )?;

    let shared = settings.clone();
    factory.set(
        lua,
        &table,
        "encode_invalid_numbers",
        move |lua, arguments| {
            const NAME: &str = "encode_invalid_numbers";
            const OPTIONS: [&str; 3] = ["off", "on", "null"];
            check_argument_count(NAME, &arguments, 1)?;
            let mut mode = read(&shared).encode_invalid_numbers;
            match arguments.first() {
                None | Some(Value::Nil) => {}
                Some(Value::Boolean(enabled)) => mode = i32::from(*enabled),
                Some(_) => mode = named_option(lua, NAME, &arguments, 1, &OPTIONS)? as i32,
            }
            update(&shared, |settings| settings.encode_invalid_numbers = mode);
            Ok(vec![match mode {
                0 => Value::Boolean(false),
                1 => Value::Boolean(true),
                _ => Value::String(lua.create_string("null")?),
            }])
        },
    )?;

    let constructor = tools.clone();
    factory.set(lua, &table, "new", move |lua, _arguments| {
        Ok(vec![Value::Table(new_module(lua, &constructor)?)])
    })?;

    table.raw_set("null", Value::NULL)?;
    table.raw_set("_NAME", "cjson")?;
    table.raw_set("_VERSION", "2.1.0")?;
    Ok(table)
}

#[allow(clippy::too_many_arguments)]
fn set_integer_setting(
    lua: &Lua,
    factory: &FunctionFactory,
    table: &Table,
    settings: &SharedSettings,
    name: &'static str,
    minimum: i32,
    maximum: i32,
    field: fn(&mut Settings) -> &mut i32,
) -> mlua::Result<()> {
    let shared = settings.clone();
    factory.set(lua, table, name, move |lua, arguments| {
        check_argument_count(name, &arguments, 1)?;
        let current = *field(&mut read(&shared));
        let value = integer_option(lua, name, &arguments, 1, current, minimum, maximum)?;
        update(&shared, |settings| *field(settings) = value);
        Ok(vec![Value::Integer(i64::from(value))])
    })
}

fn set_bool_setting(
    lua: &Lua,
    factory: &FunctionFactory,
    table: &Table,
    settings: &SharedSettings,
    name: &'static str,
    field: fn(&mut Settings) -> &mut bool,
) -> mlua::Result<()> {
    let shared = settings.clone();
    factory.set(lua, table, name, move |lua, arguments| {
        check_argument_count(name, &arguments, 1)?;
        let current = *field(&mut read(&shared));
        let value = bool_option(lua, name, &arguments, 1, current)?;
        update(&shared, |settings| *field(settings) = value);
        Ok(vec![Value::Boolean(value)])
    })
}

/// The configuration functions' "found too many arguments".
fn check_argument_count(function: &str, arguments: &[Value], maximum: usize) -> LibResult<()> {
    if arguments.len() > maximum {
        return Err(LibError::argument(
            function,
            maximum + 1,
            "found too many arguments",
        ));
    }
    Ok(())
}

/// An integer setting: unchanged when the argument is nil or absent. A value out of range
/// is reported against argument 1 whichever argument it was, as in the C library.
fn integer_option(
    lua: &Lua,
    function: &str,
    arguments: &[Value],
    index: usize,
    current: i32,
    minimum: i32,
    maximum: i32,
) -> LibResult<i32> {
    match arguments.get(index - 1) {
        None | Some(Value::Nil) => Ok(current),
        Some(_) => {
            // The C library stores luaL_checkinteger's result in an int.
            let value = check_integer(lua, function, arguments, index)? as i32;
            if value < minimum || value > maximum {
                return Err(LibError::argument(
                    function,
                    1,
                    format!("expected integer between {minimum} and {maximum}"),
                ));
            }
            Ok(value)
        }
    }
}

/// An on/off setting: a boolean, or the strings "off" and "on".
fn bool_option(
    lua: &Lua,
    function: &str,
    arguments: &[Value],
    index: usize,
    current: bool,
) -> LibResult<bool> {
    match arguments.get(index - 1) {
        None | Some(Value::Nil) => Ok(current),
        Some(Value::Boolean(enabled)) => Ok(*enabled),
        Some(_) => Ok(named_option(lua, function, arguments, index, &["off", "on"])? == 1),
    }
}

/// `luaL_checkoption`: the index of the argument among `options`.
fn named_option(
    lua: &Lua,
    function: &str,
    arguments: &[Value],
    index: usize,
    options: &[&str],
) -> LibResult<usize> {
    let name = check_string(lua, function, arguments, index)?;
    let name = name.as_bytes();
    options
        .iter()
        .position(|option| option.as_bytes() == &name[..])
        .ok_or_else(|| {
            let mut reason = b"invalid option '".to_vec();
            reason.extend_from_slice(&name);
            reason.push(b'\'');
            LibError::argument(function, index, reason)
        })
}

// ===== Encoding =====

/// The escape of each byte that JSON strings cannot hold as is; `None` for bytes copied.
fn escape(byte: u8) -> Option<&'static [u8]> {
    const CONTROL: [&[u8]; 32] = [
        b"\\u0000", b"\\u0001", b"\\u0002", b"\\u0003", b"\\u0004", b"\\u0005", b"\\u0006",
        b"\\u0007", b"\\b", b"\\t", b"\\n", b"\\u000b", b"\\f", b"\\r", b"\\u000e", b"\\u000f",
        b"\\u0010", b"\\u0011", b"\\u0012", b"\\u0013", b"\\u0014", b"\\u0015", b"\\u0016",
        b"\\u0017", b"\\u0018", b"\\u0019", b"\\u001a", b"\\u001b", b"\\u001c", b"\\u001d",
        b"\\u001e", b"\\u001f",
    ];
    match byte {
        0..=0x1f => Some(CONTROL[usize::from(byte)]),
        b'"' => Some(b"\\\""),
        b'/' => Some(b"\\/"),
        b'\\' => Some(b"\\\\"),
        0x7f => Some(b"\\u007f"),
        _ => None,
    }
}

fn append_string(output: &mut Vec<u8>, bytes: &[u8]) {
    output.reserve(bytes.len() + 2);
    output.push(b'"');
    for &byte in bytes {
        match escape(byte) {
            Some(escaped) => output.extend_from_slice(escaped),
            None => output.push(byte),
        }
    }
    output.push(b'"');
}

/// `printf("%.<precision>g", number)` as glibc prints it.
fn format_g(number: f64, precision: usize) -> String {
    if number.is_nan() {
        return if number.is_sign_negative() {
            "-nan"
        } else {
            "nan"
        }
        .to_string();
    }
    if number.is_infinite() {
        return if number < 0.0 { "-inf" } else { "inf" }.to_string();
    }
    if number == 0.0 {
        return if number.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    let precision = precision.max(1);
    let scientific = format!("{:.*e}", precision - 1, number);
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if exponent < -4 || exponent >= precision as i32 {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!(
            "{}e{sign}{:02}",
            strip_fraction_zeros(mantissa),
            exponent.unsigned_abs()
        )
    } else {
        let decimals = (precision as i32 - 1 - exponent).max(0) as usize;
        strip_fraction_zeros(&format!("{number:.decimals$}")).to_string()
    }
}

fn strip_fraction_zeros(text: &str) -> &str {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        text
    }
}

/// A table being written.
enum EncodeFrame {
    /// Indexes 1..=length, `written` of them so far.
    Array {
        table: Table,
        length: i32,
        written: i32,
    },
    /// Walked with `next`; `key` is the last key written (nil before the first).
    Object {
        table: Table,
        key: Value,
        first: bool,
    },
}

struct Encoder<'a> {
    next: &'a Function,
    settings: Settings,
    output: Vec<u8>,
    frames: Vec<EncodeFrame>,
    /// Slots the C encoder would hold on Lua's stack: the argument, one per enclosing
    /// array (the element) and two per enclosing object (key and value).
    stack_slots: usize,
}

impl<'a> Encoder<'a> {
    fn new(next: &'a Function, settings: Settings) -> Self {
        Encoder {
            next,
            settings,
            output: Vec::new(),
            frames: Vec::new(),
            stack_slots: 1,
        }
    }

    fn encode(mut self, value: &Value) -> LibResult<Vec<u8>> {
        self.append_value(value)?;
        while let Some(frame) = self.frames.last_mut() {
            match frame {
                EncodeFrame::Array {
                    table,
                    length,
                    written,
                } => {
                    if *written == *length {
                        self.output.push(b']');
                        self.pop_frame();
                        continue;
                    }
                    if *written > 0 {
                        self.output.push(b',');
                    }
                    *written += 1;
                    let element: Value = table.raw_get(*written)?;
                    self.append_value(&element)?;
                }
                EncodeFrame::Object { table, key, first } => {
                    let (next_key, element): (Value, Value) =
                        self.next.call((table.clone(), key.clone()))?;
                    if next_key.is_nil() {
                        self.output.push(b'}');
                        self.pop_frame();
                        continue;
                    }
                    if !*first {
                        self.output.push(b',');
                    }
                    *first = false;
                    *key = next_key.clone();
                    match &next_key {
                        Value::Integer(_) | Value::Number(_) => {
                            self.output.push(b'"');
                            self.append_number(&next_key)?;
                            self.output.extend_from_slice(b"\":");
                        }
                        Value::String(string) => {
                            append_string(&mut self.output, &string.as_bytes());
                            self.output.push(b':');
                        }
                        other => {
                            return Err(cannot_serialise(
                                other,
                                "table key must be a number or string",
                            ));
                        }
                    }
                    self.append_value(&element)?;
                }
            }
        }
        Ok(self.output)
    }

    fn pop_frame(&mut self) {
        if let Some(frame) = self.frames.pop() {
            self.stack_slots -= match frame {
                EncodeFrame::Array { .. } => 1,
                EncodeFrame::Object { .. } => 2,
            };
        }
    }

    /// Writes a scalar, or opens a table (its elements follow from the main loop).
    fn append_value(&mut self, value: &Value) -> LibResult<()> {
        match value {
            Value::String(string) => append_string(&mut self.output, &string.as_bytes()),
            Value::Integer(_) | Value::Number(_) => self.append_number(value)?,
            Value::Boolean(true) => self.output.extend_from_slice(b"true"),
            Value::Boolean(false) => self.output.extend_from_slice(b"false"),
            Value::Nil => self.output.extend_from_slice(b"null"),
            Value::LightUserData(pointer) if pointer.0.is_null() => {
                self.output.extend_from_slice(b"null")
            }
            Value::Table(table) => self.open_table(table)?,
            other => return Err(cannot_serialise(other, "type not supported")),
        }
        Ok(())
    }

    fn open_table(&mut self, table: &Table) -> LibResult<()> {
        let depth = self.frames.len() + 1;
        let depth_allowed = usize::try_from(self.settings.encode_max_depth).unwrap_or(0);
        if depth > depth_allowed || !results_fit(self.stack_slots, 3) {
            return Err(LibError::script(format!(
                "Cannot serialise, excessive nesting ({depth})"
            )));
        }
        let length = self.array_length(table)?;
        if length > 0 {
            self.output.push(b'[');
            self.frames.push(EncodeFrame::Array {
                table: table.clone(),
                length,
                written: 0,
            });
            self.stack_slots += 1;
        } else {
            self.output.push(b'{');
            self.frames.push(EncodeFrame::Object {
                table: table.clone(),
                key: Value::Nil,
                first: true,
            });
            self.stack_slots += 2;
        }
        Ok(())
    }

    /// The largest index when every key is a positive integer and the array is not
    /// excessively sparse; 0 or less for an object. The largest index is an `int` as in C.
    fn array_length(&self, table: &Table) -> LibResult<i32> {
        let mut largest: i32 = 0;
        let mut count: i64 = 0;
        for pair in table.pairs::<Value, Value>() {
            let (key, _) = pair?;
            let index = match key {
                Value::Integer(integer) => integer as f64,
                Value::Number(number) => number,
                _ => return Ok(-1),
            };
            if index == 0.0 || index.is_nan() || index.floor() != index || index < 1.0 {
                return Ok(-1);
            }
            if index > f64::from(largest) {
                largest = f64_to_i32_x86(index);
            }
            count += 1;
        }
        let ratio = i64::from(self.settings.sparse_ratio);
        if ratio > 0 && i64::from(largest) > count * ratio && largest > self.settings.sparse_safe {
            if !self.settings.sparse_convert {
                return Err(LibError::script(
                    "Cannot serialise table: excessively sparse array",
                ));
            }
            return Ok(-1);
        }
        Ok(largest)
    }

    fn append_number(&mut self, value: &Value) -> LibResult<()> {
        let number = match value {
            Value::Integer(integer) => *integer as f64,
            Value::Number(number) => *number,
            _ => 0.0,
        };
        if !number.is_finite() {
            match self.settings.encode_invalid_numbers {
                0 => return Err(cannot_serialise(value, "must not be NaN or Inf")),
                1 if number.is_nan() => {
                    self.output.extend_from_slice(b"nan");
                    return Ok(());
                }
                1 => {}
                _ => {
                    self.output.extend_from_slice(b"null");
                    return Ok(());
                }
            }
        }
        let precision = usize::try_from(self.settings.encode_number_precision).unwrap_or(1);
        self.output
            .extend_from_slice(format_g(number, precision).as_bytes());
        Ok(())
    }
}

fn cannot_serialise(value: &Value, reason: &str) -> LibError {
    LibError::script(format!(
        "Cannot serialise {}: {reason}",
        lua_type_name(Some(value))
    ))
}

// ===== Decoding =====

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TokenKind {
    ObjectBegin,
    ObjectEnd,
    ArrayBegin,
    ArrayEnd,
    String,
    Number,
    Boolean,
    Null,
    Colon,
    Comma,
    End,
    Error,
}

impl TokenKind {
    fn name(self) -> &'static str {
        match self {
            TokenKind::ObjectBegin => "T_OBJ_BEGIN",
            TokenKind::ObjectEnd => "T_OBJ_END",
            TokenKind::ArrayBegin => "T_ARR_BEGIN",
            TokenKind::ArrayEnd => "T_ARR_END",
            TokenKind::String => "T_STRING",
            TokenKind::Number => "T_NUMBER",
            TokenKind::Boolean => "T_BOOLEAN",
            TokenKind::Null => "T_NULL",
            TokenKind::Colon => "T_COLON",
            TokenKind::Comma => "T_COMMA",
            TokenKind::End => "T_END",
            TokenKind::Error => "T_ERROR",
        }
    }
}

struct Token {
    kind: TokenKind,
    /// 0-based offset of the token (of the problem, for errors).
    index: usize,
    /// The error's description, for `TokenKind::Error`.
    error: &'static str,
    number: f64,
    boolean: bool,
    /// The decoded bytes, for `TokenKind::String`.
    string: Vec<u8>,
}

impl Token {
    fn new(kind: TokenKind, index: usize) -> Self {
        Token {
            kind,
            index,
            error: "",
            number: 0.0,
            boolean: false,
            string: Vec::new(),
        }
    }

    fn error(index: usize, error: &'static str) -> Self {
        Token {
            error,
            ..Token::new(TokenKind::Error, index)
        }
    }
}

/// A JSON text read as a C string: past the end, and at an embedded NUL, it reads 0.
struct Parser<'a> {
    text: &'a [u8],
    position: usize,
    decode_invalid_numbers: bool,
}

impl Parser<'_> {
    fn byte_at(&self, index: usize) -> u8 {
        self.text.get(index).copied().unwrap_or(0)
    }

    fn next_token(&mut self) -> Token {
        while matches!(self.byte_at(self.position), b' ' | b'\t' | b'\n' | b'\r') {
            self.position += 1;
        }
        let index = self.position;
        let byte = self.byte_at(index);
        let single = match byte {
            b'{' => Some(TokenKind::ObjectBegin),
            b'}' => Some(TokenKind::ObjectEnd),
            b'[' => Some(TokenKind::ArrayBegin),
            b']' => Some(TokenKind::ArrayEnd),
            b',' => Some(TokenKind::Comma),
            b':' => Some(TokenKind::Colon),
            0 => return Token::new(TokenKind::End, index),
            _ => None,
        };
        if let Some(kind) = single {
            self.position += 1;
            return Token::new(kind, index);
        }
        match byte {
            b'"' => self.string_token(index),
            b'-' | b'0'..=b'9' => {
                if !self.decode_invalid_numbers && self.is_invalid_number() {
                    return Token::error(index, "invalid number");
                }
                self.number_token(index)
            }
            b'f' | b'i' | b'I' | b'n' | b'N' | b't' | b'+' => {
                if self.starts_with(b"true") {
                    self.position += 4;
                    Token {
                        boolean: true,
                        ..Token::new(TokenKind::Boolean, index)
                    }
                } else if self.starts_with(b"false") {
                    self.position += 5;
                    Token::new(TokenKind::Boolean, index)
                } else if self.starts_with(b"null") {
                    self.position += 4;
                    Token::new(TokenKind::Null, index)
                } else if self.decode_invalid_numbers && self.is_invalid_number() {
                    self.number_token(index)
                } else {
                    Token::error(index, "invalid token")
                }
            }
            _ => Token::error(index, "invalid token"),
        }
    }

    fn starts_with(&self, word: &[u8]) -> bool {
        self.text
            .get(self.position..)
            .is_some_and(|rest| rest.starts_with(word))
    }

    /// Forms `strtod` accepts that strict JSON does not: a leading `+`, leading zeros,
    /// hexadecimal, `inf` and `nan`.
    fn is_invalid_number(&self) -> bool {
        let mut index = self.position;
        match self.byte_at(index) {
            b'+' => return true,
            b'-' => index += 1,
            _ => {}
        }
        let first = self.byte_at(index);
        if first == b'0' {
            let second = self.byte_at(index + 1);
            return second | 0x20 == b'x' || second.is_ascii_digit();
        }
        if first <= b'9' {
            return false;
        }
        let word: Vec<u8> = (0..3)
            .map(|offset| self.byte_at(index + offset).to_ascii_lowercase())
            .collect();
        word == b"inf" || word == b"nan"
    }

    fn number_token(&mut self, index: usize) -> Token {
        match strtod(self.text, self.position) {
            Some((number, end)) => {
                self.position = end;
                Token {
                    number,
                    ..Token::new(TokenKind::Number, index)
                }
            }
            None => Token::error(self.position, "invalid number"),
        }
    }

    fn string_token(&mut self, index: usize) -> Token {
        self.position += 1;
        let mut decoded = Vec::new();
        loop {
            let byte = self.byte_at(self.position);
            match byte {
                b'"' => break,
                0 => return Token::error(self.position, "unexpected end of string"),
                b'\\' => {
                    let replacement = match self.byte_at(self.position + 1) {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => 0x08,
                        b't' => b'\t',
                        b'n' => b'\n',
                        b'f' => 0x0c,
                        b'r' => b'\r',
                        b'u' => {
                            if self.unicode_escape(&mut decoded) {
                                continue;
                            }
                            return Token::error(self.position, "invalid unicode escape code");
                        }
                        _ => return Token::error(self.position, "invalid escape code"),
                    };
                    decoded.push(replacement);
                    self.position += 2;
                }
                _ => {
                    decoded.push(byte);
                    self.position += 1;
                }
            }
        }
        self.position += 1;
        Token {
            string: decoded,
            ..Token::new(TokenKind::String, index)
        }
    }

    /// Decodes `\uXXXX` (or a surrogate pair of them) at the cursor into UTF-8 and moves
    /// past it; false, with the cursor unmoved, when it is malformed.
    fn unicode_escape(&mut self, decoded: &mut Vec<u8>) -> bool {
        let Some(mut code_point) = self.hex4(self.position + 2) else {
            return false;
        };
        let mut escape_length = 6;
        if code_point & 0xf800 == 0xd800 {
            // A low surrogate first, or a high one without its partner, is malformed.
            if code_point & 0x400 != 0 {
                return false;
            }
            if self.byte_at(self.position + 6) != b'\\' || self.byte_at(self.position + 7) != b'u' {
                return false;
            }
            let Some(low) = self.hex4(self.position + 8) else {
                return false;
            };
            if low & 0xfc00 != 0xdc00 {
                return false;
            }
            code_point = (((code_point & 0x3ff) << 10) | (low & 0x3ff)) + 0x10000;
            escape_length = 12;
        }
        let mut buffer = [0; 4];
        match char::from_u32(code_point) {
            Some(character) => {
                decoded.extend_from_slice(character.encode_utf8(&mut buffer).as_bytes())
            }
            // Unpaired surrogates are rejected above, so every code point is a char.
            None => return false,
        }
        self.position += escape_length;
        true
    }

    fn hex4(&self, index: usize) -> Option<u32> {
        (0..4).try_fold(0u32, |value, offset| {
            let digit = char::from(self.byte_at(index + offset)).to_digit(16)?;
            Some((value << 4) | digit)
        })
    }
}

/// The number `strtod` reads at `start` (C locale), and where it stops; `None` when it
/// reads nothing. A NUL byte or the end of `text` ends the number.
fn strtod(text: &[u8], start: usize) -> Option<(f64, usize)> {
    let byte_at = |index: usize| text.get(index).copied().unwrap_or(0);
    let mut index = start;
    while matches!(
        byte_at(index),
        b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r'
    ) {
        index += 1;
    }
    let negative = byte_at(index) == b'-';
    if matches!(byte_at(index), b'+' | b'-') {
        index += 1;
    }
    let sign = if negative { -1.0 } else { 1.0 };
    let lower_at = |index: usize| byte_at(index).to_ascii_lowercase();
    let matches_word = |index: usize, word: &[u8]| {
        word.iter()
            .enumerate()
            .all(|(offset, &expected)| lower_at(index + offset) == expected)
    };
    if matches_word(index, b"inf") {
        let end = if matches_word(index + 3, b"inity") {
            index + 8
        } else {
            index + 3
        };
        return Some((sign * f64::INFINITY, end));
    }
    if matches_word(index, b"nan") {
        let mut end = index + 3;
        if byte_at(end) == b'(' {
            let mut close = end + 1;
            while byte_at(close).is_ascii_alphanumeric() || byte_at(close) == b'_' {
                close += 1;
            }
            if byte_at(close) == b')' {
                end = close + 1;
            }
        }
        return Some((sign * f64::NAN, end));
    }
    if byte_at(index) == b'0' && lower_at(index + 1) == b'x' {
        let digits = index + 2;
        let has_digit = byte_at(digits).is_ascii_hexdigit()
            || (byte_at(digits) == b'.' && byte_at(digits + 1).is_ascii_hexdigit());
        if has_digit {
            let (magnitude, end) = hexadecimal_float(text, digits);
            return Some((sign * magnitude, end));
        }
        // "0x" without digits is the number 0 followed by an "x".
        return Some((sign * 0.0, index + 1));
    }
    let number_start = index;
    let mut digit_count = 0;
    while byte_at(index).is_ascii_digit() {
        index += 1;
        digit_count += 1;
    }
    if byte_at(index) == b'.' {
        index += 1;
        while byte_at(index).is_ascii_digit() {
            index += 1;
            digit_count += 1;
        }
    }
    if digit_count == 0 {
        return None;
    }
    if lower_at(index) == b'e' {
        let mut exponent = index + 1;
        if matches!(byte_at(exponent), b'+' | b'-') {
            exponent += 1;
        }
        if byte_at(exponent).is_ascii_digit() {
            while byte_at(exponent).is_ascii_digit() {
                exponent += 1;
            }
            index = exponent;
        }
    }
    let literal = std::str::from_utf8(&text[number_start..index]).ok()?;
    let magnitude: f64 = literal.parse().ok()?;
    Some((sign * magnitude, index))
}

/// The hexadecimal float whose digits start at `start` (after "0x"): digits, an optional
/// fraction, an optional binary exponent `p[+-]n`.
fn hexadecimal_float(text: &[u8], start: usize) -> (f64, usize) {
    let byte_at = |index: usize| text.get(index).copied().unwrap_or(0);
    let mut index = start;
    let mut mantissa: u64 = 0;
    let mut exponent: i64 = 0;
    let mut sticky = false;
    let mut in_fraction = false;
    loop {
        let byte = byte_at(index);
        if byte == b'.' && !in_fraction {
            in_fraction = true;
            index += 1;
            continue;
        }
        let Some(digit) = char::from(byte).to_digit(16) else {
            break;
        };
        if mantissa >> 60 == 0 {
            mantissa = (mantissa << 4) | u64::from(digit);
            if in_fraction {
                exponent -= 4;
            }
        } else {
            // Digits beyond 60 bits only matter for rounding.
            sticky |= digit != 0;
            if !in_fraction {
                exponent += 4;
            }
        }
        index += 1;
    }
    if byte_at(index) | 0x20 == b'p' {
        let mut cursor = index + 1;
        let negative = byte_at(cursor) == b'-';
        if matches!(byte_at(cursor), b'+' | b'-') {
            cursor += 1;
        }
        if byte_at(cursor).is_ascii_digit() {
            let mut value: i64 = 0;
            while byte_at(cursor).is_ascii_digit() {
                value = (value * 10 + i64::from(byte_at(cursor) - b'0')).min(1 << 20);
                cursor += 1;
            }
            exponent += if negative { -value } else { value };
            index = cursor;
        }
    }
    if sticky {
        mantissa |= 1;
    }
    (scale_by_power_of_two(mantissa as f64, exponent), index)
}

fn scale_by_power_of_two(mut value: f64, mut exponent: i64) -> f64 {
    while exponent > 0 && value.is_finite() && value != 0.0 {
        let step = exponent.min(1000);
        value *= 2f64.powi(step as i32);
        exponent -= step;
    }
    while exponent < 0 && value != 0.0 {
        let step = exponent.max(-1000);
        value *= 2f64.powi(step as i32);
        exponent -= step;
    }
    value
}

/// A table being filled by the decoder.
enum DecodeFrame {
    Array { table: Table, next_index: i64 },
    Object { table: Table, key: mlua::String },
}

fn parse_error(expected: &str, token: &Token) -> LibError {
    let found = if token.kind == TokenKind::Error {
        token.error
    } else {
        token.kind.name()
    };
    LibError::script(format!(
        "Expected {expected} but found {found} at character {}",
        token.index + 1
    ))
}

/// Decodes one JSON text.
fn decode(lua: &Lua, text: &[u8], settings: Settings) -> LibResult<Value> {
    if text.len() >= 2 && (text[0] == 0 || text[1] == 0) {
        return Err(LibError::script(
            "JSON parser does not support UTF-16 or UTF-32",
        ));
    }
    let mut parser = Parser {
        text,
        position: 0,
        decode_invalid_numbers: settings.decode_invalid_numbers,
    };
    let depth_allowed = usize::try_from(settings.decode_max_depth).unwrap_or(0);
    let mut frames: Vec<DecodeFrame> = Vec::new();
    // Slots the C decoder would hold on Lua's stack: the argument, one per enclosing
    // array (the table) and two per enclosing object (the table and the pending key).
    let mut stack_slots = 1;
    let mut token = parser.next_token();
    loop {
        // `token` starts a value.
        let mut value = match token.kind {
            TokenKind::String => Value::String(lua.create_string(&token.string)?),
            TokenKind::Number => Value::Number(token.number),
            TokenKind::Boolean => Value::Boolean(token.boolean),
            TokenKind::Null => Value::NULL,
            TokenKind::ObjectBegin | TokenKind::ArrayBegin => {
                let is_object = token.kind == TokenKind::ObjectBegin;
                let depth = frames.len() + 1;
                let slots_needed = if is_object { 3 } else { 2 };
                if depth > depth_allowed || !results_fit(stack_slots, slots_needed) {
                    return Err(LibError::script(format!(
                        "Found too many nested data structures ({depth}) at character {}",
                        parser.position
                    )));
                }
                let table = lua.create_table()?;
                let close = if is_object {
                    TokenKind::ObjectEnd
                } else {
                    TokenKind::ArrayEnd
                };
                token = parser.next_token();
                if token.kind == close {
                    Value::Table(table)
                } else if is_object {
                    let key = object_key(lua, &mut parser, &token)?;
                    frames.push(DecodeFrame::Object { table, key });
                    stack_slots += 2;
                    token = parser.next_token();
                    continue;
                } else {
                    frames.push(DecodeFrame::Array {
                        table,
                        next_index: 1,
                    });
                    stack_slots += 1;
                    continue;
                }
            }
            _ => return Err(parse_error("value", &token)),
        };
        // Store the finished value; a container closed by the next token is itself a
        // finished value for the one around it.
        loop {
            match frames.last_mut() {
                None => {
                    let end = parser.next_token();
                    if end.kind != TokenKind::End {
                        return Err(parse_error("the end", &end));
                    }
                    return Ok(value);
                }
                Some(DecodeFrame::Array { table, next_index }) => {
                    table.raw_set(*next_index, value)?;
                    *next_index += 1;
                    token = parser.next_token();
                    match token.kind {
                        TokenKind::ArrayEnd => {
                            value = Value::Table(table.clone());
                            frames.pop();
                            stack_slots -= 1;
                        }
                        TokenKind::Comma => {
                            token = parser.next_token();
                            break;
                        }
                        _ => return Err(parse_error("comma or array end", &token)),
                    }
                }
                Some(DecodeFrame::Object { table, key }) => {
                    table.raw_set(key.clone(), value)?;
                    token = parser.next_token();
                    match token.kind {
                        TokenKind::ObjectEnd => {
                            value = Value::Table(table.clone());
                            frames.pop();
                            stack_slots -= 2;
                        }
                        TokenKind::Comma => {
                            token = parser.next_token();
                            *key = object_key(lua, &mut parser, &token)?;
                            token = parser.next_token();
                            break;
                        }
                        _ => return Err(parse_error("comma or object end", &token)),
                    }
                }
            }
        }
    }
}

/// Reads `"key" :` given the key's token; the cursor is left before the value.
fn object_key(lua: &Lua, parser: &mut Parser<'_>, token: &Token) -> LibResult<mlua::String> {
    if token.kind != TokenKind::String {
        return Err(parse_error("object key string", token));
    }
    let key = lua.create_string(&token.string)?;
    let colon = parser.next_token();
    if colon.kind != TokenKind::Colon {
        return Err(parse_error("colon", &colon));
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{error_of, eval, lua_with};
    use super::*;

    #[test]
    fn redis_json_numeric_decoding() {
        // Proves Redis' numeric decoding test.
        let lua = lua_with(open);
        let joined: String = eval(
            &lua,
            r#"return table.concat(cjson.decode("[0.0, -5e3, -1, 0.3e-3, 1023.2, 0e10]"), " ")"#,
        );
        assert_eq!(joined, "0 -5000 -1 0.0003 1023.2 0");
    }

    #[test]
    fn redis_json_string_decoding() {
        // Proves Redis' string decoding test.
        let lua = lua_with(open);
        let (a, b): (String, String) = eval(
            &lua,
            r#"local decoded = cjson.decode('{"keya": "a", "keyb": "b"}')
               return decoded.keya, decoded.keyb"#,
        );
        assert_eq!((a.as_str(), b.as_str()), ("a", "b"));
    }

    #[test]
    fn redis_json_smoke_test() {
        // Proves Redis' JSON smoke test, settings and all.
        let lua = lua_with(open);
        eval::<()>(
            &lua,
            r#"
            local some_map = {
                s1="Some string", n1=100, a1={"Some","String","Array"},
                nil1=nil, b1=true, b2=false}
            local encoded = cjson.encode(some_map)
            local decoded = cjson.decode(encoded)
            assert(table.concat(some_map) == table.concat(decoded))

            cjson.encode_keep_buffer(false)
            encoded = cjson.encode(some_map)
            decoded = cjson.decode(encoded)
            assert(table.concat(some_map) == table.concat(decoded))

            local table1 = {one="one", [1]="one"}
            encoded = cjson.encode(table1)
            decoded = cjson.decode(encoded)
            assert(decoded["one"] == table1["one"])
            assert(decoded["1"] == table1[1])

            local array1 = {[1]="one", [2]="two"}
            encoded = cjson.encode(array1)
            decoded = cjson.decode(encoded)
            assert(table.concat(array1) == table.concat(decoded))

            local invalid_map = {}
            invalid_map[false] = "false"
            local ok, encoded = pcall(cjson.encode, invalid_map)
            assert(ok == false)

            cjson.encode_max_depth(1)
            ok, encoded = pcall(cjson.encode, some_map)
            assert(ok == false)

            cjson.decode_max_depth(1)
            ok, decoded = pcall(cjson.decode, '{"obj": {"array": [1,2,3,4]}}')
            assert(ok == false)

            ok, encoded = pcall(cjson.encode, {num1=0/0})
            assert(ok == false)
            cjson.encode_invalid_numbers(true)
            ok, encoded = pcall(cjson.encode, {num1=0/0})
            assert(ok == true)

            cjson.decode_max_depth(1000)
            cjson.encode_max_depth(1000)
            cjson.encode_invalid_numbers(false)
            "#,
        );
    }

    fn encode(lua: &Lua, expression: &str) -> String {
        eval(lua, &format!("return cjson.encode({expression})"))
    }

    #[test]
    fn encodes_scalars_and_escapes_as_lua_cjson() {
        // Proves number formats, string escapes, null and the empty-table rule.
        let lua = lua_with(open);
        let cases = [
            ("1", "1"),
            ("-1.5", "-1.5"),
            ("0.1", "0.1"),
            ("1/3", "0.33333333333333"),
            ("1e15", "1e+15"),
            ("123456789012345678", "1.2345678901235e+17"),
            ("12345678901234.5", "12345678901234"),
            ("1e-5", "1e-05"),
            ("0.0001", "0.0001"),
            ("-0.0", "-0"),
            ("5e-324", "4.9406564584125e-324"),
            ("true", "true"),
            ("false", "false"),
            ("nil", "null"),
            ("cjson.null", "null"),
            ("{}", "{}"),
            ("{cjson.null}", "[null]"),
            ("{1, 'a', {}}", "[1,\"a\",{}]"),
            ("{[1] = 1, [3] = 3}", "[1,null,3]"),
            ("'a/b\"c\\\\d'", "\"a\\/b\\\"c\\\\d\""),
            (
                "'\\0\\1\\8\\9\\10\\12\\13\\31\\127~'",
                "\"\\u0000\\u0001\\b\\t\\n\\f\\r\\u001f\\u007f~\"",
            ),
            ("{a = {b = {}}}", "{\"a\":{\"b\":{}}}"),
            ("{[1.5] = 1}", "{\"1.5\":1}"),
            ("{[-1] = 1}", "{\"-1\":1}"),
        ];
        for (expression, expected) in cases {
            let encoded: mlua::String = eval(&lua, &format!("return cjson.encode({expression})"));
            assert_eq!(&encoded.as_bytes()[..], expected.as_bytes(), "{expression}");
        }
        // Bytes above 0x7f pass through untouched (no UTF-8 validation, as in lua-cjson).
        let high: mlua::String = eval(&lua, "return cjson.encode('\\128\\255')");
        assert_eq!(&high.as_bytes()[..], b"\"\x80\xff\"");
    }

    #[test]
    fn format_g_matches_glibc() {
        // Proves %.Ng formatting, including ties to even, against glibc's output.
        let cases = [
            (0.1, 14, "0.1"),
            (2.5, 1, "2"),
            (0.125, 1, "0.1"),
            (100.0, 1, "1e+02"),
            (1023.2, 3, "1.02e+03"),
            (1.5e-5, 1, "2e-05"),
            (2.5e-5, 1, "3e-05"),
            (1234567890123.45, 14, "1234567890123.4"),
            (99999999999999.5, 14, "1e+14"),
            (0.000123456789012345, 14, "0.00012345678901234"),
            (1.7976931348623157e308, 14, "1.7976931348623e+308"),
            (1e100, 14, "1e+100"),
            (123.456, 3, "123"),
            (f64::INFINITY, 14, "inf"),
            (f64::NEG_INFINITY, 14, "-inf"),
        ];
        for (number, precision, expected) in cases {
            assert_eq!(
                format_g(number, precision),
                expected,
                "{number} {precision}"
            );
        }
    }

    #[test]
    fn encode_errors_use_lua_cjson_messages() {
        // Proves the encoder's failures and their messages.
        let lua = lua_with(open);
        assert_eq!(
            error_of(&lua, "cjson.encode({[false] = 1})"),
            "Cannot serialise boolean: table key must be a number or string"
        );
        assert_eq!(
            error_of(&lua, "cjson.encode(print)"),
            "Cannot serialise function: type not supported"
        );
        assert_eq!(
            error_of(&lua, "cjson.encode({coroutine.create(function() end)})"),
            "Cannot serialise thread: type not supported"
        );
        assert_eq!(
            error_of(&lua, "cjson.encode(0/0)"),
            "Cannot serialise number: must not be NaN or Inf"
        );
        assert_eq!(
            error_of(&lua, "cjson.encode({[1/0] = 1})"),
            "Cannot serialise number: must not be NaN or Inf"
        );
        assert_eq!(
            error_of(&lua, "cjson.encode({[1] = 1, [100] = 2})"),
            "Cannot serialise table: excessively sparse array"
        );
        assert_eq!(
            error_of(&lua, "cjson.encode()"),
            "bad argument #1 to 'encode' (expected 1 argument)"
        );
        assert_eq!(
            error_of(&lua, "cjson.encode(1, 2)"),
            "bad argument #1 to 'encode' (expected 1 argument)"
        );
    }

    #[test]
    fn sparse_arrays_follow_the_settings() {
        // Proves the sparse-array rule and encode_sparse_array's conversion and ratio.
        let lua = lua_with(open);
        assert_eq!(
            encode(&lua, "{[10] = 1}"),
            "[null,null,null,null,null,null,null,null,null,1]"
        );
        let (convert, ratio, safe): (bool, i64, i64) =
            eval(&lua, "return cjson.encode_sparse_array()");
        assert_eq!((convert, ratio, safe), (false, 2, 10));
        eval::<()>(&lua, "cjson.encode_sparse_array(true)");
        assert_eq!(
            encode(&lua, "{[1] = 1, [100] = 2}").len(),
            "{\"1\":1,\"100\":2}".len()
        );
        eval::<()>(&lua, "cjson.encode_sparse_array(false, 0)");
        assert_eq!(encode(&lua, "{[12] = 1}").matches("null").count(), 11);
        assert_eq!(
            error_of(&lua, "cjson.encode_sparse_array(false, -1)"),
            "bad argument #1 to 'encode_sparse_array' (expected integer between 0 and 2147483647)"
        );
        assert_eq!(
            error_of(&lua, "cjson.encode_sparse_array('maybe')"),
            "bad argument #1 to 'encode_sparse_array' (invalid option 'maybe')"
        );
        assert_eq!(
            error_of(&lua, "cjson.encode_sparse_array(1, 2, 3, 4)"),
            "bad argument #4 to 'encode_sparse_array' (found too many arguments)"
        );
    }

    #[test]
    fn settings_return_their_values() {
        // Proves each configuration function returns the setting, and validates ranges.
        let lua = lua_with(open);
        let values: (i64, i64, i64, bool, bool, bool) = eval(
            &lua,
            "return cjson.encode_max_depth(), cjson.decode_max_depth(), cjson.encode_number_precision(),
                    cjson.encode_keep_buffer(), cjson.decode_invalid_numbers(), cjson.encode_invalid_numbers()",
        );
        assert_eq!(values, (1000, 1000, 14, true, true, false));
        let mode: String = eval(&lua, "return cjson.encode_invalid_numbers('null')");
        assert_eq!(mode, "null");
        assert_eq!(encode(&lua, "{0/0, 1/0}"), "[null,null]");
        eval::<()>(&lua, "cjson.encode_invalid_numbers('on')");
        assert_eq!(encode(&lua, "{0/0, 1/0, -1/0}"), "[nan,inf,-inf]");
        let on: bool = eval(&lua, "return cjson.encode_keep_buffer('on')");
        assert!(on);
        eval::<()>(&lua, "cjson.encode_number_precision(3)");
        assert_eq!(encode(&lua, "1/3"), "0.333");
        assert_eq!(
            error_of(&lua, "cjson.encode_number_precision(15)"),
            "bad argument #1 to 'encode_number_precision' (expected integer between 1 and 14)"
        );
        assert_eq!(
            error_of(&lua, "cjson.encode_max_depth(0)"),
            "bad argument #1 to 'encode_max_depth' (expected integer between 1 and 2147483647)"
        );
        // cjson.new() has settings of its own.
        let fresh: i64 = eval(&lua, "return cjson.new().encode_number_precision()");
        assert_eq!(fresh, 14);
    }

    #[test]
    fn nesting_limits_in_both_directions() {
        // Proves the depth errors of lua-cjson, and that deep input is refused without recursion.
        let lua = lua_with(open);
        assert_eq!(
            error_of(
                &lua,
                "local t = {} local c = t for i = 1, 1000 do c[1] = {} c = c[1] end cjson.encode(t)"
            ),
            "Cannot serialise, excessive nesting (1001)"
        );
        let ok: usize = eval(
            &lua,
            "local t = {} local c = t for i = 1, 999 do c[1] = {} c = c[1] end return #cjson.encode(t)",
        );
        assert_eq!(ok, 2000);
        assert_eq!(
            error_of(&lua, "local a = {} a.a = a cjson.encode(a)"),
            "Cannot serialise, excessive nesting (1001)"
        );
        assert_eq!(
            error_of(
                &lua,
                "cjson.decode(string.rep('[', 1001) .. string.rep(']', 1001))"
            ),
            "Found too many nested data structures (1001) at character 1001"
        );
        let depth: i64 = eval(
            &lua,
            "local t = cjson.decode(string.rep('[', 1000) .. string.rep(']', 1000))
             local depth = 0 while type(t) == 'table' do depth = depth + 1 t = t[1] end return depth",
        );
        assert_eq!(depth, 1000);
        assert_eq!(
            error_of(
                &lua,
                "cjson.decode_max_depth(1) cjson.decode('{\"obj\": {\"array\": [1,2,3,4]}}')"
            ),
            "Found too many nested data structures (2) at character 9"
        );
        // Raised limits stop at Lua's C stack, as the C library's lua_checkstack does.
        eval::<()>(
            &lua,
            "cjson.decode_max_depth(1000000) cjson.encode_max_depth(1000000)",
        );
        let message = error_of(&lua, "cjson.decode(string.rep('[', 100000))");
        assert!(
            message.starts_with("Found too many nested data structures (79"),
            "{message}"
        );
        let message = error_of(&lua, "cjson.decode(string.rep('{\"a\":', 100000))");
        assert!(
            message.starts_with("Found too many nested data structures (39"),
            "{message}"
        );
        let message = error_of(&lua, "local a = {} a.a = a cjson.encode(a)");
        assert!(
            message.starts_with("Cannot serialise, excessive nesting (39"),
            "{message}"
        );
    }

    #[test]
    fn decodes_values_as_lua_cjson() {
        // Proves decoding of literals, strings with escapes, and strtod's number forms.
        let lua = lua_with(open);
        eval::<()>(
            &lua,
            r#"
            assert(cjson.decode('null') == cjson.null)
            assert(cjson.decode('[null]')[1] == cjson.null)
            assert(cjson.decode('true') == true and cjson.decode(' false ') == false)
            assert(cjson.decode('"a\\/b\\"c\\\\d\\b\\f\\n\\r\\t"') == 'a/b"c\\d\b\f\n\r\t')
            assert(cjson.decode('"\\u00e9\\u20ac\\ud83d\\ude00\\u0000"') == '\195\169\226\130\172\240\159\152\128\0')
            assert(cjson.decode('0x10') == 16)
            assert(cjson.decode('+1') == 1)
            assert(cjson.decode('1.') == 1)
            assert(cjson.decode('-0.5e1') == -5)
            assert(cjson.decode('1E+2') == 100)
            assert(cjson.decode('1.e2') == 100 and cjson.decode('-.5') == -0.5)
            assert(cjson.decode('00012') == 12 and cjson.decode('1e400') == math.huge)
            assert(cjson.decode('0x1P-2') == 0.25 and cjson.decode('0X.8') == 0.5)
            assert(cjson.decode('nan(123)') ~= cjson.decode('nan(123)'))
            assert(cjson.decode('Infinity') == math.huge and cjson.decode('-inf') == -math.huge)
            local nan = cjson.decode('nan') assert(nan ~= nan)
            assert(cjson.decode('0x1.8p1') == 3)
            assert(cjson.decode(123) == 123)
            assert(cjson.decode('12\0garbage') == 12)
            local t = cjson.decode('{"a":[1,{"b":null}],"c":"d"}')
            assert(t.a[1] == 1 and t.a[2].b == cjson.null and t.c == 'd')
            assert(next(cjson.decode('{}')) == nil and next(cjson.decode('[ ]')) == nil)
            assert(cjson.encode(cjson.decode('[1,2,3]')) == '[1,2,3]')
            "#,
        );
    }

    #[test]
    fn decode_errors_use_lua_cjson_messages() {
        // Proves malformed JSON raises lua-cjson's messages with 1-based positions.
        let lua = lua_with(open);
        let cases = [
            ("''", "Expected value but found T_END at character 1"),
            ("'['", "Expected value but found T_END at character 2"),
            (
                "'[1,]'",
                "Expected value but found T_ARR_END at character 4",
            ),
            (
                "'[1 2]'",
                "Expected comma or array end but found T_NUMBER at character 4",
            ),
            (
                "'{1:2}'",
                "Expected object key string but found T_NUMBER at character 2",
            ),
            (
                "'{\"a\" 2}'",
                "Expected colon but found T_NUMBER at character 6",
            ),
            (
                "'{\"a\":1 \"b\"}'",
                "Expected comma or object end but found T_STRING at character 8",
            ),
            (
                "'[1] x'",
                "Expected the end but found invalid token at character 5",
            ),
            (
                "'tru'",
                "Expected value but found invalid token at character 1",
            ),
            (
                "'\"abc'",
                "Expected value but found unexpected end of string at character 5",
            ),
            (
                "'\"a\\\\qb\"'",
                "Expected value but found invalid escape code at character 3",
            ),
            (
                "'\"\\\\u12\"'",
                "Expected value but found invalid unicode escape code at character 2",
            ),
            (
                "'\"\\\\udc00\"'",
                "Expected value but found invalid unicode escape code at character 2",
            ),
            (
                "'\"\\\\ud800x\"'",
                "Expected value but found invalid unicode escape code at character 2",
            ),
            (
                "'-'",
                "Expected value but found invalid number at character 1",
            ),
            (
                "'.5'",
                "Expected value but found invalid token at character 1",
            ),
            ("'\\0\\0'", "JSON parser does not support UTF-16 or UTF-32"),
            ("'a\\0'", "JSON parser does not support UTF-16 or UTF-32"),
        ];
        for (argument, expected) in cases {
            assert_eq!(
                error_of(&lua, &format!("cjson.decode({argument})")),
                expected,
                "{argument}"
            );
        }
        assert_eq!(
            error_of(&lua, "cjson.decode()"),
            "bad argument #1 to 'decode' (expected 1 argument)"
        );
        assert_eq!(
            error_of(&lua, "cjson.decode({})"),
            "bad argument #1 to 'decode' (string expected, got table)"
        );
        eval::<()>(&lua, "cjson.decode_invalid_numbers(false)");
        for strict in ["'0x10'", "'+1'", "'01'", "'inf'", "'-nan'", "'NaN'"] {
            let message = error_of(&lua, &format!("cjson.decode({strict})"));
            assert!(
                message.contains("invalid number") || message.contains("invalid token"),
                "{strict}: {message}"
            );
        }
        assert_eq!(
            error_of(&lua, "cjson.decode('0x10')"),
            "Expected value but found invalid number at character 1"
        );
    }

    #[test]
    fn round_trips() {
        // Proves decode(encode(v)) keeps structure, strings with every byte, and numbers to 14 digits.
        let lua = lua_with(open);
        eval::<()>(
            &lua,
            r#"
            local bytes = {} for i = 0, 255 do bytes[#bytes + 1] = string.char(i) end
            local all = table.concat(bytes)
            local v = {s = all, n = {1, 2.5, -3e20, 0.1}, b = {true, false}, o = {x = {y = {z = 'deep'}}}, e = {}}
            local back = cjson.decode(cjson.encode(v))
            assert(back.s == all)
            assert(back.n[1] == 1 and back.n[2] == 2.5 and back.n[3] == -3e20 and back.n[4] == 0.1)
            assert(back.b[1] == true and back.b[2] == false)
            assert(back.o.x.y.z == 'deep')
            assert(type(back.e) == 'table' and next(back.e) == nil)
            "#,
        );
    }
}
