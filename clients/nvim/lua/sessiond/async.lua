-- Coroutine helpers, so that a flow such as "pick a node, ask how, navigate,
-- show the result" reads top to bottom instead of as nested callbacks.
local M = {}

local unpack = table.unpack or unpack

--- Run `fn` in a new coroutine. Errors are reported instead of being lost in a
--- callback that nobody checks; `on_done(ok, ...)`, when given, receives the
--- outcome (false and a traceback on error) once `fn` has really finished.
---@param fn fun(...): ...
---@param on_done? fun(ok: boolean, ...)
function M.run(fn, on_done, ...)
  local args = { n = select('#', ...), ... }
  local co = coroutine.create(function()
    -- LuaJIT lets a coroutine yield across xpcall, so awaits inside `fn` work.
    local outcome = { n = 0 }
    local function keep(...)
      outcome = { n = select('#', ...), ... }
    end
    keep(xpcall(function()
      return fn(unpack(args, 1, args.n))
    end, debug.traceback))
    if on_done then
      on_done(unpack(outcome, 1, outcome.n))
    elseif not outcome[1] then
      M.report(outcome[2])
    end
  end)
  local ok, err = coroutine.resume(co)
  if not ok then
    M.report(err)
  end
end

--- Show an unexpected error; scheduled because callers may be in a fast event.
function M.report(err)
  vim.schedule(function()
    vim.notify('sessiond: ' .. tostring(err), vim.log.levels.ERROR)
  end)
end

--- Turn a function taking a final callback into a call that suspends the
--- running coroutine until the callback fires. Works whether the callback
--- runs later (an RPC answer) or at once (a stubbed or synchronous UI).
---@param fn fun(callback: fun(...))
---@return ...
function M.await(fn)
  local co = coroutine.running()
  assert(co, 'sessiond.async.await must be called inside a coroutine (use async.run)')
  local results, suspended = nil, false
  fn(function(...)
    if results then
      return -- a second call of the same callback is a bug elsewhere; ignore it
    end
    results = { n = select('#', ...), ... }
    if suspended then
      local ok, err = coroutine.resume(co)
      if not ok then
        M.report(debug.traceback(co, tostring(err)))
      end
    end
  end)
  if not results then
    suspended = true
    coroutine.yield()
  end
  return unpack(results, 1, results.n)
end

--- `vim.ui.select` as a coroutine call: returns the chosen item and its index.
function M.select(items, opts)
  return M.await(function(done)
    vim.ui.select(items, opts, done)
  end)
end

--- `vim.ui.input` as a coroutine call: returns the text, or nil when cancelled.
function M.input(opts)
  return M.await(function(done)
    vim.ui.input(opts, done)
  end)
end

return M
