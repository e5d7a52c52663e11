-- One connection to a sessiond daemon, on Neovim's own JSON-RPC client
-- (vim.lsp.rpc): the daemon speaks JSON-RPC 2.0 with LSP framing, so nothing
-- else is needed. The connection starts on first use, queues requests until
-- `initialize` has been answered, and fans notifications out to listeners.
local async = require('sessiond.async')

local M = {}

M.PROTOCOL_VERSION = '1'
M.VERSION = '0.1.0'

-- Errors made on this side carry a code outside JSON-RPC's reserved range
-- and the same `data.kind` convention as the daemon's.
M.CLIENT_ERROR = -32900

M.HOOKS = {
  'session_before_compact',
  'session.compacting',
  'session_compact',
  'session_before_tree',
  'session_tree',
}

local error_mt = {
  __tostring = function(err)
    return err.message
  end,
}

-- A one-shot timer whose callback runs on the main loop; returns a canceller.
-- (vim.defer_fn's timer cannot be stopped without leaking its handle.)
local function after(ms, fn)
  local timer = assert(vim.uv.new_timer())
  local function close()
    if not timer:is_closing() then
      timer:stop()
      timer:close()
    end
  end
  timer:start(ms, 0, function()
    close()
    vim.schedule(fn)
  end)
  return close
end

local function client_error(kind, message)
  return setmetatable({ code = M.CLIENT_ERROR, message = message, data = { kind = kind } }, error_mt)
end

--- What a request answered with RequestCancelled gets (the daemon's own
--- message is not passed on by vim.lsp.rpc).
function M.cancelled_error(method)
  return setmetatable({
    code = vim.lsp.protocol.ErrorCodes.RequestCancelled,
    message = method .. ' was cancelled',
    data = { kind = 'cancelled' },
  }, error_mt)
end

--- The `data.kind` of an error answer, or nil.
function M.error_kind(err)
  return type(err) == 'table' and type(err.data) == 'table' and err.data.kind or nil
end

---@class sessiond.Client
---@field opts table
---@field state 'stopped'|'starting'|'running'|'stopping'
---@field info table|nil the initialize result
---@field exit table|nil {code, signal, clean} of the last process
local Client = {}
Client.__index = Client

--- opts: cmd, socket, env, cwd, settings (initialize.settings), hooks,
--- start_timeout_ms, stop_timeout_ms, name.
---@return sessiond.Client
function M.new(opts)
  return setmetatable({
    opts = opts or {},
    state = 'stopped',
    rpc = nil,
    info = nil,
    exit = nil,
    -- Callbacks waiting for the daemon to be ready, and for it to be gone.
    starting = {},
    stopping = {},
    listeners = {},
    -- Requests sent and not answered yet: {[key] = answer function}.
    pending = {},
    -- Each spawn gets a number so that a late on_exit of an old process
    -- cannot tear down the one that replaced it.
    generation = 0,
    shutdown_sent = false,
    tokens = 0,
  }, Client)
end

function Client:is_running()
  return self.state == 'running'
end

--- Subscribe to a notification method, or to the client's own events
--- `client/ready` (initialize result) and `client/exit` ({code, signal, clean}).
--- Returns a function that unsubscribes.
---@param method string
---@param fn fun(params: any, method: string)
---@return fun()
function Client:on(method, fn)
  local list = self.listeners[method] or {}
  self.listeners[method] = list
  list[#list + 1] = fn
  return function()
    for i, f in ipairs(list) do
      if f == fn then
        table.remove(list, i)
        return
      end
    end
  end
end

function Client:_emit(method, params)
  -- Copy: a listener may unsubscribe itself while we iterate.
  for _, fn in ipairs(vim.list_slice(self.listeners[method] or {})) do
    local ok, err = pcall(fn, params, method)
    if not ok then
      async.report(('listener for %s failed: %s'):format(method, err))
    end
  end
end

function Client:_hook(name)
  local hooks = self.opts.hooks or {}
  return hooks[name]
end

function Client:_capabilities()
  local hooks = {}
  for _, name in ipairs(M.HOOKS) do
    if type(self:_hook(name)) == 'function' then
      hooks[#hooks + 1] = name
    end
  end
  return { hooks = hooks, llm = false }
end

function Client:_notification(method, params)
  local hook = method:match('^hooks/(.+)$')
  if hook and self:_hook(hook) then
    local ok, err = pcall(self:_hook(hook), params)
    if not ok then
      async.report(('hook %s failed: %s'):format(hook, err))
    end
  end
  self:_emit(method, params)
end

-- Runs inside vim.lsp.rpc's coroutine, so a hook may itself await (ask the
-- user with async.select, say) before it answers.
function Client:_server_request(method, params)
  local rpc = vim.lsp.rpc
  local codes = vim.lsp.protocol.ErrorCodes
  local hook = method:match('^hooks/(.+)$')
  local handler = hook and self:_hook(hook)
  if not handler then
    return nil, rpc.rpc_response_error(codes.MethodNotFound, 'sessiond.nvim does not handle ' .. method)
  end
  local ok, answer = pcall(handler, params)
  if not ok then
    return nil, rpc.rpc_response_error(codes.InternalError, tostring(answer))
  end
  -- The daemon reads an empty object as "no answer"; JSON null would be an error.
  if answer == nil or (type(answer) == 'table' and next(answer) == nil) then
    return vim.empty_dict()
  end
  return answer
end

local function finish_all(list, ...)
  for _, fn in ipairs(list) do
    local ok, err = pcall(fn, ...)
    if not ok then
      async.report(err)
    end
  end
end

function Client:_ready(err, info)
  local waiting = self.starting
  self.starting = {}
  finish_all(waiting, err, info)
end

--- Start the daemon (or connect to it) and initialize; `callback(err, info)`.
--- Calling it while starting just waits for the same start.
---@param callback? fun(err: table|nil, info: table|nil)
function Client:start(callback)
  callback = callback or function() end
  if self.state == 'running' then
    return callback(nil, self.info)
  end
  table.insert(self.starting, callback)
  if self.state ~= 'stopped' then
    return -- starting: answered with the rest; stopping: restarted by _exited
  end
  self:_spawn()
end

-- vim.lsp.rpc's errors that mean the daemon's stream cannot be read any more.
local UNREADABLE = {
  [vim.lsp.rpc.client_errors.INVALID_SERVER_JSON] = true,
  [vim.lsp.rpc.client_errors.INVALID_SERVER_MESSAGE] = true,
  [vim.lsp.rpc.client_errors.READ_ERROR] = true,
}

function Client:_spawn()
  self.state = 'starting'
  self.generation = self.generation + 1
  self.shutdown_sent = false
  self.info = nil
  local generation = self.generation
  local dispatchers = {
    notification = function(method, params)
      if generation == self.generation then
        self:_notification(method, params)
      end
    end,
    server_request = function(method, params)
      return self:_server_request(method, params)
    end,
    on_exit = function(code, signal)
      -- Called from a libuv callback, where most of the API is off limits.
      vim.schedule(function()
        self:_exited(generation, code, signal)
      end)
    end,
    on_error = function(code)
      -- A body that is not JSON-RPC leaves the stream untrustworthy (the daemon never
      -- sends one): end the connection, so that the requests waiting are answered
      -- (by _exited) instead of never, and the next command starts afresh.
      if UNREADABLE[code] and generation == self.generation then
        self:_terminate()
      end
    end,
  }
  local socket = self.opts.socket
  if socket and not vim.uv.fs_stat(socket) then
    -- Fail now: vim.lsp.rpc.connect would only warn and never call back.
    self.state = 'stopped'
    self:_ready(
      client_error(
        'startFailed',
        ('no sessiond socket at %s (sessiond serve --socket %s)'):format(socket, socket)
      )
    )
    return
  end
  local ok, handle = pcall(function()
    if socket then
      return vim.lsp.rpc.connect(socket)(dispatchers)
    end
    return vim.lsp.rpc.start(self.opts.cmd, dispatchers, { env = self.opts.env, cwd = self.opts.cwd })
  end)
  if not ok then
    self.state = 'stopped'
    self:_ready(client_error('startFailed', 'cannot start sessiond: ' .. tostring(handle)))
    return
  end
  self.rpc = handle

  -- A socket nobody listens on never calls back: give up after a while.
  local cancel_timeout = after(self.opts.start_timeout_ms or 15000, function()
    if generation == self.generation and self.state == 'starting' then
      self:_ready(client_error('startFailed', 'sessiond did not answer initialize in time'))
      self:_terminate()
    end
  end)

  local params = {
    clientInfo = { name = self.opts.name or 'sessiond.nvim', version = M.VERSION },
    protocolVersion = M.PROTOCOL_VERSION,
    capabilities = self:_capabilities(),
    settings = self.opts.settings,
  }
  handle.request('initialize', params, function(err, result)
    if generation ~= self.generation or self.state ~= 'starting' then
      return
    end
    cancel_timeout()
    if err then
      self:_ready(client_error('startFailed', 'sessiond refused initialize: ' .. tostring(err.message)))
      self:_terminate()
      return
    end
    self.info = result
    self.state = 'running'
    handle.notify('initialized', vim.empty_dict())
    self:_emit('client/ready', result)
    self:_ready(nil, result)
  end)
end

function Client:_terminate()
  if self.rpc and not self.rpc.is_closing() then
    self.rpc.terminate()
  end
end

function Client:_exited(generation, code, signal)
  -- A socket reports its end twice (our terminate and the read loop's EOF).
  if generation ~= self.generation or self.state == 'stopped' then
    return
  end
  local clean = self.shutdown_sent and code == 0
  self.exit = { code = code, signal = signal, clean = clean }
  local was = self.state
  self.state = 'stopped'
  self.rpc = nil
  self.info = nil
  if was == 'starting' then
    self:_ready(client_error('startFailed', ('sessiond exited during start (code %s)'):format(code)))
  end
  local pending = self.pending
  self.pending = {}
  for _, answer in pairs(pending) do
    answer(client_error('notRunning', ('sessiond exited (code %s, signal %s)'):format(code, signal)), nil)
  end
  local stopping = self.stopping
  self.stopping = {}
  self:_emit('client/exit', self.exit)
  finish_all(stopping, self.exit)
  -- Requests that arrived while stopping asked for a fresh daemon.
  if #self.starting > 0 then
    self:_spawn()
  end
end

--- Shut the daemon down the LSP way (shutdown, then exit), terminating it if
--- it does not go in time. On a socket only this connection ends.
--- `callback(exit)` gets {code, signal, clean}.
---@param callback? fun(exit: table|nil)
function Client:stop(callback)
  callback = callback or function() end
  if self.state == 'stopped' then
    return callback(self.exit)
  end
  table.insert(self.stopping, callback)
  if self.state == 'stopping' then
    return
  end
  local generation = self.generation
  local was = self.state
  self.state = 'stopping'
  -- Whoever waited for a start will not get one from this process.
  self:_ready(client_error('notRunning', 'sessiond is stopping'))
  local cancel_timeout = after(self.opts.stop_timeout_ms or 3000, function()
    if generation == self.generation and self.state == 'stopping' then
      self:_terminate()
    end
  end)
  table.insert(self.stopping, 1, cancel_timeout)
  if was == 'starting' then
    self:_terminate()
    return
  end
  local rpc = self.rpc
  rpc.request('shutdown', nil, function()
    self.shutdown_sent = true
    rpc.notify('exit')
    if self.opts.socket then
      -- The daemon keeps running for its other clients; only our end closes.
      self:_terminate()
    end
  end)
end

--- Send a request, starting the daemon first if needed; `callback(err, result)`.
---@param method string
---@param params table|nil
---@param callback? fun(err: table|nil, result: any)
function Client:request(method, params, callback)
  callback = callback or function() end
  self:start(function(err)
    if err then
      return callback(err, nil)
    end
    -- Answer exactly once, whichever of the paths below gets there first.
    local pending = self.pending
    local entry = {}
    local function answer(e, result)
      if pending[entry] then
        pending[entry] = nil
        callback(e, result)
      end
    end
    -- vim.lsp.rpc never calls back for requests in flight when the process
    -- dies; _exited answers those from here.
    pending[entry] = answer
    -- vim.lsp.rpc also drops any error answer with code -32800
    -- (RequestCancelled) as "RPC-internal", without calling back; sessiond
    -- uses that code for a compaction cancelled by a hook or aborted. The
    -- reply notification still comes first, so one tick after it we know
    -- whether the answer was eaten.
    local ok = self.rpc.request(method, params, answer, function()
      vim.schedule(function()
        answer(M.cancelled_error(method), nil)
      end)
    end)
    if not ok then
      answer(client_error('notRunning', 'sessiond is not running'), nil)
    end
  end)
end

--- Coroutine variant of `request`: returns result, err.
---@return any result, table|nil err
function Client:await(method, params)
  return async.await(function(done)
    self:request(method, params, function(err, result)
      done(result, err)
    end)
  end)
end

--- Blocking variant for scripts and tests (processes events while waiting).
---@return any result, table|nil err
function Client:request_sync(method, params, timeout_ms)
  local done, result, err = false, nil, nil
  self:request(method, params, function(e, r)
    done, result, err = true, r, e
  end)
  if not vim.wait(timeout_ms or 10000, function()
    return done
  end, 10) then
    return nil, client_error('timeout', method .. ' timed out')
  end
  return result, err
end

--- Send a notification (after starting, if needed).
function Client:notify(method, params)
  self:start(function(err)
    if not err then
      self.rpc.notify(method, params)
    end
  end)
end

--- A fresh token for `workDoneToken`, so that $/progress can be matched to
--- the request that caused it.
function Client:progress_token(prefix)
  self.tokens = self.tokens + 1
  return ('%s-%d'):format(prefix or 'sessiond', self.tokens)
end

M.Client = Client
return M
