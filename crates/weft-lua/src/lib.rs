//! Redis' Lua scripting environment, without a server.
//!
//! This crate owns what EVAL and FUNCTION run scripts in: a Lua 5.1 interpreter (the
//! reference implementation, through `mlua`, as Redis embeds it) with the libraries Redis
//! ships (`bit`, `cjson`, `cmsgpack`, `struct`, in [`libs`]); the sandbox that keeps
//! scripts from creating or replacing globals (`sandbox.lua`); the `redis.*` API; the
//! conversion of replies into Lua values and of Lua values into replies ([`convert`]); the
//! script cache and a run's timeout and kill ([`engine`]). It does no I/O: a script's
//! `redis.call` reaches the server through the [`Host`] trait the server implements.

pub mod convert;
pub mod engine;
pub mod functions;
pub mod libs;

pub use engine::{
    CallOutcome, Engine, Host, Invocation, KillRefused, RunState, Runnable, ScriptFlags,
    library_may_run_long, may_run_long, sha1_hex, shebang, split_args,
};
pub use functions::{Functions, Library, RestorePolicy};
