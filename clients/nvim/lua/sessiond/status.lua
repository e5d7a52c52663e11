-- What the plugin knows about its open sessions, kept current from the
-- daemon's notifications, and the statusline text made from it.
--
-- The statusline function only reads this state: a statusline is evaluated
-- on every redraw, so it must never wait for the daemon.
local inert = require('sessiond.text').inert

local M = {}

local state = {
  sessions = {}, -- sessionId -> session state (see `opened`)
  current = nil, -- the sessionId commands act on
  tokens = {}, -- workDoneToken -> {session = id, kind = 'compaction'|'summary'}
}

-- vim.lsp.rpc decodes JSON null as vim.NIL, which is truthy.
local function value(v)
  if v == vim.NIL then
    return nil
  end
  return v
end

--- 57600 -> "57.6k", 128000 -> "128k", 1234567 -> "1.2M".
---@param n number
---@return string
function M.format_tokens(n)
  n = tonumber(n) or 0
  if n < 1000 then
    return tostring(math.floor(n + 0.5))
  end
  local scaled, unit = n / 1000, 'k'
  -- Round first so that 999,960 reads "1M", not "1000k".
  if tonumber(('%.1f'):format(scaled)) >= 1000 then
    scaled, unit = n / 1e6, 'M'
  end
  local text = ('%.1f'):format(scaled):gsub('%.0$', '')
  return text .. unit
end

--- 128000 -> "128,000", for the places with room for exact numbers.
function M.group_digits(n)
  local text = tostring(math.floor(tonumber(n) or 0))
  local sign, digits = text:match('^(-?)(%d+)$')
  return sign .. digits:reverse():gsub('(%d%d%d)', '%1,'):reverse():gsub('^,', '')
end

--- "ctx 45% 57.6k/128k" for a context/usage result.
---@param usage table
---@return string
function M.format_usage(usage)
  local percent = math.floor((tonumber(usage.percent) or 0) + 0.5)
  return ('ctx %d%% %s/%s'):format(
    percent,
    M.format_tokens(usage.tokens),
    M.format_tokens(usage.contextWindow)
  )
end

-- Many notifications may arrive in one tick; redraw and tell listeners once.
local announce_pending = false
local function changed()
  if announce_pending then
    return
  end
  announce_pending = true
  vim.schedule(function()
    announce_pending = false
    pcall(vim.cmd.redrawstatus)
    vim.api.nvim_exec_autocmds('User', { pattern = 'SessiondStatus', modeline = false })
  end)
end

--- The state of one session (or of the current one), or nil.
---@param session_id? string
function M.get(session_id)
  return state.sessions[session_id or state.current]
end

---@return string|nil
function M.current()
  return state.current
end

--- Make `session_id` the one commands and the statusline are about.
function M.set_current(session_id)
  state.current = session_id
  changed()
end

--- Record a session/open or session/new result and make it current.
---@param result table
function M.opened(result)
  local session = state.sessions[result.sessionId] or {}
  session.id = result.sessionId
  session.path = result.path
  session.name = value(result.name)
  session.leaf_id = value(result.leafId)
  session.entry_count = result.entryCount
  session.compacting = false
  session.busy = nil
  state.sessions[result.sessionId] = session
  M.set_current(result.sessionId)
  return session
end

--- Forget a session (closed, or the daemon went away).
function M.forget(session_id)
  state.sessions[session_id] = nil
  if state.current == session_id then
    state.current = nil
  end
  changed()
end

--- Forget everything: the daemon closes every session when its client goes.
function M.reset()
  state.sessions = {}
  state.current = nil
  state.tokens = {}
  changed()
end

--- Expect $/progress under `token` for `session_id`, of this kind.
---@param kind 'compaction'|'summary'
function M.track(token, session_id, kind)
  state.tokens[token] = { session = session_id, kind = kind }
end

--- Stop expecting progress under `token` (its request has been answered).
function M.untrack(token)
  local tracked = state.tokens[token]
  state.tokens[token] = nil
  local session = tracked and state.sessions[tracked.session]
  -- A request that failed before its "end" must not leave the session busy.
  if session and session.busy and session.busy.token == token then
    session.busy = nil
    changed()
  end
end

--- The pause as told by a usage alone (its announcement, with the figures, came before).
M.PAUSED_UNANNOUNCED = 'Automatic compaction paused: the last compaction left the context over the '
  .. 'threshold, so another one would free too little. Use a model with a larger context window, '
  .. 'lower compaction.keepRecentTokens, or compact manually.'

--- Record a context/usage result.
function M.set_usage(session_id, usage)
  local session = state.sessions[session_id]
  if session and type(usage) == 'table' then
    session.usage = usage
    -- The daemon says whether the no-loop rule pauses automatic compaction, so a
    -- client that missed the one announcement learns it too; a larger window or a
    -- lower keepRecentTokens lifts it.
    if usage.autoCompactionPaused == true then
      session.paused = session.paused or M.PAUSED_UNANNOUNCED
    else
      session.paused = nil
    end
    changed()
  end
end

--- Ask the daemon for fresh usage. At most one request per session is in
--- flight; changes meanwhile cause one more request when it answers.
---@param client sessiond.Client
function M.refresh(client, session_id)
  local session = state.sessions[session_id]
  -- A refresh must not start a daemon that was stopped meanwhile.
  if not session or not client:is_running() then
    return
  end
  if session.refreshing then
    session.stale = true
    return
  end
  session.refreshing = true
  client:request('context/usage', { sessionId = session_id }, function(err, usage)
    session.refreshing = false
    if state.sessions[session_id] ~= session then
      return -- closed meanwhile
    end
    if not err then
      M.set_usage(session_id, usage)
    end
    if session.stale then
      session.stale = false
      M.refresh(client, session_id)
    end
  end)
end

local handlers = {}

function handlers.session_changed(client, params)
  local session = state.sessions[params.sessionId]
  if not session then
    return
  end
  if params.reason == 'close' then
    return M.forget(params.sessionId)
  end
  session.leaf_id = value(params.leafId)
  session.entry_count = params.entryCount
  session.last_change = params.reason
  if params.reason == 'undo' then
    -- The undo dropped a background summary (it was prepared on the branch left) and
    -- put the context back over the threshold: the next turn compacts again.
    session.background = nil
    session.paused = nil
  end
  changed()
  M.refresh(client, params.sessionId)
end

function handlers.compaction_started(_, params)
  local session = state.sessions[params.sessionId]
  if session then
    -- A background summary runs beside the agent, which goes on: no "compacting…".
    if params.reason == 'background' then
      session.background = 'writing'
    else
      session.compacting = true
    end
    changed()
  end
end

function handlers.compaction_ended(client, params)
  local session = state.sessions[params.sessionId]
  if not session then
    return
  end
  if params.reason == 'background' then
    -- Nothing was written: a summary waits for the next compaction, or none does.
    local ready = not params.aborted and not value(params.errorMessage)
    session.background = ready and 'ready' or nil
  else
    session.compacting = false
    session.last_compaction = params
    if params.paused then
      session.paused = value(params.errorMessage) or 'Automatic compaction paused.'
    elseif value(params.entryId) then
      -- A compaction written used (or dropped) the background summary and ended any pause.
      session.background = nil
      session.paused = nil
    end
  end
  changed()
  -- A manual compaction's failure is reported by the command that asked for it;
  -- an automatic one (another client's agent turn) has nobody else to tell.
  local message = value(params.errorMessage)
  if message and params.reason ~= 'manual' then
    vim.notify('sessiond: ' .. message, vim.log.levels.WARN)
  end
  M.refresh(client, params.sessionId)
end

function handlers.progress(_, params)
  local tracked = state.tokens[params.token]
  local session = tracked and state.sessions[tracked.session]
  if not session or type(params.value) ~= 'table' then
    return
  end
  local kind = params.value.kind
  if kind == 'begin' then
    session.busy = { kind = tracked.kind, title = params.value.title, token = params.token }
  elseif kind == 'report' and session.busy and session.busy.token == params.token then
    session.busy.message = value(params.value.message)
    session.busy.percentage = value(params.value.percentage)
  elseif kind == 'end' then
    state.tokens[params.token] = nil
    if session.busy and session.busy.token == params.token then
      session.busy = nil
    end
  end
  changed()
end

local subscriptions = {
  ['session/changed'] = handlers.session_changed,
  ['compaction/started'] = handlers.compaction_started,
  ['compaction/ended'] = handlers.compaction_ended,
  ['$/progress'] = handlers.progress,
}

--- Keep the state current from `client`'s notifications; returns a detach function.
---@param client sessiond.Client
---@return fun()
function M.attach(client)
  local undo = {}
  for method, handler in pairs(subscriptions) do
    undo[#undo + 1] = client:on(method, function(params)
      handler(client, params)
    end)
  end
  undo[#undo + 1] = client:on('client/exit', M.reset)
  return function()
    for _, fn in ipairs(undo) do
      fn()
    end
  end
end

--- The statusline text for the current session: "" without one,
--- "compacting…" or "summarizing…" while the daemon works on it, else its
--- context usage ("ctx 45% 57.6k/128k"), followed by " · summary…" while a
--- summary is written in the background, " · summary ready" once it is, and
--- " · auto-compaction paused" while the no-loop rule pauses automatic compaction.
--- opts.session: another session's id; opts.escape: double "%" for callers
--- that insert the text as statusline format (lualine, %{%...%}).
---@param opts? {session?: string, escape?: boolean}
---@return string
function M.statusline(opts)
  opts = type(opts) == 'table' and opts or {}
  local text = M._text(M.get(opts.session))
  return opts.escape and (text:gsub('%%', '%%%%')) or text
end

function M._text(session)
  if not session then
    return ''
  end
  if session.compacting or (session.busy and session.busy.kind == 'compaction') then
    return 'compacting…'
  end
  if session.busy then
    return 'summarizing…'
  end
  if not session.usage then
    return 'ctx …'
  end
  local marks = ''
  if session.background == 'writing' then
    marks = ' · summary…'
  elseif session.background == 'ready' then
    marks = ' · summary ready'
  end
  if session.paused then
    marks = marks .. ' · auto-compaction paused'
  end
  return M.format_usage(session.usage) .. marks
end

--- Lines describing the current session, for :SessiondStatus.
---@param info? table the daemon's initialize result
---@return string[]
function M.describe(info, session_id)
  local lines = {}
  if info then
    lines[#lines + 1] = ('sessiond %s (protocol %s)'):format(info.serverInfo.version, info.protocolVersion)
  else
    lines[#lines + 1] = 'sessiond: not running'
  end
  local session = M.get(session_id)
  if not session then
    lines[#lines + 1] = 'no session open (:SessiondOpen {file})'
    return lines
  end
  local rows = {
    { 'session', ('%s (%s)'):format(vim.fn.fnamemodify(session.path, ':~'), session.id) },
    { 'name', session.name },
    { 'entries', ('%s, leaf %s'):format(session.entry_count, session.leaf_id or '(none)') },
  }
  local usage = session.usage
  if usage then
    rows[#rows + 1] = {
      'context',
      ('%s of %s tokens (%d%%), compaction at %s%s'):format(
        M.group_digits(usage.tokens),
        M.group_digits(usage.contextWindow),
        math.floor(usage.percent + 0.5),
        M.group_digits(usage.threshold),
        usage.shouldCompact and ': due now' or ''
      ),
    }
  end
  if session.busy then
    rows[#rows + 1] =
      { 'working', session.busy.title .. (session.busy.message and (': ' .. session.busy.message) or '') }
  end
  local last = session.last_compaction
  if last then
    local outcome = last.paused and 'automatic compaction paused'
      or last.skipped and 'nothing to compact'
      or last.aborted and 'aborted'
      or value(last.errorMessage)
      or ('%s -> %s tokens'):format(
        value(last.tokensBefore) and M.group_digits(last.tokensBefore) or '?',
        value(last.tokensAfter) and M.group_digits(last.tokensAfter) or '?'
      )
    local how = last.prepared and (last.reason .. ', summary written in the background') or last.reason
    rows[#rows + 1] = { 'compacted', ('%s (%s)'):format(outcome, how) }
  end
  if session.background == 'writing' then
    rows[#rows + 1] = { 'summary', 'being written in the background; the next compaction will use it' }
  elseif session.background == 'ready' then
    rows[#rows + 1] =
      { 'summary', 'written in the background, ready: the next compaction commits it without waiting' }
  end
  -- The daemon's message says what to do (a larger window, a lower keepRecentTokens, ...).
  rows[#rows + 1] = { 'paused', session.paused }
  for _, row in ipairs(rows) do
    if row[2] ~= nil then
      -- Names, paths and the daemon's messages quote files: one inert line each.
      lines[#lines + 1] = ('%-10s %s'):format(row[1], inert(row[2]))
    end
  end
  return lines
end

return M
