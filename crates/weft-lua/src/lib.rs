//! Redis' Lua scripting environment, without a server.
//!
//! This crate owns what EVAL and FUNCTION run scripts in: a Lua 5.1 interpreter (the
//! reference implementation, through `mlua`, as Redis embeds it), the libraries Redis
//! ships with it (`bit`, `cjson`, `cmsgpack`, `struct`), and — in later modules — the
//! `redis.*` API, the conversion of replies into Lua values and of Lua values into
//! replies, the sandbox that keeps scripts from leaking globals, and the timeout hook.
//! It does no I/O: a script's `redis.call` reaches the server through a trait the server
//! implements.

pub mod libs;
