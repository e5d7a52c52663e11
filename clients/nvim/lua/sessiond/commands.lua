-- What the user commands do. Each action is a coroutine flow (prompts and
-- requests in the order the user meets them) and reports its outcome to an
-- optional callback(err, result), which is what the tests observe.
local async = require('sessiond.async')
local client_mod = require('sessiond.client')
local entries = require('sessiond.entries')
local status = require('sessiond.status')
local inert = require('sessiond.text').inert
local tree = require('sessiond.tree')

local M = {}

local levels = vim.log.levels

local function notify(message, level)
  vim.notify('sessiond: ' .. message, level or levels.INFO)
end

local function plugin()
  return require('sessiond')
end

-- Answers that are not failures: nothing to do, or a hook (or the user)
-- cancelled on purpose.
local KIND_LEVELS = {
  nothingToCompact = levels.INFO,
  alreadyCompacted = levels.INFO,
  nothingToUndo = levels.INFO,
  cancelled = levels.WARN,
}

local function report_error(what, err)
  local level = KIND_LEVELS[client_mod.error_kind(err)] or levels.ERROR
  notify(('%s: %s'):format(inert(what), inert(err and err.message or 'unknown error')), level)
end

-- Flows return (result) or (nil, err); turn that into callback(err, result).
local function run(flow, callback)
  async.run(flow, function(ok, result, err)
    if not ok then
      async.report(result)
      err, result = { message = tostring(result), data = { kind = 'internal' } }, nil
    end
    if callback then
      callback(err, result)
    end
  end)
end

local function no_session()
  return { message = 'no session open (:SessiondOpen {file})', data = { kind = 'noSession' } }
end

local function current_session()
  local id = status.current()
  if not id then
    local err = no_session()
    notify(err.message, levels.WARN)
    return nil, err
  end
  return id
end

local function absolute(path)
  return vim.fn.fnamemodify(vim.fs.normalize(path), ':p')
end

-- With no file given: pick one of the sessions of the current directory.
local function choose_session_file(client)
  local listing, err = client:await('session/list', { cwd = vim.fn.getcwd() })
  local sessions = (not err and listing and listing.sessions) or {}
  if #sessions == 0 then
    return async.input({ prompt = 'Session file: ', completion = 'file' })
  end
  local choice = async.select(sessions, {
    prompt = 'sessiond: open which session?',
    kind = 'sessiond.session',
    format_item = function(s)
      local title = s.name ~= vim.NIL and s.name or s.firstMessage
      local modified = s.modified:sub(1, 16):gsub('T', ' ')
      return ('%s  %s (%d entries)'):format(inert(modified), inert(title), s.entryCount)
    end,
  })
  return choice and choice.path
end

--- Open a session file and make it current.
function M.open(path, callback)
  run(function()
    local client = plugin().get_client()
    if not path or path == '' then
      path = choose_session_file(client)
      if not path or path == '' then
        return nil, { message = 'cancelled', data = { kind = 'cancelled' } }
      end
    end
    local result, err = client:await('session/open', { path = absolute(path) })
    if err then
      report_error('cannot open ' .. path, err)
      return nil, err
    end
    status.opened(result)
    status.refresh(client, result.sessionId)
    notify(('opened %s (%d entries)'):format(vim.fn.fnamemodify(result.path, ':~:.'), result.entryCount))
    if result.recovery and result.recovery ~= vim.NIL then
      notify('the file needed repairs; see :SessiondStatus and the .corrupt file beside it', levels.WARN)
    end
    return result
  end, callback)
end

--- Compact the current session, with optional instructions for the summary.
function M.compact(instructions, callback)
  run(function()
    local id, missing = current_session()
    if not id then
      return nil, missing
    end
    local client = plugin().get_client()
    local token = client:progress_token('compact')
    status.track(token, id, 'compaction')
    local result, err = client:await('compaction/run', {
      sessionId = id,
      customInstructions = (instructions and instructions ~= '') and instructions or nil,
      workDoneToken = token,
    })
    status.untrack(token)
    if err then
      report_error('compaction', err)
      return nil, err
    end
    notify(
      ('compacted: %s -> %s tokens'):format(
        status.format_tokens(result.tokensBefore),
        status.format_tokens(result.tokensAfter)
      )
    )
    return result
  end, callback)
end

-- Let the user pick an entry of the current session's tree.
local function pick_entry(client, id, prompt)
  local result, err = client:await('session/tree', { sessionId = id })
  if err then
    report_error('cannot read the tree', err)
    return nil, err
  end
  local cfg = plugin().config.tree or {}
  local items = tree.items(result, cfg)
  if #items == 0 then
    notify('the session has no entries yet')
    return nil, { message = 'empty session', data = { kind = 'empty' } }
  end
  local item = async.select(items, {
    prompt = prompt,
    kind = 'sessiond.tree',
    -- Neovim's own picker (inputlist) wraps a line longer than the screen, so that a
    -- session of long messages shows a few entries a page; "NN: " goes before each.
    format_item = function(it)
      return tree.fit(it.line, vim.o.columns - #tostring(#items) - 3)
    end,
  })
  if not item then
    return nil, { message = 'cancelled', data = { kind = 'cancelled' } }
  end
  return item
end

M.summary_choices = {
  { key = 'none', text = 'No summary' },
  { key = 'summary', text = 'Summarize the branch you leave' },
  { key = 'custom', text = 'Summarize, with custom instructions…' },
}

-- A scratch buffer holding `lines`, shown in a window opened as `where` says.
local function show_scratch(lines, name, filetype, where)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].bufhidden = 'wipe'
  vim.bo[buf].filetype = filetype
  pcall(vim.api.nvim_buf_set_name, buf, name:format(buf))
  if where == 'current' then
    vim.api.nvim_win_set_buf(0, buf)
  else
    local how = ({ vsplit = 'vertical sbuffer', tab = 'tab sbuffer' })[where] or 'sbuffer'
    vim.cmd(('%s %d'):format(how, buf))
  end
  return buf
end

--- Show text in a scratch buffer (the editorText a navigation returns: the
--- user message to edit and send again, as pi puts it in its editor).
---@return integer buf
function M.show_editor_text(text, where)
  return show_scratch(vim.split(text, '\n', { plain = true }), 'sessiond://editor/%d', 'markdown', where)
end

-- The newest compaction on the path from the root to the leaf, or nil.
local function latest_compaction(client, id)
  local result, err = client:await('session/tree', { sessionId = id, previews = false })
  if err then
    return nil, err
  end
  local nodes = {}
  for _, node in ipairs(result.nodes or {}) do
    nodes[node.id] = node
  end
  local at, seen = result.leafId, {}
  while type(at) == 'string' and nodes[at] and not seen[at] do
    seen[at] = true
    if nodes[at].type == 'compaction' then
      return at
    end
    at = nodes[at].parentId
  end
  return nil
end

-- Ids asked for per compaction/covered page, and so entries per session/entries request.
M.covered_page = 1000

-- The entries the compaction `entry_id` stands for, page after page.
local function read_covered(client, id, entry_id)
  local found, previous, offset = {}, nil, 0
  while offset do
    local page, err = client:await('compaction/covered', {
      sessionId = id,
      entryId = entry_id,
      offset = offset,
      limit = M.covered_page,
    })
    if err then
      return nil, err
    end
    previous = type(page.previousCompactionId) == 'string' and page.previousCompactionId or nil
    if #page.entryIds > 0 then
      local read, read_err = client:await('session/entries', { sessionId = id, ids = page.entryIds })
      if read_err then
        return nil, read_err
      end
      vim.list_extend(found, read.entries)
    end
    -- A next page must start further on, or a damaged answer would loop for ever.
    local next_offset = page.nextOffset
    offset = type(next_offset) == 'number' and next_offset > offset and next_offset or nil
  end
  return { entries = found, previous = previous }
end

--- Show, in a scratch buffer, the entries a compaction's summary stands for
--- (default: the newest compaction on the current path), oldest first. The
--- result: {compactionId, entryIds, previousCompactionId?, buffer}.
function M.covered(entry_id, callback)
  run(function()
    local id, missing = current_session()
    if not id then
      return nil, missing
    end
    local client = plugin().get_client()
    local compaction = entry_id
    if not compaction or compaction == '' then
      local err
      compaction, err = latest_compaction(client, id)
      if err then
        report_error('cannot read the tree', err)
        return nil, err
      end
      if not compaction then
        notify('the context has no compaction yet')
        return nil, { message = 'no compaction', data = { kind = 'noCompaction' } }
      end
    end
    local covered, err = read_covered(client, id, compaction)
    if not covered then
      report_error('cannot read what the summary stands for', err)
      return nil, err
    end
    local count = #covered.entries
    local lines = {
      ('What the summary %s stands for: %d %s, oldest first'):format(
        inert(compaction),
        count,
        count == 1 and 'entry' or 'entries'
      ),
      '',
    }
    local ids = {}
    for _, entry in ipairs(covered.entries) do
      ids[#ids + 1] = entry.id
      lines[#lines + 1] = ('%s  %-20s %s'):format(
        inert(entry.id),
        entries.kind(entry),
        entries.preview(entry)
      )
    end
    if covered.previous then
      lines[#lines + 1] = ''
      lines[#lines + 1] = ('It updated the summary %s: :SessiondCovered %s shows what that one stands for.'):format(
        inert(covered.previous),
        inert(covered.previous)
      )
    end
    local buf = show_scratch(lines, 'sessiond://covered/%d', 'sessiond-covered', plugin().config.editor)
    vim.bo[buf].modifiable = false
    return { compactionId = compaction, entryIds = ids, previousCompactionId = covered.previous, buffer = buf }
  end, callback)
end

--- Take the context's newest compaction back (compaction/undo appends: nothing
--- is deleted) and say where the leaf is now.
function M.undo(callback)
  run(function()
    local id, missing = current_session()
    if not id then
      return nil, missing
    end
    local client = plugin().get_client()
    local result, err = client:await('compaction/undo', { sessionId = id })
    if err then
      if client_mod.error_kind(err) == 'nothingToUndo' then
        notify('nothing to undo: the context has no compaction')
      else
        report_error('undo', err)
      end
      return nil, err
    end
    -- The leaf is the last entry copied back, or the compaction's parent when none followed it.
    local read = client:await('session/entry', { sessionId = id, entryId = result.leafId })
    local leaf = read and type(read.entry) == 'table' and entries.preview(read.entry) or inert(result.leafId)
    -- A message wider than the command line stops Neovim at "Press ENTER".
    local room = vim.v.echospace - vim.fn.strdisplaywidth('sessiond: compaction undone, leaf now: ')
    notify('compaction undone, leaf now: ' .. tree.fit(leaf, math.max(room, 20)))
    return result
  end, callback)
end

--- Pick an entry, then how to leave the current branch, then navigate.
--- The result is tree/navigate's, plus `buffer` when editorText was shown.
function M.tree(callback)
  run(function()
    local id, missing = current_session()
    if not id then
      return nil, missing
    end
    local client = plugin().get_client()
    local item, cancelled = pick_entry(client, id, 'sessiond: go to')
    if not item then
      return nil, cancelled
    end
    if item.leaf then
      notify('already there')
      return { cancelled = false, leafId = item.id }
    end
    local how = async.select(M.summary_choices, {
      prompt = 'sessiond: summarize the branch you leave?',
      kind = 'sessiond.summary',
      format_item = function(choice)
        return choice.text
      end,
    })
    if not how then
      return nil, { message = 'cancelled', data = { kind = 'cancelled' } }
    end
    local params = { sessionId = id, targetId = item.id, summarize = how.key ~= 'none' }
    if how.key == 'custom' then
      local text = async.input({ prompt = 'Instructions for the summary: ' })
      if text == nil then
        return nil, { message = 'cancelled', data = { kind = 'cancelled' } }
      end
      params.customInstructions = text ~= '' and text or nil
    end
    if params.summarize then
      params.workDoneToken = client:progress_token('tree')
      status.track(params.workDoneToken, id, 'summary')
    end
    local result, err = client:await('tree/navigate', params)
    if params.workDoneToken then
      status.untrack(params.workDoneToken)
    end
    if err then
      report_error('navigation', err)
      return nil, err
    end
    if result.cancelled then
      notify(result.aborted and 'navigation aborted' or 'navigation cancelled', levels.WARN)
      return result
    end
    local editor_text = result.editorText ~= vim.NIL and result.editorText or nil
    if editor_text then
      result.buffer = M.show_editor_text(editor_text, plugin().config.editor)
    end
    local summarized = result.summaryEntry and result.summaryEntry ~= vim.NIL
    local suffix = summarized and ' (branch summarized)' or ''
    -- A message wider than the command line stops Neovim at "Press ENTER" before it
    -- draws the window with the editor text just opened.
    local room = vim.v.echospace - vim.fn.strdisplaywidth('sessiond: moved to ' .. suffix)
    notify(('moved to %s%s'):format(tree.fit(item.text, room), suffix))
    return result
  end, callback)
end

--- Label an entry (picked from the tree). Without `text`, ask for it; an
--- empty label clears it.
function M.label(text, callback)
  run(function()
    local id, missing = current_session()
    if not id then
      return nil, missing
    end
    local client = plugin().get_client()
    local item, cancelled = pick_entry(client, id, 'sessiond: label which entry?')
    if not item then
      return nil, cancelled
    end
    local label = text
    if label == nil or label == '' then
      label = async.input({ prompt = 'Label (empty clears it): ', default = item.label or '' })
      if label == nil then
        return nil, { message = 'cancelled', data = { kind = 'cancelled' } }
      end
    end
    local result, err = client:await('session/label', {
      sessionId = id,
      targetId = item.id,
      label = label ~= '' and label or nil,
    })
    if err then
      report_error('cannot label', err)
      return nil, err
    end
    notify(label ~= '' and ('labelled %q'):format(label) or 'label cleared')
    return result
  end, callback)
end

--- Show the daemon and the current session; the lines go to the callback.
function M.status(callback)
  run(function()
    local sessiond = plugin()
    local client = sessiond.get_client()
    local id = status.current()
    if id and client:is_running() then
      local usage = client:await('context/usage', { sessionId = id })
      if usage then
        status.set_usage(id, usage)
      end
    end
    local lines = status.describe(client:is_running() and client.info or nil)
    notify(table.concat(lines, '\n'))
    return lines
  end, callback)
end

--- Stop the daemon; the callback gets the exit {code, signal, clean}.
function M.stop(callback)
  local client = plugin().get_client()
  client:stop(function(exit)
    if exit and not exit.clean then
      notify(('stopped (exit code %s, signal %s)'):format(exit.code, exit.signal), levels.WARN)
    end
    if callback then
      callback(nil, exit)
    end
  end)
end

local function args_text(opts)
  return opts.args ~= '' and opts.args or nil
end

--- Create the user commands (again, harmlessly, on a second setup).
function M.register()
  local create = vim.api.nvim_create_user_command
  create('SessiondOpen', function(opts)
    -- Command-line semantics: `:SessiondOpen %` opens the current file.
    local path = args_text(opts)
    M.open(path and vim.fn.expand(path))
  end, { nargs = '?', complete = 'file', desc = 'sessiond: open a session file' })
  create('SessiondCompact', function(opts)
    M.compact(args_text(opts))
  end, { nargs = '*', desc = 'sessiond: compact the session [custom instructions]' })
  create('SessiondTree', function()
    M.tree()
  end, { nargs = 0, desc = 'sessiond: go to another point of the session tree' })
  create('SessiondUndo', function()
    M.undo()
  end, { nargs = 0, desc = 'sessiond: undo the last compaction of the session' })
  create('SessiondCovered', function(opts)
    M.covered(args_text(opts))
  end, { nargs = '?', desc = 'sessiond: show what a compaction summary stands for [compaction id]' })
  create('SessiondLabel', function(opts)
    M.label(args_text(opts))
  end, { nargs = '*', desc = 'sessiond: label an entry [label]' })
  create('SessiondStatus', function()
    M.status()
  end, { nargs = 0, desc = 'sessiond: show the daemon and the session' })
  create('SessiondStop', function()
    M.stop()
  end, { nargs = 0, desc = 'sessiond: stop the daemon' })
end

return M
