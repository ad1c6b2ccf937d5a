-- The globals of function libraries. While a library's top level runs (FUNCTION LOAD) they
-- hold only `redis.register_function`, `redis.log`, the log levels and the version fields,
-- as in Redis; the functions it registered later see every global scripts have. Both views
-- are read-only.
--
-- Given the Rust `register` function and the scripts' globals; returns the libraries'
-- globals, their metatable (whose `__index` the engine switches) and the load view.

local register, scripts_env = ...
local error, tostring, setmetatable = error, tostring, setmetatable

local function refuse()
  error('Attempt to modify a readonly table', 2)
end

local function missing(_, name)
  error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 0)
end

local function view(t)
  return setmetatable({}, { __index = t, __newindex = refuse, __metatable = false })
end

local redis = scripts_env.redis
local api = {
  register_function = function(...)
    local failure = register(...)
    if failure then
      error(failure)
    end
  end,
  log = redis.log,
  LOG_DEBUG = redis.LOG_DEBUG,
  LOG_VERBOSE = redis.LOG_VERBOSE,
  LOG_NOTICE = redis.LOG_NOTICE,
  LOG_WARNING = redis.LOG_WARNING,
  REDIS_VERSION = redis.REDIS_VERSION,
  REDIS_VERSION_NUM = redis.REDIS_VERSION_NUM,
}
setmetatable(api, { __index = missing })
local load_api = setmetatable({ redis = view(api) }, { __index = missing })
local load_view = view(load_api)

local env_meta = { __index = load_view, __newindex = refuse, __metatable = false }
local env = setmetatable({}, env_meta)
return env, env_meta, load_view
