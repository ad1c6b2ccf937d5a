//! The Lua libraries Redis loads into every script's interpreter, as global tables:
//! `bit` (LuaBitOp), `cjson` (lua-cjson), `cmsgpack` (lua-cmsgpack) and `struct`
//! (Roberto Ierusalimschy's struct library), with the behaviour of the versions Redis
//! 7.0 vendors in `deps/lua/src`.
//!
//! Robustness contract: every byte these functions read comes from a script, so
//! malformed input is a Lua error and never a panic; nesting is walked with explicit
//! stacks (never unbounded Rust recursion); and no function keeps more than a handful of
//! `mlua` references alive at once, because `mlua` panics when its auxiliary stack of
//! references (8,000 slots under Lua 5.1) runs out.
//!
//! Errors reach the script as plain Lua strings, exactly as the C libraries' `luaL_error`
//! raises them, so that `pcall` hands the script a message it can match. `mlua` would wrap
//! an error returned by a Rust callback in a userdata, so each library function is a Rust
//! function that reports failure as a value, behind a two-line Lua trampoline that turns
//! that value into `error(message, 0)`.

pub mod bit;
pub mod cjson;
pub mod cmsgpack;
pub mod structlib;

use mlua::{Function, Lua, MultiValue, Table, Value};

/// Opens every library Redis ships into `lua`'s globals.
///
/// # Errors
/// Lua's error when a table or function cannot be created (out of memory).
pub fn open_all(lua: &Lua) -> mlua::Result<()> {
    bit::open(lua)?;
    cjson::open(lua)?;
    cmsgpack::open(lua)?;
    structlib::open(lua)?;
    Ok(())
}

/// The number of stack slots Lua 5.1 lets one C function use (`LUAI_MAXCSTACK`). The C
/// libraries fail with their own messages when nesting or result counts reach it, and we
/// reproduce where they fail by counting the slots they would have used.
pub(crate) const LUA_C_STACK_SLOTS_MAX: usize = 8000;

/// Slots of a callback's Lua stack frame that are not its arguments or results. `mlua`
/// uses some (its preallocated error slot, the room it checks for while pushing results
/// and while putting that slot back in its pool) and the trampoline's success flag one;
/// measured, a fresh interpreter needs 23, and this keeps a margin. A library function
/// returning more values than fit would fail inside `mlua`, so the functions check
/// [`results_fit`] first and fail as the C library does, a few dozen results earlier.
const CALLBACK_FRAME_SLOTS: usize = 32;

/// Whether a function called with `argument_count` arguments can return `result_count`
/// values: Lua 5.1 keeps both on the C function's stack frame.
pub(crate) fn results_fit(argument_count: usize, result_count: usize) -> bool {
    argument_count + result_count + CALLBACK_FRAME_SLOTS <= LUA_C_STACK_SLOTS_MAX
}

/// Why a library function failed.
#[derive(Debug)]
pub(crate) enum LibError {
    /// A message for the script, raised as a plain Lua string (the C libraries'
    /// `luaL_error` and `luaL_argerror`). Bytes, because a message may quote script data.
    Script(Vec<u8>),
    /// An error Lua itself raises inside a C function ("table index is nil"), which
    /// carries no position because the running function is not a Lua function.
    Runtime(Vec<u8>),
    /// A failure of the interpreter itself (out of memory), passed on as `mlua` reports it.
    Lua(mlua::Error),
}

impl From<mlua::Error> for LibError {
    fn from(error: mlua::Error) -> Self {
        LibError::Lua(error)
    }
}

impl LibError {
    /// A message for the script.
    pub(crate) fn script(message: impl Into<Vec<u8>>) -> Self {
        LibError::Script(message.into())
    }

    /// `luaL_argerror`: "bad argument #N to 'function' (reason)".
    pub(crate) fn argument(function: &str, argument: usize, reason: impl AsRef<[u8]>) -> Self {
        let mut message = format!("bad argument #{argument} to '{function}' (").into_bytes();
        message.extend_from_slice(reason.as_ref());
        message.push(b')');
        LibError::Script(message)
    }

    /// `luaL_typerror`: "bad argument #N to 'function' (number expected, got nil)".
    pub(crate) fn type_mismatch(
        function: &str,
        argument: usize,
        expected: &str,
        found: Option<&Value>,
    ) -> Self {
        let found = lua_type_name(found);
        LibError::argument(
            function,
            argument,
            format!("{expected} expected, got {found}"),
        )
    }
}

pub(crate) type LibResult<T> = Result<T, LibError>;

/// The trampoline that turns a library function's `false, message` into a Lua error
/// without position information, as `luaL_error` raises from a C function.
const TRAMPOLINE_SOURCE: &str = r#"
local raw, raise = ...
local function finish(ok, ...)
  if ok then return ... end
  raise((...), 0)
end
return function(...) return finish(raw(...)) end
"#;

/// Builds script-facing functions whose errors are plain Lua strings.
#[derive(Clone)]
pub(crate) struct FunctionFactory {
    trampoline: Function,
    raise: Function,
}

impl FunctionFactory {
    /// # Errors
    /// Lua's error when the trampoline cannot be compiled or `error` is missing.
    pub(crate) fn new(lua: &Lua) -> mlua::Result<Self> {
        let trampoline = lua
            .load(TRAMPOLINE_SOURCE)
            .set_name("=weft-lua trampoline")
            .into_function()?;
        let raise = lua.globals().raw_get::<Function>("error")?;
        Ok(FunctionFactory { trampoline, raise })
    }

    /// Wraps `body` (which receives every argument the script passed) as a Lua function.
    ///
    /// # Errors
    /// Lua's error when the function cannot be created (out of memory).
    pub(crate) fn create<F>(&self, lua: &Lua, body: F) -> mlua::Result<Function>
    where
        F: Fn(&Lua, Vec<Value>) -> LibResult<Vec<Value>> + Send + 'static,
    {
        let raw = lua.create_function(move |lua, arguments: MultiValue| {
            match body(lua, arguments.into_vec()) {
                Ok(values) => {
                    let mut results = MultiValue::from_vec(values);
                    results.push_front(Value::Boolean(true));
                    Ok(results)
                }
                Err(LibError::Script(message)) => {
                    let mut located = caller_position(lua);
                    located.extend_from_slice(&message);
                    let message = lua.create_string(located)?;
                    Ok(MultiValue::from_vec(vec![
                        Value::Boolean(false),
                        Value::String(message),
                    ]))
                }
                Err(LibError::Runtime(message)) => Ok(MultiValue::from_vec(vec![
                    Value::Boolean(false),
                    Value::String(lua.create_string(message)?),
                ])),
                Err(LibError::Lua(error)) => Err(error),
            }
        })?;
        self.trampoline.call((raw, self.raise.clone()))
    }

    /// Creates the function and stores it in `table` under `name`.
    ///
    /// # Errors
    /// Lua's error when the function cannot be created (out of memory).
    pub(crate) fn set<F>(&self, lua: &Lua, table: &Table, name: &str, body: F) -> mlua::Result<()>
    where
        F: Fn(&Lua, Vec<Value>) -> LibResult<Vec<Value>> + Send + 'static,
    {
        table.raw_set(name, self.create(lua, body)?)
    }
}

/// "chunk:line: " of the Lua function that called the library function, as `luaL_error`
/// prefixes its messages; empty when the caller is a C function (such as `pcall`) or a
/// frame lost to a tail call. Level 0 is the Rust callback, 1 the trampoline, 2 the caller.
fn caller_position(lua: &Lua) -> Vec<u8> {
    lua.inspect_stack(2, |frame| {
        let line = frame.current_line().filter(|&line| line > 0)?;
        let source = frame.source().short_src?;
        Some(format!("{source}:{line}: ").into_bytes())
    })
    .flatten()
    .unwrap_or_default()
}

/// `lua_typename(lua_type(v))`, with `None` for an argument the script did not pass.
pub(crate) fn lua_type_name(value: Option<&Value>) -> &'static str {
    match value {
        None => "no value",
        Some(Value::Nil) => "nil",
        Some(Value::Boolean(_)) => "boolean",
        Some(Value::Integer(_) | Value::Number(_)) => "number",
        Some(Value::String(_)) => "string",
        Some(Value::Table(_)) => "table",
        Some(Value::Function(_)) => "function",
        Some(Value::Thread(_)) => "thread",
        Some(_) => "userdata",
    }
}

/// `lua_tonumber`: numbers, and strings Lua converts to numbers (" 0x10 ", "1e3").
///
/// # Errors
/// Lua's error when the interpreter cannot convert (out of memory).
pub(crate) fn to_number(lua: &Lua, value: Option<&Value>) -> LibResult<Option<f64>> {
    Ok(match value {
        Some(Value::Number(number)) => Some(*number),
        Some(Value::Integer(integer)) => Some(*integer as f64),
        Some(Value::String(string)) => lua.coerce_number(Value::String(string.clone()))?,
        _ => None,
    })
}

/// `luaL_checknumber`.
pub(crate) fn check_number(
    lua: &Lua,
    function: &str,
    arguments: &[Value],
    index: usize,
) -> LibResult<f64> {
    let value = arguments.get(index - 1);
    to_number(lua, value)?.ok_or_else(|| LibError::type_mismatch(function, index, "number", value))
}

/// `luaL_checkinteger`: a number truncated to an integer as Lua 5.1 on x86-64 does.
pub(crate) fn check_integer(
    lua: &Lua,
    function: &str,
    arguments: &[Value],
    index: usize,
) -> LibResult<i64> {
    check_number(lua, function, arguments, index).map(f64_to_i64_x86)
}

/// `luaL_optinteger`: `default` when the argument is absent or nil.
pub(crate) fn opt_integer(
    lua: &Lua,
    function: &str,
    arguments: &[Value],
    index: usize,
    default: i64,
) -> LibResult<i64> {
    match arguments.get(index - 1) {
        None | Some(Value::Nil) => Ok(default),
        Some(_) => check_integer(lua, function, arguments, index),
    }
}

/// `luaL_checklstring`: strings, and numbers converted as Lua prints them.
pub(crate) fn check_string(
    lua: &Lua,
    function: &str,
    arguments: &[Value],
    index: usize,
) -> LibResult<mlua::String> {
    let value = arguments.get(index - 1);
    match value {
        Some(Value::String(string)) => Ok(string.clone()),
        Some(number @ (Value::Integer(_) | Value::Number(_))) => lua
            .coerce_string(number.clone())?
            .ok_or_else(|| LibError::type_mismatch(function, index, "string", value)),
        _ => Err(LibError::type_mismatch(function, index, "string", value)),
    }
}

/// A double converted to a 64-bit signed integer as the C cast compiles on x86-64
/// (`cvttsd2si`): truncation, and `i64::MIN` for NaN and values out of range.
pub(crate) fn f64_to_i64_x86(number: f64) -> i64 {
    const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
    if (-TWO_POW_63..TWO_POW_63).contains(&number) {
        number as i64
    } else {
        i64::MIN
    }
}

/// A double converted to a 32-bit signed integer as the C cast compiles on x86-64:
/// truncation, and `i32::MIN` for NaN and values out of range.
pub(crate) fn f64_to_i32_x86(number: f64) -> i32 {
    if number > -2_147_483_649.0 && number < 2_147_483_648.0 {
        number as i32
    } else {
        i32::MIN
    }
}

/// A double converted to a 64-bit unsigned integer as GCC compiles the C cast on x86-64:
/// below 2^63 through the signed conversion (so negative values wrap), above it by
/// subtracting 2^63 first (so values from 2^64 on become 0).
pub(crate) fn f64_to_u64_x86(number: f64) -> u64 {
    const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
    if number.is_nan() || number < TWO_POW_63 {
        f64_to_i64_x86(number) as u64
    } else {
        (f64_to_i64_x86(number - TWO_POW_63) as u64) ^ (1 << 63)
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    use mlua::Lua;

    /// A fresh interpreter with the library under test opened by `open`.
    pub(crate) fn lua_with(open: fn(&Lua) -> mlua::Result<()>) -> Lua {
        let lua = Lua::new();
        if let Err(error) = open(&lua) {
            panic!("opening the library failed: {error}");
        }
        lua
    }

    /// Runs `chunk` (named "test") and returns its results, panicking with Lua's message
    /// on error.
    pub(crate) fn eval<R: mlua::FromLuaMulti>(lua: &Lua, chunk: &str) -> R {
        match lua.load(chunk).set_name("=test").eval::<R>() {
            Ok(result) => result,
            Err(error) => panic!("chunk failed: {error}\n{chunk}"),
        }
    }

    /// Runs `chunk` inside `pcall` and returns the error message it raised, which
    /// must be a plain string (as the C libraries raise), not an `mlua` userdata,
    /// without the "test:N: " position prefix.
    pub(crate) fn error_of(lua: &Lua, chunk: &str) -> String {
        let message = located_error_of(lua, chunk);
        let unlocated = message.strip_prefix("test:").and_then(|rest| {
            let (line, rest) = rest.split_once(": ")?;
            line.bytes()
                .all(|byte| byte.is_ascii_digit())
                .then_some(rest)
        });
        unlocated.map_or_else(|| message.clone(), str::to_string)
    }

    /// Like [`error_of`], with the position prefix.
    pub(crate) fn located_error_of(lua: &Lua, chunk: &str) -> String {
        let wrapped = format!(
            "local ok, message = pcall(function() {chunk} end)\n\
             assert(not ok, 'expected an error')\n\
             assert(type(message) == 'string', 'error is a ' .. type(message))\n\
             return message"
        );
        eval(lua, &wrapped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_follow_the_x86_64_c_casts() {
        // Proves the helpers reproduce what the C libraries' casts give for out-of-range values.
        assert_eq!(f64_to_i64_x86(-3.9), -3);
        assert_eq!(f64_to_i64_x86(f64::NAN), i64::MIN);
        assert_eq!(f64_to_i64_x86(1e300), i64::MIN);
        assert_eq!(f64_to_i32_x86(f64::INFINITY), i32::MIN);
        assert_eq!(f64_to_i32_x86(-2_147_483_648.5), -2_147_483_648);
        assert_eq!(f64_to_u64_x86(-1.0), u64::MAX);
        assert_eq!(f64_to_u64_x86(1.5e19), 15_000_000_000_000_000_000);
        assert_eq!(f64_to_u64_x86(1e20), 0);
        assert_eq!(f64_to_u64_x86(f64::NAN), 1 << 63);
    }

    #[test]
    fn errors_are_strings_located_at_the_calling_line() {
        // Proves library errors reach scripts as strings with luaL_error's "chunk:line: ".
        let lua = test_support::lua_with(open_all);
        assert_eq!(
            test_support::located_error_of(&lua, "bit.band()"),
            "test:1: bad argument #1 to 'band' (number expected, got no value)"
        );
        let through_pcall: String = test_support::eval(&lua, "return select(2, pcall(bit.band))");
        assert_eq!(
            through_pcall,
            "bad argument #1 to 'band' (number expected, got no value)"
        );
    }

    #[test]
    fn hostile_input_is_a_value_or_a_string_error() {
        // Proves random bytes into every parser give a result or a string error, never a
        // panic or an mlua error userdata (a fixed-seed xorshift keeps the run reproducible).
        let lua = test_support::lua_with(open_all);
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let alphabets: [&[u8]; 3] = [
            b"\x80\x81\x91\x92\xa1\xc0\xc1\xc2\xca\xcb\xcc\xd0\xd9\xdb\xdc\xdd\xde\xdf\xff\x00\x01abc",
            b"{}[],:\"\\/u0123456789abcdefABCDEFxtrueflsnINF-+.eE \x00",
            b"<>!bBhHlLTiIfdsxc0123456789 ",
        ];
        let calls = [
            "cmsgpack.unpack(input)",
            "cjson.decode(input)",
            "struct.unpack(input, data)",
        ];
        let checker = r#"
            local ok, result = pcall(function() return CALL end)
            assert(ok or type(result) == 'string', 'error of type ' .. type(result))
            if not ok then return end
            pcall(cmsgpack.pack, result)
            pcall(cjson.encode, result)
        "#;
        for round in 0..3000 {
            let which = round % 3;
            let alphabet = alphabets[which];
            let length = (next() % 48) as usize;
            let input: Vec<u8> = (0..length)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect();
            let data: Vec<u8> = (0..(next() % 40)).map(|_| next() as u8).collect();
            let globals = lua.globals();
            let set = globals
                .raw_set("input", lua.create_string(&input).ok())
                .and_then(|()| globals.raw_set("data", lua.create_string(&data).ok()));
            if let Err(error) = set {
                panic!("setting globals failed: {error}");
            }
            let chunk = checker.replace("CALL", calls[which]);
            test_support::eval::<()>(&lua, &chunk);
        }
    }

    #[test]
    fn open_all_sets_the_four_globals() {
        // Proves open_all makes bit, cjson, cmsgpack and struct visible to scripts.
        let lua = test_support::lua_with(open_all);
        let kinds: String = test_support::eval(&lua, "return type(bit)");
        assert_eq!(kinds, "table");
    }
}
