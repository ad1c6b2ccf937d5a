//! Function libraries (Redis 7's FUNCTION and FCALL): libraries loaded from code whose
//! first line names them (`#!lua name=mylib`), each registering functions with
//! `redis.register_function`, kept in an interpreter of their own as Redis keeps them
//! apart from EVAL's scripts.
//!
//! A library's top level runs once, at FUNCTION LOAD, where its globals hold nothing but
//! `redis.register_function`, `redis.log` and the version fields, and must end within
//! [`LOAD_TIMEOUT`](crate::engine::LOAD_TIMEOUT). The functions it registered run later
//! with every global scripts have.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::{Bytes, BytesMut};
use mlua::{Function, Lua, MultiValue, Table, Value};
use weft_resp::Protocol;

use crate::convert::error_table;
use crate::engine::{Engine, Host, Invocation, RunState, Runnable, ScriptFlags};

/// One registered function.
#[derive(Debug, Clone)]
pub struct FunctionInfo {
    /// Its name.
    pub name: String,
    /// Its description, if registered with one.
    pub description: Option<String>,
    /// Its flags (`no-writes`, ...).
    pub flags: ScriptFlags,
    function: Function,
}

/// One loaded library.
#[derive(Debug, Clone)]
pub struct Library {
    /// Its name.
    pub name: String,
    /// Its engine (`LUA`).
    pub engine: String,
    /// Its code, as loaded (shebang included).
    pub code: Bytes,
    /// Its functions by name.
    pub functions: BTreeMap<String, FunctionInfo>,
    /// [`crate::library_may_run_long`] of its code, read when it was loaded.
    pub long: bool,
}

/// Functions registered while a library's top level runs.
type Registry = Arc<Mutex<Option<Vec<FunctionInfo>>>>;

/// The libraries and the interpreter their functions run in.
#[derive(Debug)]
pub struct Functions {
    engine: Engine,
    /// The metatable of the libraries' globals: its `__index` is the load API while a
    /// library loads, the scripts' globals after.
    env_meta: Table,
    env: Table,
    load_api: Table,
    registry: Registry,
    libraries: BTreeMap<String, Library>,
    /// Function name, lower-cased (FCALL's names are case-insensitive, as Redis' function
    /// dictionary is) → library name and the name as registered.
    index: HashMap<String, (String, String)>,
}

/// Library and function names: letters, digits and underscores.
fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// A library's metadata line: its engine, its name, and where its code starts (at the
/// line feed, so that line numbers hold).
///
/// # Errors
/// Redis' text for metadata it refuses.
pub fn metadata(code: &[u8]) -> Result<(String, String, usize), String> {
    if !code.starts_with(b"#!") {
        return Err("Missing library metadata".to_owned());
    }
    let Some(end) = code.iter().position(|&b| b == b'\n') else {
        return Err("Invalid library metadata".to_owned());
    };
    let Some(words) = crate::engine::split_args(&code[..end]).filter(|w| !w.is_empty()) else {
        return Err("Invalid library metadata".to_owned());
    };
    let words: Vec<String> = words
        .iter()
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    let mut parts = words.iter().map(String::as_str);
    let Some(engine) = parts.next() else {
        return Err("Invalid library metadata".to_owned());
    };
    let engine = engine.trim_start_matches("#!").to_owned();
    let mut name = None;
    for part in parts {
        if part.len() >= 5 && part[..5].eq_ignore_ascii_case("name=") {
            if name.is_some() {
                return Err(
                    "Invalid metadata value, name argument was given multiple times".to_owned(),
                );
            }
            name = Some(part[5..].to_owned());
            continue;
        }
        return Err(format!("Invalid metadata value given: {part}"));
    }
    let Some(name) = name else {
        return Err("Library name was not given".to_owned());
    };
    Ok((engine, name, end))
}

impl Functions {
    /// An interpreter with no libraries, reporting runs to `run`.
    ///
    /// # Errors
    /// Lua's error if the interpreter cannot be set up.
    pub fn new(run: Arc<RunState>) -> mlua::Result<Self> {
        let engine = Engine::new(run)?;
        let lua = engine.lua().clone();
        let registry: Registry = Arc::new(Mutex::new(None));
        let register = {
            let registry = Arc::clone(&registry);
            lua.create_function(move |lua, args: MultiValue| {
                Ok(register_function(lua, &registry, args))
            })?
        };
        let (env, env_meta, load_api): (Table, Table, Table) = lua
            .load(include_str!("functions.lua"))
            .set_name("=functions")
            .call((register, engine.env().clone()))?;
        Ok(Self {
            engine,
            env_meta,
            env,
            load_api,
            registry,
            libraries: BTreeMap::new(),
            index: HashMap::new(),
        })
    }

    /// The libraries, by name.
    #[must_use]
    pub fn libraries(&self) -> &BTreeMap<String, Library> {
        &self.libraries
    }

    /// How many functions the libraries register.
    #[must_use]
    pub fn function_count(&self) -> usize {
        self.index.len()
    }

    /// Bytes the interpreter uses.
    #[must_use]
    pub fn memory(&self) -> usize {
        self.engine.memory()
    }

    /// FUNCTION FLUSH.
    pub fn flush(&mut self) {
        self.libraries.clear();
        self.index.clear();
        self.engine.lua().gc_collect().ok();
    }

    /// FUNCTION DELETE.
    ///
    /// # Errors
    /// "ERR Library not found".
    pub fn delete(&mut self, name: &str) -> Result<(), &'static str> {
        let library = self.libraries.remove(name).ok_or("ERR Library not found")?;
        for function in library.functions.keys() {
            self.index.remove(&function.to_ascii_lowercase());
        }
        Ok(())
    }

    /// FUNCTION LOAD (with or without REPLACE): the library's name.
    ///
    /// # Errors
    /// The error reply's text.
    pub fn load(&mut self, code: &[u8], replace: bool) -> Result<String, String> {
        let library = self.compile(code)?;
        self.link(vec![library], replace, true)
            .map(|mut names| names.pop().unwrap_or_default())
    }

    /// Compiles and runs a library's top level: the library with what it registered.
    fn compile(&mut self, code: &[u8]) -> Result<Library, String> {
        let (engine, name, start) = metadata(code).map_err(|e| format!("ERR {e}"))?;
        if !valid_name(&name) {
            return Err("ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".to_owned());
        }
        if !engine.eq_ignore_ascii_case("lua") {
            return Err(format!("ERR Engine '{engine}' not found"));
        }
        let chunk = self
            .engine
            .lua()
            .load(&code[start..])
            .set_name("@user_function")
            .set_mode(mlua::ChunkMode::Text)
            .into_function()
            .map_err(|e| match e {
                mlua::Error::SyntaxError { message, .. } => {
                    format!("ERR Error compiling function: {message}")
                }
                other => format!("ERR Error compiling function: {other}"),
            })?;
        chunk
            .set_environment(self.env.clone())
            .map_err(|e| format!("ERR {e}"))?;
        *self.registry.lock().unwrap_or_else(PoisonError::into_inner) = Some(Vec::new());
        let loading = self
            .env_meta
            .raw_set("__index", self.load_api.clone())
            .and_then(|()| self.engine.run_loading(&chunk));
        let registered = self
            .registry
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .unwrap_or_default();
        self.env_meta
            .raw_set("__index", self.engine.env().clone())
            .map_err(|e| format!("ERR {e}"))?;
        match loading {
            Ok((true, _)) => {}
            Ok((false, error)) => {
                let message = match &error {
                    Value::Table(table) => match table.raw_get::<Value>("err") {
                        Ok(Value::String(s)) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
                        _ => "ERR execution failure".to_owned(),
                    },
                    _ => "ERR execution failure".to_owned(),
                };
                return Err(format!("ERR Error registering functions: {message}"));
            }
            Err(error) => return Err(format!("ERR Error registering functions: {error}")),
        }
        let mut functions = BTreeMap::new();
        for function in registered {
            if functions.contains_key(&function.name) {
                return Err("ERR Function already exists in the library".to_owned());
            }
            functions.insert(function.name.clone(), function);
        }
        if functions.is_empty() {
            return Err("ERR No functions registered".to_owned());
        }
        Ok(Library {
            name,
            engine: "LUA".to_owned(),
            code: Bytes::copy_from_slice(code),
            functions,
            long: crate::library_may_run_long(code),
        })
    }

    /// Adds libraries, replacing those of the same names when `replace`; all or none.
    /// `quoted`: FUNCTION LOAD's error quotes the name, FUNCTION RESTORE's does not (as in
    /// Redis).
    fn link(
        &mut self,
        libraries: Vec<Library>,
        replace: bool,
        quoted: bool,
    ) -> Result<Vec<String>, String> {
        for library in &libraries {
            if self.libraries.contains_key(&library.name) && !replace {
                return Err(if quoted {
                    format!("ERR Library '{}' already exists", library.name)
                } else {
                    format!("ERR Library {} already exists", library.name)
                });
            }
        }
        for library in &libraries {
            for function in library.functions.keys() {
                if let Some((owner, _)) = self.index.get(&function.to_ascii_lowercase())
                    && (owner != &library.name || !replace)
                    && !libraries.iter().any(|l| &l.name == owner && replace)
                {
                    return Err(format!("ERR Function {function} already exists"));
                }
            }
        }
        let mut names = Vec::with_capacity(libraries.len());
        for library in libraries {
            let _ = self.delete(&library.name);
            for function in library.functions.keys() {
                self.index.insert(
                    function.to_ascii_lowercase(),
                    (library.name.clone(), function.clone()),
                );
            }
            names.push(library.name.clone());
            self.libraries.insert(library.name.clone(), library);
        }
        Ok(names)
    }

    /// The code of the library that registered the function `name`.
    #[must_use]
    pub fn library_code(&self, name: &str) -> Option<&Bytes> {
        let (library, _) = self.index.get(&name.to_ascii_lowercase())?;
        self.libraries.get(library).map(|library| &library.code)
    }

    /// A function by name.
    #[must_use]
    pub fn function(&self, name: &str) -> Option<&FunctionInfo> {
        let (library, name) = self.index.get(&name.to_ascii_lowercase())?;
        self.libraries.get(library)?.functions.get(name)
    }

    /// Whether function `name`'s library may run for long (see
    /// [`crate::library_may_run_long`]); true when there is no such function.
    #[must_use]
    pub fn runs_long(&self, name: &str) -> bool {
        self.index
            .get(&name.to_ascii_lowercase())
            .and_then(|(library, _)| self.libraries.get(library))
            .is_none_or(|library| library.long)
    }

    /// FCALL / FCALL_RO of a function known to exist (see [`Functions::function`]).
    pub fn call(
        &mut self,
        host: &mut dyn Host,
        name: &str,
        invocation: Invocation<'_>,
        out: &mut BytesMut,
        protocol: Protocol,
    ) {
        let Some(function) = self.function(name).cloned() else {
            weft_resp::write_error(out, "ERR Function not found");
            return;
        };
        self.engine.run(
            host,
            &Runnable {
                function: &function.function,
                name: &function.name,
                flags: function.flags,
                eval: false,
            },
            invocation,
            out,
            protocol,
        );
    }

    /// FUNCTION DUMP's libraries (their code), in name order.
    #[must_use]
    pub fn codes(&self) -> Vec<Bytes> {
        self.libraries.values().map(|l| l.code.clone()).collect()
    }

    /// FUNCTION RESTORE of libraries' codes with a policy: FLUSH (replace everything),
    /// APPEND (fail on any existing name), REPLACE (replace those of the same names).
    ///
    /// # Errors
    /// The error reply's text; nothing changes then.
    pub fn restore(&mut self, codes: &[Bytes], policy: RestorePolicy) -> Result<(), String> {
        let mut libraries = Vec::with_capacity(codes.len());
        for code in codes {
            libraries.push(self.compile(code)?);
        }
        match policy {
            RestorePolicy::Flush => {
                self.flush();
                self.link(libraries, false, false).map(|_| ())
            }
            RestorePolicy::Append => self.link(libraries, false, false).map(|_| ()),
            RestorePolicy::Replace => self.link(libraries, true, false).map(|_| ()),
        }
    }
}

/// How FUNCTION RESTORE treats existing libraries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestorePolicy {
    /// Delete them all first.
    Flush,
    /// Fail if a name exists.
    Append,
    /// Replace those of the same names.
    Replace,
}

/// `redis.register_function(name, callback)` or `redis.register_function{function_name=,
/// callback=, flags=, description=}`: `nil` when registered, else a Redis error table for
/// the sandbox's wrapper to raise.
fn register_function(lua: &Lua, registry: &Registry, args: MultiValue) -> Value {
    let failure = |text: &str| {
        error_table(lua, format!("ERR {text}").as_bytes(), false).map_or(Value::Nil, Value::Table)
    };
    let mut registry = registry.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(registered) = registry.as_mut() else {
        return failure("redis.register_function can only be called on FUNCTION LOAD command");
    };
    let info = match args.len() {
        1 => {
            let Some(Value::Table(named)) = args.front() else {
                return failure(
                    "calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).",
                );
            };
            match named_arguments(named) {
                Ok(info) => info,
                Err(text) => return failure(text),
            }
        }
        2 => {
            let mut args = args.into_iter();
            let name = match args.next() {
                Some(Value::String(s)) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
                Some(Value::Number(n)) => n.to_string(),
                Some(Value::Integer(n)) => n.to_string(),
                _ => return failure("first argument to redis.register_function must be a string"),
            };
            let Some(Value::Function(function)) = args.next() else {
                return failure("second argument to redis.register_function must be a function");
            };
            FunctionInfo {
                name,
                description: None,
                flags: ScriptFlags::default(),
                function,
            }
        }
        _ => return failure("wrong number of arguments to redis.register_function"),
    };
    if !valid_name(&info.name) {
        return failure(
            "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long",
        );
    }
    if registered.iter().any(|f| f.name == info.name) {
        return failure("Function already exists in the library");
    }
    registered.push(info);
    Value::Nil
}

fn named_arguments(named: &Table) -> Result<FunctionInfo, &'static str> {
    let mut name = None;
    let mut description = None;
    let mut function = None;
    let mut flags = ScriptFlags::default();
    for pair in named.pairs::<Value, Value>() {
        let Ok((key, value)) = pair else {
            return Err("named argument key given to redis.register_function is not a string");
        };
        let key = match key {
            Value::String(s) => s.to_string_lossy().to_ascii_lowercase(),
            _ => return Err("named argument key given to redis.register_function is not a string"),
        };
        match key.as_str() {
            "function_name" => match value {
                Value::String(s) => name = Some(s.to_string_lossy()),
                _ => {
                    return Err(
                        "function_name argument given to redis.register_function must be a string",
                    );
                }
            },
            "description" => match value {
                Value::String(s) => description = Some(s.to_string_lossy()),
                _ => {
                    return Err(
                        "description argument given to redis.register_function must be a string",
                    );
                }
            },
            "callback" => match value {
                Value::Function(f) => function = Some(f),
                _ => {
                    return Err(
                        "callback argument given to redis.register_function must be a function",
                    );
                }
            },
            "flags" => {
                let Value::Table(list) = value else {
                    return Err(
                        "flags argument to redis.register_function must be a table representing function flags",
                    );
                };
                for i in 1.. {
                    match list.raw_get::<Value>(i) {
                        Ok(Value::Nil) => break,
                        Ok(Value::String(s)) => {
                            if !flags.set(&s.to_string_lossy().to_ascii_lowercase()) {
                                return Err("unknown flag given");
                            }
                        }
                        _ => return Err("unknown flag given"),
                    }
                }
            }
            _ => return Err("unknown argument given to redis.register_function"),
        }
    }
    let Some(name) = name else {
        return Err("redis.register_function must get a function name argument");
    };
    let Some(function) = function else {
        return Err("redis.register_function must get a callback argument");
    };
    Ok(FunctionInfo {
        name,
        description,
        flags,
        function,
    })
}
