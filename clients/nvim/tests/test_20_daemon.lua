-- The plugin against the real daemon, in the order a user meets it: start,
-- open, look at the tree, compact, navigate, label, status. The tests of this
-- file share one daemon and one session, so they run in order.
local R = require('runner')
local H = require('helpers')
local sessiond = require('sessiond')
local status = require('sessiond.status')
local tree = require('sessiond.tree')
local async = require('sessiond.async')
local client_mod = require('sessiond.client')

local fixture -- the session the tests below share (see H.make_session)

local function client()
  return sessiond.get_client()
end

local function current()
  return status.get()
end

-- Run the tree picker and return its items, choosing nothing.
local function picker_items()
  local items
  H.script({
    function(list)
      items = list
      return nil
    end,
  })
  local err = R.call(function(cb)
    sessiond.tree(cb)
  end, 'the cancelled picker')
  R.eq(client_mod.error_kind(err), 'cancelled')
  return items
end

local function line_of(items, id)
  local item = tree.find(items, id)
  R.ok(item, 'an item for ' .. id)
  return item.line
end

R.test('the daemon starts and answers initialize', function()
  local err, info = R.call(function(cb)
    client():start(cb)
  end, 'initialize')
  R.eq(err, nil)
  R.eq(info.serverInfo.name, 'sessiond')
  R.eq(info.protocolVersion, '1')
  R.contains(info.capabilities.methods, 'tree/navigate')
  R.contains(info.capabilities.notifications, 'compaction/started')
  R.ok(client():is_running())
  R.eq(#H.daemon_pids(), 1, 'one daemon process')
end)

R.test('requests made before the daemon is ready wait for it; settings reach it', function()
  -- With the context_window option, as setup() would pass it.
  local config = require('sessiond.config')
  -- And a key the daemon does not know: it warns with window/logMessage.
  local settings = config.initialize_settings(config.resolve({
    context_window = 256000,
    settings = { compaction = { noSuchKey = 1 } },
  }))
  local other = client_mod.new({ cmd = H.cmd, env = H.env, settings = settings })
  local logged = {}
  other:on('window/logMessage', function(params)
    logged[#logged + 1] = params
  end)
  local answers = {}
  for i = 1, 3 do
    other:request('session/list', { sessionDir = H.tmp }, function(err, result)
      answers[i] = err or result
    end)
  end
  R.eq(other.state, 'starting')
  R.wait(function()
    return #answers == 3 and answers[1] and answers[2] and answers[3]
  end, 'three answers')
  for i = 1, 3 do
    R.eq(type(answers[i].sessions), 'table', 'answer ' .. i)
  end
  local effective = H.sync(other, 'settings/get', vim.empty_dict())
  R.eq(effective.settings.context.defaultContextWindow, 256000, 'the daemon took the context window')
  R.eq(#logged, 1, 'one warning')
  R.eq(logged[1].type, 2)
  R.match(logged[1].message, 'noSuchKey')
  local exit = R.call(function(cb)
    other:stop(cb)
  end, 'the second daemon to stop')
  R.eq(exit.code, 0)
  R.eq(exit.clean, true)
end)

R.test('coroutine variant: await returns results and error objects', function()
  local outcome
  async.run(function()
    local listing, err = client():await('session/list', { sessionDir = H.tmp })
    local missing, err2 = client():await('context/usage', { sessionId = 'no-such-session' })
    return { listing = listing, err = err, missing = missing, err2 = err2 }
  end, function(ok, value)
    outcome = ok and value or { failure = value }
  end)
  R.wait(function()
    return outcome ~= nil
  end, 'the coroutine')
  R.eq(outcome.failure, nil)
  R.eq(outcome.err, nil)
  R.eq(type(outcome.listing.sessions), 'table')
  R.eq(outcome.missing, nil)
  R.eq(client_mod.error_kind(outcome.err2), 'notFound')
  R.match(tostring(outcome.err2.message), 'no%-such%-session')
end)

R.test(':SessiondOpen opens a session written by the test', function()
  fixture = H.make_session(client(), 'shared')
  R.eq(#H.read_entries(fixture.path), 10, 'header and nine entries on disk')
  vim.cmd('SessiondOpen ' .. vim.fn.fnameescape(fixture.path))
  R.wait(function()
    return status.current() == fixture.id and current().usage ~= nil
  end, 'the session to open')
  R.eq(current().entry_count, 9)
  R.eq(current().leaf_id, fixture.ids.label, 'labelling moved the leaf, as in pi')
  R.ok(H.note('opened .*shared%.jsonl %(9 entries%)'), 'the user is told')
end)

R.test('the statusline shows the context usage', function()
  R.eq(sessiond.statusline(), 'ctx 45% 57.6k/128k')
  R.eq(sessiond.statusline({ escape = true }), 'ctx 45%% 57.6k/128k')
  R.eq(status.statusline({ session = 'unknown' }), '')
end)

R.test('the tree picker lists entries, labels and the active path', function()
  local items = picker_items()
  local ids = fixture.ids
  R.eq(#items, 8, 'eight entries; the label entry is shown as a label')
  R.match(line_of(items, ids.u1), '^• %[start%] user: Fix the table of contents')
  R.match(line_of(items, ids.a2), '^• assistant: Fences are now skipped')
  R.match(line_of(items, ids.u3b), '^  ├─ user: Try python%-slugify instead')
  R.match(line_of(items, ids.a3b), '^  │  assistant: python%-slugify transliterates')
  R.match(line_of(items, ids.u3), "^• └─ user: Add GitHub's %-1, %-2 suffixes")
  R.match(line_of(items, ids.a3), '^▶    assistant: Duplicate headings now get')
  R.eq(tree.find(items, ids.a3).leaf, true)
  R.eq(tree.find(items, ids.u3b).active, false)
  R.eq(tree.find(items, ids.u3b).depth, 1)
  R.eq(H.prompts[1].opts.prompt, 'sessiond: go to')
  R.eq(current().leaf_id, ids.label, 'cancelling moved nothing')
end)

R.test('session/changed notifications update the entries and the usage', function()
  local changes = {}
  local off = client():on('session/changed', function(params)
    changes[#changes + 1] = params
  end)
  -- Another writer (an agent frontend, say) appends a turn to the session.
  local appended = H.sync(client(), 'session/append', {
    sessionId = fixture.id,
    entries = {
      H.user('Also handle headings with trailing #s.'),
      H.assistant('Done: trailing #s are stripped.', 64000),
    },
  })
  R.wait(function()
    return sessiond.statusline() == 'ctx 50% 64k/128k'
  end, 'the statusline to follow the append')
  off()
  R.eq(#changes, 1)
  R.eq(changes[1].reason, 'append')
  R.eq(changes[1].appendedIds, appended.ids)
  R.eq(current().entry_count, 11)
  R.eq(current().leaf_id, appended.ids[2])
  fixture.ids.u4, fixture.ids.a4 = appended.ids[1], appended.ids[2]
end)

R.test(':SessiondCompact writes a compaction entry (offline summarizer)', function()
  local seen = { progress = {} }
  local offs = {
    client():on('compaction/started', function(params)
      seen.started = params
      seen.line_while_running = sessiond.statusline()
    end),
    client():on('compaction/ended', function(params)
      seen.ended = params
    end),
    client():on('$/progress', function(params)
      seen.progress[#seen.progress + 1] = params.value.kind
    end),
  }
  vim.cmd('SessiondCompact Keep the anchor work')
  R.wait(function()
    return H.note('compacted:') ~= nil
  end, 'the compaction')
  for _, off in ipairs(offs) do
    off()
  end
  R.eq(seen.started.reason, 'manual')
  R.eq(seen.line_while_running, 'compacting…')
  R.eq(seen.ended.aborted, false)
  R.ok(seen.ended.entryId ~= nil and seen.ended.entryId ~= vim.NIL, 'the entry id')
  R.eq(seen.progress[1], 'begin')
  R.eq(seen.progress[#seen.progress], 'end')

  local entries = H.read_entries(fixture.path)
  local last = entries[#entries]
  R.eq(last.type, 'compaction', 'the compaction is on disk')
  R.eq(last.id, seen.ended.entryId)
  R.match(last.summary, 'Offline extractive summary')
  R.eq(current().leaf_id, last.id)

  R.wait(function()
    return current().usage and current().usage.tokens < 64000
  end, 'the usage to drop')
  R.match(sessiond.statusline(), '^ctx %d+%% [%d.]+k?/128k$')

  local items = picker_items()
  local item = tree.find(items, last.id)
  R.eq(item.type, 'compaction')
  R.eq(item.leaf, true)
  R.match(item.line, '^▶ +compaction %([%d,]+ tokens before%)')
end)

R.test('compaction/started and ended alone drive the statusline', function()
  -- A compaction the plugin did not ask for (an agent's, say): no
  -- workDoneToken, so no $/progress; only the compaction notifications.
  local text = ('The parser now keeps a stack of open fences and skips their lines. '):rep(12)
  H.sync(client(), 'session/append', {
    sessionId = fixture.id,
    entries = {
      H.user('Now make the anchors unique across files. ' .. text),
      H.assistant('Anchors are unique across files now. ' .. text, 70000),
      H.user('And add a --max-depth flag. ' .. text),
      H.assistant('Added --max-depth with a default of 6. ' .. text, 72000),
    },
  })
  local seen = { progress = 0 }
  local offs = {
    client():on('compaction/started', function()
      seen.while_running = sessiond.statusline()
    end),
    client():on('compaction/ended', function(params)
      seen.ended = params
      seen.after = sessiond.statusline()
    end),
    client():on('$/progress', function()
      seen.progress = seen.progress + 1
    end),
  }
  local result = H.sync(client(), 'compaction/run', { sessionId = fixture.id })
  R.wait(function()
    return seen.ended ~= nil
  end, 'compaction/ended')
  for _, off in ipairs(offs) do
    off()
  end
  R.eq(seen.progress, 0, 'no $/progress without a token')
  R.eq(seen.while_running, 'compacting…')
  R.match(seen.after, '^ctx %d+%% ', 'compaction/ended clears compacting…')
  R.eq(seen.ended.entryId, result.entry.id)
  R.eq(current().last_compaction.entryId, result.entry.id)
  R.wait(function()
    return current().usage.tokens < 72000
  end, 'the refreshed usage')
end)

R.test(':SessiondCompact with nothing new to compact says so', function()
  local before = current().entry_count
  vim.cmd('SessiondCompact')
  R.wait(function()
    return H.note('compaction: ') ~= nil
  end, 'the answer')
  local note = H.note('compaction: ')
  R.eq(note.level, vim.log.levels.INFO, 'not an error')
  R.match(note.message, '[Cc]ompact')
  R.eq(current().entry_count, before, 'nothing written')
  R.eq(sessiond.statusline():match('^ctx') ~= nil, true, 'not stuck on compacting…')
end)

R.test(':SessiondTree navigates with a summary and shows the editor text', function()
  local ids = fixture.ids
  local old_leaf = current().leaf_id
  local summary_line
  local off = client():on('$/progress', function(params)
    if params.value.kind == 'begin' then
      summary_line = sessiond.statusline()
    end
  end)
  H.script({ H.pick('Try python%-slugify'), H.pick('^Summarize the branch') })
  -- On a narrow screen, where the entry's text is wider than the command line.
  local columns = vim.o.columns
  vim.o.columns = 60
  local echospace = vim.v.echospace
  local notes_before = #H.notes
  local ok, err, result = pcall(R.call, function(cb)
    sessiond.tree(cb)
  end, 'the navigation')
  vim.o.columns = columns
  off()
  R.ok(ok, err)
  R.eq(err, nil)
  local moved = vim.tbl_filter(function(note)
    return note.message:match('^sessiond: moved to ')
  end, vim.list_slice(H.notes, notes_before + 1))
  R.eq(#moved, 1)
  R.match(moved[1].message, '… %(branch summarized%)$')
  R.ok(
    vim.fn.strdisplaywidth(moved[1].message) <= echospace,
    ('%q fits the command line (%d cells), with no "Press ENTER" before the editor text shows'):format(
      moved[1].message,
      echospace
    )
  )
  R.eq(
    vim.tbl_map(function(choice)
      return choice.text
    end, H.prompts[2].items),
    { 'No summary', 'Summarize the branch you leave', 'Summarize, with custom instructions…' }
  )
  R.eq(result.cancelled, false)
  R.eq(result.summaryEntry.type, 'branch_summary')
  R.eq(result.summaryEntry.parentId, ids.a2, 'the summary hangs where the user went, as in pi')
  R.eq(result.leafId, result.summaryEntry.id)
  R.eq(summary_line, 'summarizing…')

  R.ok(vim.api.nvim_buf_is_valid(result.buffer), 'a scratch buffer')
  R.eq(vim.api.nvim_get_current_buf(), result.buffer, 'shown in the current window')
  R.match(vim.api.nvim_buf_get_lines(result.buffer, 0, 1, false)[1], '^Try python%-slugify instead%.')
  R.eq(vim.bo[result.buffer].buftype, 'nofile')
  R.match(vim.api.nvim_buf_get_name(result.buffer), 'sessiond://editor/')
  vim.cmd('close')

  R.wait(function()
    return current().leaf_id == result.leafId
  end, 'session/changed to move the leaf')
  local on_disk = H.read_entries(fixture.path)
  R.eq(on_disk[#on_disk].type, 'branch_summary')
  R.eq(on_disk[#on_disk].fromId, old_leaf, 'the leaf the summary comes from, as pi 1.6 writes it')
end)

R.test(':SessiondTree fits its lines to the screen, so the picker does not wrap them', function()
  local columns = vim.o.columns
  vim.o.columns = 40
  local shown, long = {}, 0
  H.script({
    function(items, opts)
      -- Neovim's inputlist shows "N: " and the formatted item on one screen line.
      for i, item in ipairs(items) do
        local line = ('%d: %s'):format(i, opts.format_item(item))
        shown[#shown + 1] = line
        if vim.fn.strdisplaywidth(item.line) > 40 then
          long = long + 1
        end
      end
      return nil
    end,
  })
  local ok, err = pcall(R.call, function(cb)
    sessiond.tree(cb)
  end, 'the cancelled pick')
  vim.o.columns = columns
  R.ok(ok, err)
  R.ok(long > 0, 'the fixture has lines longer than the screen')
  for _, line in ipairs(shown) do
    R.ok(vim.fn.strdisplaywidth(line) < 40, line)
  end
  R.ok(vim.tbl_contains(
    vim.tbl_map(function(line)
      return line:sub(-3)
    end, shown),
    '…'
  ), 'cut lines end in …')
end)

R.test(':SessiondTree without a summary, and a cancelled instructions prompt', function()
  local ids = fixture.ids
  local leaf, count = current().leaf_id, current().entry_count

  H.script({ H.pick('Duplicate headings now get'), H.pick('custom instructions'), H.answer(nil) })
  local err = R.call(function(cb)
    sessiond.tree(cb)
  end, 'the cancelled navigation')
  R.eq(client_mod.error_kind(err), 'cancelled')
  R.eq(H.prompts[3].kind, 'input')
  R.eq(current().leaf_id, leaf, 'nothing moved')

  H.script({ H.pick('Duplicate headings now get'), H.pick('^No summary') })
  local err2, result = R.call(function(cb)
    sessiond.tree(cb)
  end, 'the navigation')
  R.eq(err2, nil)
  R.eq(result.leafId, ids.a3, 'an assistant target becomes the leaf')
  R.eq(result.summaryEntry, nil)
  R.eq(result.buffer, nil, 'no editor text for an assistant message')
  R.wait(function()
    return current().leaf_id == ids.a3
  end, 'the leaf to move')
  R.eq(current().entry_count, count, 'nothing written')
end)

R.test('the tree follows a session pi itself writes (no lock, no extra work)', function()
  local before = current().entry_count
  -- pi 0.73.1's own SessionManager, from the parity tests' npm install.
  local script = H.repo_root .. '/tests/parity/pi_append.mjs'
  local done = vim.system({ 'node', script, fixture.path, '2' }, { text = true }):wait(60000)
  R.eq(done.code, 0, done.stderr)
  local written = {}
  for line in done.stdout:gmatch('[^\n]+') do
    written[#written + 1] = vim.json.decode(line).id
  end
  R.eq(#written, 2)
  R.wait(function()
    return current().entry_count == before + 2
  end, "the plugin to hear of pi's entries")
  R.eq(current().leaf_id, written[2])
  R.eq(current().last_change, 'fileAppended')
  local items = picker_items()
  R.ok(tree.find(items, written[1]), "pi's first entry is in the tree picker")
end)

R.test(':SessiondLabel labels an entry and clears it again', function()
  local ids = fixture.ids
  H.script({ H.pick('Duplicate headings now get'), H.answer('anchors-done') })
  vim.cmd('SessiondLabel')
  R.wait(function()
    return H.note('labelled') ~= nil
  end, 'the label')
  R.eq(H.prompts[2].opts.default, '', 'no label yet')
  R.match(line_of(picker_items(), ids.a3), '%[anchors%-done%] assistant: Duplicate')

  H.script({ H.pick('anchors%-done'), H.answer('') })
  vim.cmd('SessiondLabel')
  R.wait(function()
    return H.note('label cleared') ~= nil
  end, 'the label to be cleared')
  R.eq(H.prompts[2].opts.default, 'anchors-done', 'the prompt offers the current label')
  R.eq(tree.find(picker_items(), ids.a3).label, nil)

  H.script({ H.pick('Fix the table of contents') })
  vim.cmd('SessiondLabel first-prompt')
  R.wait(function()
    return H.note('labelled "first%-prompt"') ~= nil
  end, 'the label from the command line')
  R.match(line_of(picker_items(), ids.u1), '%[first%-prompt%]')
end)

R.test(':SessiondStatus describes the daemon and the session', function()
  local err, lines = R.call(function(cb)
    sessiond.status(cb)
  end, 'the status')
  R.eq(err, nil)
  local text = table.concat(lines, '\n')
  R.match(text, '^sessiond [%d.]+ %(protocol 1%)')
  R.match(text, 'session +.*shared%.jsonl %(' .. fixture.id:gsub('%-', '%%-') .. '%)')
  R.match(text, 'entries +' .. current().entry_count .. ', leaf ' .. current().leaf_id)
  R.match(text, 'context +[%d,]+ of 128,000 tokens %(%d+%%%), compaction at 111,616')
  R.match(text, 'compacted +nothing to compact %(manual%)')
  R.ok(H.note('sessiond: sessiond'), 'shown to the user')
end)

R.test(':SessiondOpen without a file offers the sessions of the directory', function()
  -- A session in the daemon's default place for this directory (in the
  -- isolated XDG_DATA_HOME), as an agent frontend would have left it.
  local new = H.sync(client(), 'session/new', { cwd = vim.fn.getcwd() })
  H.sync(client(), 'session/append', {
    sessionId = new.sessionId,
    entries = { H.user('Please list me in the picker'), H.assistant('Listed.') },
  })
  H.sync(client(), 'session/close', { sessionId = new.sessionId })

  H.script({ H.pick('Please list me in the picker') })
  local err, result = R.call(function(cb)
    sessiond.open(nil, cb)
  end, 'the open')
  R.eq(err, nil)
  R.eq(result.sessionId, new.sessionId)
  R.eq(status.current(), new.sessionId)
  R.eq(H.prompts[1].opts.prompt, 'sessiond: open which session?')
  R.match(
    H.prompts[1].opts.format_item(H.prompts[1].items[1]),
    '^%d%d%d%d%-%d%d%-%d%d %d%d:%d%d  .+ %(2 entries%)$'
  )
end)
