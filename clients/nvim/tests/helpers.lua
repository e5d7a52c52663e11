-- Shared by the tests: where things are, an isolated daemon environment,
-- scripted vim.ui prompts, captured notifications, and session fixtures.
local R = require('runner')

local H = {}

local unpack = table.unpack or unpack

local here = debug.getinfo(1, 'S').source:sub(2)
H.plugin_root = vim.fn.fnamemodify(here, ':p:h:h')
H.repo_root = vim.fn.fnamemodify(H.plugin_root, ':h:h')

H.sessiond = os.getenv('SESSIOND_BIN')
  or vim.fs.joinpath(os.getenv('SESSIOND_VENV') or vim.fs.joinpath(H.repo_root, '.venv'), 'bin', 'sessiond')

-- Everything the daemon could read or write outside the test's files lives
-- here (nvim removes its tempname() directory when it exits).
H.tmp = vim.fn.tempname()
vim.fn.mkdir(H.tmp, 'p')

function H.path(name)
  return vim.fs.joinpath(H.tmp, name)
end

H.env = {
  HOME = H.path('home'),
  XDG_CONFIG_HOME = H.path('config'),
  XDG_DATA_HOME = H.path('data'),
  XDG_STATE_HOME = H.path('state'),
  XDG_CACHE_HOME = H.path('cache'),
  XDG_RUNTIME_DIR = H.path('run'),
  TIKTOKEN_CACHE_DIR = H.path('cache/tiktoken'),
}
for _, dir in pairs(H.env) do
  vim.fn.mkdir(dir, 'p', tonumber('700', 8))
end

H.cmd = { H.sessiond, 'serve', '--stdio', '--log-level', 'WARNING' }

-- Small enough that the fixture session has something to compact.
H.settings = { compaction = { keepRecentTokens = 400 } }

--- The plugin's options for the tests: the real daemon, isolated.
function H.options(extra)
  return vim.tbl_deep_extend('force', {
    cmd = H.cmd,
    env = H.env,
    settings = H.settings,
  }, extra or {})
end

-- ---------------------------------------------------------------- notifications

H.notes = {}
local real_notify = vim.notify
vim.notify = function(message, level)
  H.notes[#H.notes + 1] = { message = message, level = level or vim.log.levels.INFO }
  if os.getenv('SESSIOND_TEST_VERBOSE') then
    real_notify(message, level)
  end
end

function H.clear_notes()
  H.notes = {}
end

--- The first captured notification matching `pattern`, or nil.
function H.note(pattern)
  for _, note in ipairs(H.notes) do
    if note.message:find(pattern) then
      return note
    end
  end
end

-- ---------------------------------------------------------------- prompts

-- Outside a script a prompt is a test bug: the real ones would wait for a
-- key that never comes. Record it, and answer "cancelled".
H.unexpected = {}
local function unexpected_select(items, opts, on_choice)
  H.unexpected[#H.unexpected + 1] = opts and opts.prompt or 'select'
  vim.schedule(function()
    on_choice(nil, nil)
  end)
end
local function unexpected_input(opts, on_confirm)
  H.unexpected[#H.unexpected + 1] = opts and opts.prompt or 'input'
  vim.schedule(function()
    on_confirm(nil)
  end)
end
vim.ui.select, vim.ui.input = unexpected_select, unexpected_input
H.prompts = {}

--- Answer the next vim.ui prompts from `script`, a list of functions:
--- select: fn(items, opts) -> chosen item or nil; input: fn(opts) -> text or nil.
--- Every prompt is recorded in H.prompts as {kind, items, opts}.
function H.script(script)
  H.prompts = {}
  local queue = vim.list_slice(script)
  local function next_answer(kind)
    local answer = table.remove(queue, 1)
    if not answer then
      error('unexpected ' .. kind .. ' prompt')
    end
    return answer
  end
  vim.ui.select = function(items, opts, on_choice)
    H.prompts[#H.prompts + 1] = { kind = 'select', items = items, opts = opts }
    local choice = next_answer('select')(items, opts)
    -- Like a real picker: answer later, on the main loop.
    vim.schedule(function()
      local index
      for i, item in ipairs(items) do
        if item == choice then
          index = i
        end
      end
      on_choice(choice, index)
    end)
  end
  vim.ui.input = function(opts, on_confirm)
    H.prompts[#H.prompts + 1] = { kind = 'input', opts = opts }
    local text = next_answer('input')(opts)
    vim.schedule(function()
      on_confirm(text)
    end)
  end
end

function H.restore_ui()
  vim.ui.select, vim.ui.input = unexpected_select, unexpected_input
end

-- Every test starts with no script, no notes, and owes no prompt.
R.after_each = function()
  H.restore_ui()
  H.clear_notes()
  local unexpected = H.unexpected
  H.unexpected = {}
  R.eq(unexpected, {}, 'prompts nobody scripted')
end

--- A select answer: the first item whose display text matches `pattern`.
function H.pick(pattern)
  return function(items, opts)
    for _, item in ipairs(items) do
      local shown = opts.format_item and opts.format_item(item) or tostring(item)
      if shown:find(pattern) then
        return item
      end
    end
    error(('no item matches %q among:\n%s'):format(
      pattern,
      table.concat(
        vim.tbl_map(function(item)
          return opts.format_item and opts.format_item(item) or tostring(item)
        end, items),
        '\n'
      )
    ))
  end
end

function H.answer(text)
  return function()
    return text
  end
end

-- ---------------------------------------------------------------- sessions

local function words(seed, n)
  local vocabulary = {
    'heading',
    'anchor',
    'table',
    'contents',
    'markdown',
    'parser',
    'slug',
    'fence',
    'duplicate',
    'render',
    'test',
    'file',
    'docs',
    'usage',
    'level',
    'link',
  }
  local out = {}
  for i = 1, n do
    out[i] = vocabulary[((seed * 7 + i * 13) % #vocabulary) + 1]
  end
  return table.concat(out, ' ')
end

function H.user(text)
  return {
    type = 'message',
    message = { role = 'user', content = { { type = 'text', text = text } }, timestamp = 1778749950801 },
  }
end

function H.assistant(text, total_tokens)
  total_tokens = total_tokens or 1200
  return {
    type = 'message',
    message = {
      role = 'assistant',
      content = { { type = 'text', text = text } },
      api = 'anthropic-messages',
      provider = 'anthropic',
      model = 'claude-sonnet-4-5',
      usage = {
        input = total_tokens - 200,
        output = 200,
        cacheRead = 0,
        cacheWrite = 0,
        totalTokens = total_tokens,
        cost = { input = 0, output = 0, cacheRead = 0, cacheWrite = 0, total = 0 },
      },
      stopReason = 'stop',
      timestamp = 1778749951113,
    },
  }
end

--- A request that must succeed; returns its result.
function H.sync(client, method, params)
  local result, err = client:request_sync(method, params, R.timeout_ms)
  if err then
    error(('%s failed: %s'):format(method, vim.inspect(err)), 2)
  end
  return result
end

--- Write a session with two branches and a label through the daemon
--- (session/new + session/append + tree/navigate + session/label), close it,
--- and return {path, ids}. The leaf ends on branch "main", whose last
--- assistant message measured 57,600 tokens: 45% of the default 128k window.
---
---   u1 "Fix the table of contents" [start]
---   a1
---   u2 "Skip headings inside code fences"
---   a2
---   ├─ u3b "Try python-slugify instead"     (left behind)
---   │  a3b
---   └─ u3 "Add GitHub's -1, -2 suffixes"    (main, the leaf)
---      a3  (57,600 tokens measured)
---@param client sessiond.Client
function H.make_session(client, name)
  local path = H.path((name or 'session') .. '.jsonl')
  local new = H.sync(client, 'session/new', { cwd = H.tmp, path = path })
  local id = new.sessionId
  local function append(entries)
    return H.sync(client, 'session/append', { sessionId = id, entries = entries }).ids
  end
  local ids = {}
  local first = append({
    H.user('Fix the table of contents for docs/usage.md. ' .. words(1, 120)),
    H.assistant('I read docs/usage.md and the parser. ' .. words(2, 160)),
    H.user('Skip headings inside code fences. ' .. words(3, 120)),
    H.assistant('Fences are now skipped by the parser. ' .. words(4, 160)),
  })
  ids.u1, ids.a1, ids.u2, ids.a2 = unpack(first)
  local other = append({
    H.user('Try python-slugify instead. ' .. words(5, 80)),
    H.assistant('python-slugify transliterates, so anchors stop matching. ' .. words(6, 80), 30000),
  })
  ids.u3b, ids.a3b = unpack(other)
  H.sync(client, 'tree/navigate', { sessionId = id, targetId = ids.a2 })
  local main = append({
    H.user("Add GitHub's -1, -2 suffixes for duplicate headings. " .. words(7, 80)),
    H.assistant('Duplicate headings now get -1 and -2 anchors. ' .. words(8, 80), 57600),
  })
  ids.u3, ids.a3 = unpack(main)
  local labelled = H.sync(client, 'session/label', { sessionId = id, targetId = ids.u1, label = 'start' })
  ids.label = labelled.entryId
  H.sync(client, 'session/close', { sessionId = id })
  return { path = path, id = id, ids = ids }
end

--- Wait until a Unix socket accepts connections: the file appears at bind(),
--- a moment before the daemon listens.
function H.wait_for_socket(path)
  local deadline = vim.uv.now() + R.timeout_ms
  while vim.uv.now() < deadline do
    if vim.uv.fs_stat(path) then
      local pipe = assert(vim.uv.new_pipe(false))
      local accepted
      pipe:connect(path, function(err)
        accepted = err == nil
      end)
      vim.wait(2000, function()
        return accepted ~= nil
      end, 10)
      pipe:close()
      if accepted then
        return
      end
    end
    vim.wait(50)
    vim.uv.update_time()
  end
  error('timed out waiting for the daemon on ' .. path, 2)
end

--- The lines of a session file, decoded.
function H.read_entries(path)
  local entries = {}
  for _, line in ipairs(vim.fn.readfile(path)) do
    if line ~= '' then
      entries[#entries + 1] = vim.json.decode(line)
    end
  end
  return entries
end

--- Child processes of this Neovim that run sessiond.
function H.daemon_pids()
  local pids = {}
  for _, pid in ipairs(vim.api.nvim_get_proc_children(vim.fn.getpid())) do
    local proc = vim.api.nvim_get_proc(pid)
    if proc and proc.name and proc.name:find('sessiond', 1, true) then
      pids[#pids + 1] = pid
    end
  end
  return pids
end

H.unpack = unpack
return H
