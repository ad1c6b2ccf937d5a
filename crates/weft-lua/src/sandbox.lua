-- The sandbox every script runs in, as Redis 7.0 builds it: read-only library tables,
-- globals that cannot be created or replaced, an error for reading an undefined global,
-- no binary chunks, and Redis' `pcall`, which hands a Redis error table back as its
-- message. Redis gets read-only tables from a patched Lua; with the reference Lua 5.1,
-- every protected table is reached through an empty proxy whose metatable forwards reads
-- and refuses writes, and the built-ins that could reach around a proxy (rawset,
-- setmetatable, getmetatable, getfenv, setfenv, loadstring, load) are wrapped.
--
-- Run once, with the interpreter's real globals, and given the internal table `I` (the
-- server's hooks: `call`, `killed`, ...). Returns the proxy that scripts see as globals.

local I = ...
local G = _G
local raw_rawset, raw_setmetatable, raw_getmetatable = rawset, setmetatable, getmetatable
local raw_getfenv, raw_setfenv = getfenv, setfenv
local raw_loadstring = loadstring
local raw_pcall, raw_xpcall = pcall, xpcall
local type, error, select, tostring = type, error, select, tostring

local READONLY = 'Attempt to modify a readonly table'
local readonly = raw_setmetatable({}, { __mode = 'k' })

local function refuse()
  error(READONLY, 2)
end

-- A read-only view of `t`: reads reach `t`, writes fail, and its metatable is itself
-- read-only.
local function protect(t)
  local view = {}
  local meta = { __index = t, __newindex = refuse }
  local meta_view = raw_setmetatable({}, { __index = meta, __newindex = refuse, __metatable = false })
  readonly[meta_view] = true
  meta.__metatable = meta_view
  raw_setmetatable(view, meta)
  readonly[view] = true
  return view
end

-- Redis' globals allow list: what luaopen_base and the libraries define that scripts keep.
local allowed = {
  string = true, cjson = true, bit = true, cmsgpack = true, math = true, table = true,
  struct = true, redis = true, xpcall = true, tostring = true, getfenv = true,
  setmetatable = true, next = true, assert = true, tonumber = true, rawequal = true,
  collectgarbage = true, getmetatable = true, rawset = true, pcall = true, coroutine = true,
  type = true, _G = true, select = true, unpack = true, gcinfo = true, pairs = true,
  rawget = true, loadstring = true, ipairs = true, _VERSION = true, setfenv = true,
  load = true, error = true, newproxy = true,
}
local remove = {}
for name in pairs(G) do
  if not allowed[name] then
    remove[#remove + 1] = name
  end
end
for _, name in ipairs(remove) do
  G[name] = nil
end

local scripts_env -- the proxy of the globals, set below

rawset = function(t, k, v)
  if readonly[t] or t == G then
    error(READONLY, 2)
  end
  return raw_rawset(t, k, v)
end

setmetatable = function(t, m)
  if readonly[t] or t == G then
    error(READONLY, 2)
  end
  return raw_setmetatable(t, m)
end

local string_meta = raw_getmetatable('')
local string_meta_view = protect(string_meta)
getmetatable = function(t)
  local m = raw_getmetatable(t)
  if m == string_meta then
    return string_meta_view
  end
  return m
end

-- Levels seen by the caller are one less than ours: this wrapper is a frame too.
local function level(f)
  if f == nil then
    return 2
  end
  if type(f) == 'number' and f > 0 then
    return f + 1
  end
  return f
end

getfenv = function(f)
  local env = raw_getfenv(level(f))
  if env == G then
    return scripts_env
  end
  return env
end

setfenv = function(f, t)
  if f == 0 then
    error(READONLY, 2)
  end
  return raw_setfenv(level(f), t)
end

-- Binary chunks are refused (Redis' Lua cannot load them); what loads runs in the sandbox.
loadstring = function(s, name)
  if type(s) == 'string' and s:byte(1) == 27 then
    return nil, 'binary chunks are not allowed'
  end
  local f, e = raw_loadstring(s, name)
  if f then
    raw_setfenv(f, scripts_env)
  end
  return f, e
end

load = function(reader, name)
  if type(reader) ~= 'function' then
    return loadstring(reader, name)
  end
  local parts = {}
  while true do
    local piece = reader()
    if piece == nil or piece == '' then
      break
    end
    if type(piece) ~= 'string' then
      return nil, 'reader function must return a string'
    end
    parts[#parts + 1] = piece
  end
  return loadstring(table.concat(parts), name or '=(load)')
end

-- Redis' pcall: an error raised as a Redis error table comes back as its message. A script
-- killed with SCRIPT KILL cannot catch that.
local function settle(ok, ...)
  if ok then
    return ok, ...
  end
  local e = I.unraise((...))
  if I.killed() then
    error(e, 0)
  end
  if type(e) == 'table' and type(e.err) == 'string' then
    return false, e.err
  end
  return false, e, select(2, ...)
end
pcall = function(f, ...)
  return settle(raw_pcall(f, ...))
end
xpcall = function(f, handler)
  local function checked(...)
    if I.killed() then
      return ...
    end
    return handler(...)
  end
  local results = { raw_xpcall(f, checked) }
  if not results[1] and I.killed() then
    error(results[2], 0)
  end
  return unpack(results, 1, table.maxn(results))
end

-- The redis table.
local redis = {}
redis.call = I.redis_call
redis.pcall = function(...)
  return (I.call(I.pack(...)))
end
redis.sha1hex = function(...)
  if select('#', ...) ~= 1 then
    error({ err = 'ERR wrong number of arguments' })
  end
  return I.sha1hex(...)
end
redis.error_reply = function(...)
  if select('#', ...) ~= 1 or type((...)) ~= 'string' then
    return { err = 'ERR wrong number or type of arguments' }
  end
  local text = ...
  if text:sub(1, 1) ~= '-' then
    text = '-' .. text
  end
  return { err = I.error_text(text) }
end
redis.status_reply = function(...)
  if select('#', ...) ~= 1 or type((...)) ~= 'string' then
    return { err = 'ERR wrong number or type of arguments' }
  end
  return { ok = (...) }
end
redis.log = function(...)
  local failure = I.log(...)
  if failure then
    error({ err = failure })
  end
end
redis.setresp = function(...)
  local failure = I.setresp(...)
  if failure then
    error({ err = failure })
  end
end
redis.set_repl = function(...)
  local failure = I.set_repl(...)
  if failure then
    error({ err = failure })
  end
end
redis.acl_check_cmd = function(...)
  local allowed_, failure = I.acl_check_cmd(...)
  if failure then
    error({ err = failure })
  end
  return allowed_
end
redis.replicate_commands = function()
  return true
end
redis.breakpoint = function()
  return false
end
redis.debug = function() end
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.REDIS_VERSION = I.version
redis.REDIS_VERSION_NUM = I.version_num
G.redis = redis

-- Reading an undefined global is an error.
raw_setmetatable(G, {
  __index = function(_, name)
    error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
  end,
})

for _, name in ipairs({ 'redis', 'cjson', 'bit', 'cmsgpack', 'struct', 'string', 'math', 'table', 'coroutine' }) do
  local t = rawget(G, name)
  if type(t) == 'table' then
    raw_rawset(G, name, protect(t))
  end
end

scripts_env = protect(G)
raw_rawset(G, '_G', scripts_env)
I.raw_xpcall = raw_xpcall
return scripts_env
