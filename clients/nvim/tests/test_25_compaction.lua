-- The daemon's newer compaction features through the plugin, on the shared daemon:
-- what a summary stands for, undoing a compaction, a summary written in the
-- background, and the no-loop pause. Each test writes its own session.
local R = require('runner')
local H = require('helpers')
local sessiond = require('sessiond')
local status = require('sessiond.status')
local commands = require('sessiond.commands')
local client_mod = require('sessiond.client')

local function client()
  return sessiond.get_client()
end

local function current()
  return status.get()
end

local function open(path)
  vim.cmd('SessiondOpen ' .. vim.fn.fnameescape(path))
  R.wait(function()
    local session = current()
    return session and session.path == path and session.usage ~= nil
  end, 'the session to open')
  return status.current()
end

-- A turn of about 300 tokens (a question of 1,200 characters) whose answer measures
-- `total` tokens. Stamped now: the end-of-turn checks ignore an answer older than the
-- latest compaction.
local function append_turn(id, n, total)
  local question =
    H.user(('question %d: %s'):format(n, ('The parser keeps a stack of open fences. '):rep(30)))
  local answer = H.assistant(('answer %d: the fences are tracked.'):format(n), total)
  local seconds, micros = vim.uv.gettimeofday()
  local now = seconds * 1000 + math.floor(micros / 1000)
  question.message.timestamp, answer.message.timestamp = now, now
  return H.sync(client(), 'session/append', { sessionId = id, entries = { question, answer } }).ids
end

-- A session of its own, with settings that make the daemon's threshold 1,000 tokens.
local function small_session(name, compaction)
  local path = H.path(name .. '.jsonl')
  local id = H.sync(client(), 'session/new', { cwd = H.tmp, path = path }).sessionId
  H.sync(client(), 'settings/update', {
    sessionId = id,
    settings = {
      compaction = vim.tbl_extend('force', { tokenEstimator = 'chars', thresholdTokens = 1000 }, compaction),
    },
  })
  return id, path
end

local function turn_ended(id)
  return H.sync(client(), 'agent/turnEnded', { sessionId = id, contextWindow = 100000 })
end

local covered -- the session the covered and undo tests share

R.test(':SessiondCovered lists what the newest summary stands for, page by page, in a buffer', function()
  local fixture = H.make_session(client(), 'covered')
  local id = open(fixture.path)
  local first = H.sync(client(), 'compaction/run', { sessionId = id }).entry
  for n = 1, 3 do
    append_turn(id, n, 60000 + n)
  end
  local second = H.sync(client(), 'compaction/run', { sessionId = id }).entry
  append_turn(id, 4, 62000) -- after it: what an undo copies back
  covered = { id = id, first = first, second = second }

  -- What each summary replaced, from the path: the entries (compactions left out)
  -- from the previous summary's first kept entry up to its own.
  local path = vim.tbl_filter(function(entry)
    return entry.type ~= 'compaction'
  end, H.sync(client(), 'session/path', { sessionId = id }).entries)
  local function ids_between(from, to)
    local ids, inside = {}, from == nil
    for _, entry in ipairs(path) do
      if entry.id == to then
        break
      end
      inside = inside or entry.id == from
      if inside then
        ids[#ids + 1] = entry.id
      end
    end
    return ids
  end
  local of_first = ids_between(nil, first.firstKeptEntryId)
  local of_second = ids_between(first.firstKeptEntryId, second.firstKeptEntryId)
  R.ok(#of_first > 1 and #of_second > 1, ('more than one page each: %d and %d'):format(#of_first, #of_second))

  local page = commands.covered_page
  commands.covered_page = 1 -- so that the command follows nextOffset
  local ok, err, result = pcall(R.call, function(cb)
    sessiond.covered(nil, cb)
  end, 'the covered entries')
  commands.covered_page = page
  R.ok(ok, err)
  R.eq(err, nil)
  R.eq(result.compactionId, second.id, 'the newest compaction by default')
  R.eq(result.entryIds, of_second, 'the entries it replaced, oldest first')
  R.eq(result.previousCompactionId, first.id)

  local buf = result.buffer
  R.ok(vim.api.nvim_buf_is_valid(buf), 'a scratch buffer')
  R.eq(vim.api.nvim_get_current_buf(), buf, 'shown in the current window')
  R.eq(vim.bo[buf].buftype, 'nofile')
  R.eq(vim.bo[buf].modifiable, false)
  R.match(vim.api.nvim_buf_get_name(buf), 'sessiond://covered/')
  local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  R.eq(lines[1], ('What the summary %s stands for: %d entries, oldest first'):format(second.id, #of_second))
  for i, entry_id in ipairs(of_second) do
    R.match(lines[i + 2], '^' .. entry_id .. '  %l', 'line ' .. i)
  end
  local text = table.concat(lines, '\n')
  R.match(text, '\n%S+  message %(user%) +user: question 1: The parser keeps a stack of open fences%. The')
  R.match(text, '\n%S+  message %(assistant%) +assistant: answer 1: the fences are tracked%.\n')
  R.match(text, '\n%S+  label +label ' .. fixture.ids.u1 .. ': start\n')
  R.match(lines[#lines], '^It updated the summary ' .. first.id .. ': :SessiondCovered ' .. first.id)
  vim.cmd('close')
  local err2, previous = R.call(function(cb)
    sessiond.covered(first.id, cb)
  end, 'the previous summary')
  R.eq(err2, nil)
  R.eq(previous.entryIds, of_first)
  R.eq(previous.previousCompactionId, nil)
  R.match(
    vim.api.nvim_buf_get_lines(previous.buffer, 2, 3, false)[1],
    '^%S+  message %(user%) +user: Fix the table'
  )
  vim.cmd('close')

  vim.cmd('SessiondCovered')
  R.wait(function()
    return vim.api.nvim_buf_get_name(0):find('sessiond://covered/', 1, true) ~= nil
  end, ':SessiondCovered to show its buffer')
  R.match(vim.api.nvim_buf_get_lines(0, 0, 1, false)[1], '^What the summary ' .. second.id .. ' stands for')
  vim.cmd('close')
end)

R.test(
  ':SessiondUndo takes the newest compaction back, says where the leaf is; then nothing to undo',
  function()
    local id = covered.id
    R.eq(status.current(), id)
    local leaf_before = current().leaf_id
    H.clear_notes()
    vim.cmd('SessiondUndo')
    R.wait(function()
      return H.note('compaction undone') ~= nil
    end, 'the undo')
    local entries = H.read_entries(H.path('covered.jsonl'))
    local last = entries[#entries]
    local told = H.note('compaction undone')
    R.match(told.message, '^sessiond: compaction undone, leaf now: assistant: answer 4: the')
    R.ok(vim.fn.strdisplaywidth(told.message) <= vim.v.echospace, 'fits the command line')
    R.eq(told.level, vim.log.levels.INFO)
    R.wait(function()
      return current().leaf_id == last.id
    end, 'session/changed to move the leaf')
    R.eq(current().last_change, 'undo')
    R.ok(last.id ~= leaf_before)
    local marker = vim.tbl_filter(function(entry)
      return entry.customType == 'sessiond.compactionUndone'
    end, entries)
    R.eq(#marker, 1)
    R.eq(marker[1].data.compactionId, covered.second.id, 'the newest compaction was undone')

    -- The context's newest compaction is the first one now; after it, none.
    local err, result = R.call(function(cb)
      sessiond.undo(cb)
    end, 'the second undo')
    R.eq(err, nil)
    R.eq(result.undoneEntryId, covered.first.id)
    H.clear_notes()
    local err3 = R.call(function(cb)
      sessiond.undo(cb)
    end, 'the third undo')
    R.eq(client_mod.error_kind(err3), 'nothingToUndo')
    R.eq(#H.notes, 1)
    R.eq(H.notes[1].message, 'sessiond: nothing to undo: the context has no compaction')
    R.eq(H.notes[1].level, vim.log.levels.INFO, 'not an error')

    local err4 = R.call(function(cb)
      sessiond.covered(nil, cb)
    end, 'covered without a compaction')
    R.eq(err4.data.kind, 'noCompaction')
    R.ok(H.note('the context has no compaction yet'))
  end
)

R.test('the statusline tells a summary written in the background apart, then its commit', function()
  local id, path = small_session('background', { keepRecentTokens = 200, backgroundAt = 0.5 })
  append_turn(id, 1, 300)
  R.eq(open(path), id)
  local seen = {}
  local off = client():on('compaction/started', function(params)
    if params.reason == 'background' then
      seen.writing = sessiond.statusline()
    end
  end)
  append_turn(id, 2, 700) -- past the soft mark (500), under the threshold
  local below = turn_ended(id)
  R.eq(below.action, 'none')
  R.wait(function()
    return sessiond.statusline():find(' · summary ready$') ~= nil
  end, 'the background summary to be ready')
  off()
  R.match(seen.writing, '^ctx %d+%% [%d.]+k?/128k · summary…$', 'shown beside the usage while written')
  local _, lines = R.call(function(cb)
    sessiond.status(cb)
  end, 'the status')
  R.contains(
    lines,
    'summary    written in the background, ready: the next compaction commits it without waiting'
  )

  append_turn(id, 3, 1100)
  local over = turn_ended(id)
  R.ok(over.compaction and over.compaction.prepared, 'the threshold committed it: ' .. vim.inspect(over))
  R.wait(function()
    return current().last_compaction and current().last_compaction.entryId == over.compaction.entryId
  end, 'the commit')
  R.match(sessiond.statusline(), '^ctx %d+%% [%d.]+k?/128k$')
  local _, after = R.call(function(cb)
    sessiond.status(cb)
  end, 'the status')
  R.match(
    table.concat(after, '\n'),
    'compacted +[%d,]+ %-> [%d,]+ tokens %(threshold, summary written in the background%)'
  )
end)

R.test('the statusline shows the no-loop pause; the user is told once what to do', function()
  -- The part a compaction keeps alone is over the threshold: another would free too little.
  local id, path = small_session('paused', { keepRecentTokens = 1500, backgroundAt = 0 })
  for n = 1, 7 do
    append_turn(id, n, 300 * n)
  end
  R.eq(open(path), id)
  local first = turn_ended(id)
  R.ok(first.compaction and first.compaction.tokensAfter > 1000, 'it freed too little')
  H.clear_notes()
  for n = 8, 10 do
    append_turn(id, n, 2500 + 300 * n)
    R.eq(turn_ended(id).autoCompaction.outcome, 'paused')
  end
  R.wait(function()
    return sessiond.statusline():find(' · auto%-compaction paused$') ~= nil
  end, 'the paused statusline')
  local told = vim.tbl_filter(function(note)
    return note.message:find('Automatic compaction paused', 1, true) ~= nil
  end, H.notes)
  R.eq(#told, 1, 'told once, however many turns follow')
  R.eq(told[1].level, vim.log.levels.WARN)
  R.match(told[1].message, 'larger context window')
  R.match(told[1].message, 'keepRecentTokens')
  local _, lines = R.call(function(cb)
    sessiond.status(cb)
  end, 'the status')
  local text = table.concat(lines, '\n')
  R.match(text, '\npaused +Automatic compaction paused: ')
  R.match(text, 'compacted +automatic compaction paused %(threshold%)')

  -- A manual compaction that frees enough lifts it.
  H.sync(
    client(),
    'settings/update',
    { sessionId = id, settings = { compaction = { keepRecentTokens = 200 } } }
  )
  vim.cmd('SessiondCompact')
  R.wait(function()
    return H.note('compacted:') ~= nil
  end, 'the manual compaction')
  R.wait(function()
    return current().paused == nil and sessiond.statusline():find('paused') == nil
  end, 'the pause to be lifted')
end)
