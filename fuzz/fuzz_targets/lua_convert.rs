//! Feeds arbitrary bytes to what scripts read that they did not write: a command's reply
//! turned into Lua values (and the values back into a reply), and the libraries' decoders
//! (`cjson.decode`, `cmsgpack.unpack`, `struct.unpack` with a fuzzed format).
//!
//! Checks: no panic, no hang; every failure is an error value.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use mlua::{Function, Lua, Value};

thread_local! {
    static LUA: (Lua, Function) = {
        let lua = Lua::new();
        weft_lua::libs::open_all(&lua).expect("libraries open");
        let decoders: Function = lua
            .load(
                "return function(data, format)
                   pcall(cjson.decode, data)
                   pcall(cmsgpack.unpack, data)
                   pcall(struct.unpack, format, data)
                 end",
            )
            .eval()
            .expect("decoders compile");
        (lua, decoders)
    };
}

fuzz_target!(|data: &[u8]| {
    LUA.with(|(lua, decoders)| {
        if let Ok(value) = weft_lua::convert::reply_to_lua(lua, data) {
            let mut out = BytesMut::new();
            let _ = weft_lua::convert::lua_to_reply(&value, &mut out, weft_resp::Protocol::Resp3, true);
            let _: Value = value;
        }
        let split = data.len().min(8);
        let (Ok(format), Ok(body)) = (lua.create_string(&data[..split]), lua.create_string(&data[split..]))
        else {
            return;
        };
        let _ = decoders.call::<()>((body, format));
    });
});
