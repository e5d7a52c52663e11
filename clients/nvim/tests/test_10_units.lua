-- Pure parts: options, the tree list, token formatting, coroutine helpers.
local R = require('runner')
local H = require('helpers')
local config = require('sessiond.config')
local tree = require('sessiond.tree')
local status = require('sessiond.status')
local async = require('sessiond.async')

R.test('options: defaults, merging and problems', function()
  local cfg, problems = config.resolve({
    context_window = 200000,
    settings = { compaction = { keepRecentTokens = 1000 } },
    tree = { show_all = true },
    cmd = { '/opt/sessiond', 'serve' },
  })
  R.eq(problems, {})
  R.eq(cfg.cmd, { '/opt/sessiond', 'serve' }, 'lists replace the default')
  R.eq(cfg.keymaps, false, 'keymaps are off by default')
  R.eq(cfg.editor, 'split')
  R.eq(cfg.tree.show_all, true)
  R.eq(config.initialize_settings(cfg), {
    compaction = { keepRecentTokens = 1000 },
    context = { defaultContextWindow = 200000 },
  })
  R.eq(config.initialize_settings(config.resolve()), nil, 'no settings sent by default')

  local _, bad = config.resolve({ cmd = 'sessiond', colour = 'blue', context_window = 0, editor = 'float' })
  R.eq(bad, {
    'option "cmd" must be a table, not a string',
    'option "context_window" must be a positive number of tokens',
    'option "editor" must be split, vsplit, tab or current',
    'unknown option "colour"',
  })
end)

R.test('options: keymaps only when asked for', function()
  R.eq(config.keymaps(false), {})
  R.eq(config.keymaps(true).tree, '<leader>st')
  local maps = config.keymaps({ tree = '<leader>T', compact = false })
  R.eq(maps.tree, '<leader>T')
  R.eq(maps.compact, nil, 'false turns one key off')
  R.eq(maps.status, '<leader>ss', 'the others keep their defaults')
end)

R.test('setup: commands exist, no keys are mapped by default', function()
  vim.g.mapleader = ' '
  R.ok(require('sessiond').setup(H.options()))
  for _, name in ipairs({
    'SessiondOpen',
    'SessiondCompact',
    'SessiondTree',
    'SessiondLabel',
    'SessiondStatus',
    'SessiondUndo',
    'SessiondCovered',
  }) do
    R.eq(vim.fn.exists(':' .. name), 2, name)
  end
  for _, lhs in pairs(config.default_keymaps) do
    R.eq(vim.fn.maparg(lhs, 'n'), '', lhs .. ' must stay unmapped')
  end
  R.ok(require('sessiond').setup(H.options({ keymaps = { tree = '<leader>xt' } })))
  R.eq(vim.fn.maparg('<leader>xt', 'n'), '<Cmd>SessiondTree<CR>')
  vim.keymap.del('n', '<leader>xt')
  -- Leave the shared configuration as the daemon tests expect it.
  R.ok(require('sessiond').setup(H.options()))
end)

-- A tree like the daemon's answer: a chain, a branch point, a label entry
-- that is the leaf, a compaction on the active path.
local function sample_tree()
  local function node(id, parent, type_, extra)
    return vim.tbl_extend('force', {
      id = id,
      parentId = parent or vim.NIL,
      type = type_,
      timestamp = '2026-01-01T00:00:00.000Z',
      children = {},
      active = false,
    }, extra or {})
  end
  local nodes = {
    node(
      'u1',
      nil,
      'message',
      { role = 'user', preview = 'user: fix the toc', label = 'start', active = true }
    ),
    node('a1', 'u1', 'message', { role = 'assistant', preview = 'assistant: reading', active = true }),
    node('u2', 'a1', 'message', { role = 'user', preview = 'user: try slugify' }),
    node('a2', 'u2', 'message', { role = 'assistant', preview = 'assistant: slugify fails' }),
    node('c1', 'a1', 'compaction', { preview = 'compaction (57,600 tokens before): ## Goal', active = true }),
    node('u3', 'c1', 'message', { role = 'user', preview = 'user: add anchors', active = true }),
    node('l1', 'u3', 'label', { preview = "label u1 = 'start'", active = true }),
  }
  local children = { u1 = { 'a1' }, a1 = { 'u2', 'c1' }, u2 = { 'a2' }, c1 = { 'u3' }, u3 = { 'l1' } }
  for _, n in ipairs(nodes) do
    n.children = children[n.id] or {}
  end
  return { nodes = nodes, rootIds = { 'u1' }, leafId = 'l1' }
end

R.test('tree: lines, indentation at branches, labels, active path, compaction', function()
  local items = tree.items(sample_tree())
  R.eq(tree.lines(items), {
    '• [start] user: fix the toc',
    '• assistant: reading',
    '  ├─ user: try slugify',
    '  │  assistant: slugify fails',
    '• └─ compaction (57,600 tokens before): ## Goal',
    '▶    user: add anchors',
  })
  R.eq(
    vim.tbl_map(function(i)
      return i.depth
    end, items),
    { 0, 0, 1, 1, 1, 1 }
  )
  local leaf = tree.find(items, 'u3')
  R.ok(leaf.leaf, 'the hidden label entry hands the leaf marker to its target')
  R.eq(tree.find(items, 'l1'), nil, 'label entries are hidden')
  R.eq(tree.find(items, 'u1').label, 'start')
  R.eq(tree.find(items, 'c1').type, 'compaction')
  R.eq(tree.find(items, 'u2').active, false)
end)

R.test('tree: show_all, custom markers, missing previews, several roots', function()
  local all = tree.items(sample_tree(), { show_all = true, markers = { leaf = '>', active = '*' } })
  R.eq(#all, 7)
  R.eq(all[7].line, ">    label u1 = 'start'")
  R.eq(all[1].line:sub(1, 1), '*')

  local t = {
    nodes = {
      { id = 'x', parentId = vim.NIL, type = 'message', role = 'user', children = {} },
      { id = 'y', parentId = vim.NIL, type = 'branch_summary', children = { 'z' }, active = true },
      { id = 'z', parentId = 'y', type = 'model_change', children = {}, active = true },
    },
    rootIds = { 'x', 'y' },
    leafId = 'z',
  }
  R.eq(tree.lines(tree.items(t)), {
    '  ├─ user',
    '• └─ branch summary',
    '▶    model change',
  })
  R.eq(tree.items({ nodes = {}, rootIds = {}, leafId = vim.NIL }), {})
  -- A damaged answer (a cycle) must not hang the editor.
  local cyclic = {
    nodes = {
      { id = 'p', parentId = 'q', type = 'message', role = 'user', children = { 'q' } },
      { id = 'q', parentId = 'p', type = 'message', role = 'assistant', children = { 'p' } },
    },
    rootIds = { 'p' },
    leafId = 'q',
  }
  R.eq(tree.lines(tree.items(cyclic)), { '  user', '▶ assistant' })
end)

R.test('text from a session is shown inert: tree lines, labels, status', function()
  local text = require('sessiond.text')
  -- An OSC 52 clipboard write, a screen clear, a forged second line, a C1 control, a
  -- right-to-left override, an isolate.
  local hostile = 'fix\27]52;c;cHduZWQ=\7 it\27[2J\nsessiond: re-enter your key\194\155x\226\128\174gnp\226\129\166'
  R.eq(
    text.inert(hostile),
    'fix\\x1b]52;c;cHduZWQ=\\x07 it\\x1b[2J\\nsessiond: re-enter your key\\x9bx\\u202egnp\\u2066'
  )
  R.eq(text.inert('plain ünïcode — ok'), 'plain ünïcode — ok')
  local t = {
    nodes = {
      {
        id = 'u1',
        parentId = vim.NIL,
        type = 'message',
        role = 'user',
        preview = 'user: ' .. hostile,
        label = 'lbl\n\27[31m',
        children = {},
        active = true,
      },
    },
    rootIds = { 'u1' },
    leafId = 'u1',
  }
  local items = tree.items(t)
  for _, line in ipairs(tree.lines(items)) do
    R.eq(line:find('[%z\1-\31\127]'), nil, 'no control character in ' .. line)
  end
  -- nvim_buf_set_lines refuses a line with a newline: the lines go into a buffer as they are.
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, tree.lines(items))
  vim.api.nvim_buf_delete(buf, { force = true })
  status.opened({ sessionId = 'hostile', path = '/s/x\27[2J.jsonl', name = hostile, entryCount = 1 })
  for _, line in ipairs(status.describe(nil, 'hostile')) do
    R.eq(line:find('[%z\1-\31\127]'), nil, 'no control character in ' .. line)
  end
  status.forget('hostile')
end)

R.test('entries: one inert line for a whole entry, whatever the file holds', function()
  local entries = require('sessiond.entries')
  local hostile = 'fix\27]52;c;cHduZWQ=\7 it\27[2J\nsessiond: re-enter\226\128\174'
  local cases = {
    {
      { type = 'message', message = { role = 'user', content = { { type = 'text', text = hostile } } } },
      'user: fix\\x1b]52;c;cHduZWQ=\\x07 it\\x1b[2J\\nsessiond: re-enter\\u202e',
    },
    {
      {
        type = 'message',
        message = {
          role = 'assistant',
          content = { { type = 'text', text = '  two   words ' }, { type = 'toolCall', name = 'read' } },
        },
      },
      'assistant: two words [read call]',
    },
    {
      { type = 'message', message = { role = 'toolResult', toolName = 'bash', content = 'ok' } },
      'toolResult bash: ok',
    },
    { { type = 'compaction', summary = '## Goal' }, 'compaction: ## Goal' },
    { { type = 'branch_summary', summary = 'left' }, 'branch summary: left' },
    { { type = 'label', targetId = 'u1' }, 'label u1: (cleared)' },
    { { type = 'thinking_level_change' }, 'thinking level change' },
    { { type = 'message', message = vim.NIL }, 'message:' },
    { { type = 42 }, 'entry' },
  }
  for _, case in ipairs(cases) do
    R.eq(entries.preview(case[1]), case[2])
  end
  R.eq(entries.kind(cases[1][1]), 'message (user)')
  R.eq(entries.kind({ type = 'compaction' }), 'compaction')
end)

R.test('status: a summary written in the background, and the no-loop pause', function()
  local listeners = {}
  local fake = {
    on = function(_, method, fn)
      listeners[method] = fn
      return function() end
    end,
    is_running = function()
      return false
    end,
  }
  local detach = status.attach(fake)
  status.opened({ sessionId = 'bg', path = '/s/bg.jsonl', entryCount = 1 })
  local usage =
    { tokens = 80000, contextWindow = 128000, percent = 62.5, threshold = 111616, shouldCompact = false }
  status.set_usage('bg', usage)
  listeners['compaction/started']({ sessionId = 'bg', reason = 'background', willRetry = false })
  R.eq(status.statusline(), 'ctx 63% 80k/128k · summary…', 'the usage stays in view')
  listeners['compaction/ended']({
    sessionId = 'bg',
    reason = 'background',
    aborted = false,
    willRetry = false,
    result = { summary = '## Goal', firstKeptEntryId = 'k', tokensBefore = 80000 },
  })
  R.eq(status.statusline(), 'ctx 63% 80k/128k · summary ready')
  R.contains(
    status.describe(nil, 'bg'),
    'summary    written in the background, ready: the next compaction commits it without waiting'
  )
  R.eq(status.get('bg').last_compaction, nil, 'nothing was written')

  listeners['compaction/started']({ sessionId = 'bg', reason = 'threshold', willRetry = false })
  R.eq(status.statusline(), 'compacting…')
  listeners['compaction/ended']({
    sessionId = 'bg',
    reason = 'threshold',
    aborted = false,
    willRetry = false,
    entryId = 'c1',
    tokensBefore = 115000,
    tokensAfter = 30000,
    prepared = true,
  })
  R.eq(status.statusline(), 'ctx 63% 80k/128k')
  R.contains(
    status.describe(nil, 'bg'),
    'compacted  115,000 -> 30,000 tokens (threshold, summary written in the background)'
  )

  local message = 'Automatic compaction paused: the last compaction left 1,400 tokens in the context, '
    .. 'over the threshold of 1,000. Use a model with a larger context window, lower '
    .. 'compaction.keepRecentTokens, or compact manually (compaction/run).'
  status.set_usage('bg', vim.tbl_extend('force', usage, { shouldCompact = true, autoCompactionPaused = true }))
  H.clear_notes()
  listeners['compaction/ended']({
    sessionId = 'bg',
    reason = 'threshold',
    aborted = false,
    willRetry = false,
    skipped = true,
    paused = true,
    errorMessage = message .. '\27[2J',
  })
  R.eq(status.statusline(), 'ctx 63% 80k/128k · auto-compaction paused')
  R.eq(#H.notes, 1, 'the user is told once')
  R.eq(H.notes[1].level, vim.log.levels.WARN)
  R.match(H.notes[1].message, 'keepRecentTokens', 'with what to do')
  local lines = status.describe(nil, 'bg')
  R.contains(lines, 'paused     ' .. message .. '\\x1b[2J', 'the message, whole and inert')
  R.contains(lines, 'compacted  automatic compaction paused (threshold)')
  status.set_usage('bg', vim.tbl_extend('force', usage, { shouldCompact = true, autoCompactionPaused = true }))
  R.eq(status.get('bg').paused, message .. '\27[2J', 'still paused, with the announced message')
  status.set_usage('bg', vim.tbl_extend('force', usage, { contextWindow = 1000000 }))
  R.eq(status.get('bg').paused, nil, 'a larger window lifts it')
  status.set_usage('bg', vim.tbl_extend('force', usage, { shouldCompact = true, autoCompactionPaused = true }))
  R.eq(status.get('bg').paused, status.PAUSED_UNANNOUNCED, 'a usage alone tells a client that missed the announcement')
  status.set_usage('bg', usage)
  listeners['compaction/started']({ sessionId = 'bg', reason = 'background', willRetry = false })
  listeners['session/changed']({ sessionId = 'bg', reason = 'undo', leafId = 'x', entryCount = 9 })
  R.eq(status.get('bg').background, nil, 'an undo drops the background summary')
  detach()
  status.forget('bg')
end)

R.test('tree: a long chain does not recurse', function()
  local nodes, n = {}, 20000
  for i = 1, n do
    nodes[i] = {
      id = 'e' .. i,
      parentId = i > 1 and ('e' .. (i - 1)) or vim.NIL,
      type = 'message',
      role = 'user',
      preview = 'user: ' .. i,
      children = i < n and { 'e' .. (i + 1) } or {},
      active = true,
    }
  end
  local items = tree.items({ nodes = nodes, rootIds = { 'e1' }, leafId = 'e' .. n })
  R.eq(#items, n)
  R.eq(items[n].line, '▶ user: ' .. n)
end)

R.test('status: token and usage formatting', function()
  local cases = {
    { 0, '0' },
    { 999, '999' },
    { 1000, '1k' },
    { 57600, '57.6k' },
    { 128000, '128k' },
    { 999949, '999.9k' },
    { 999960, '1M' },
    { 1234567, '1.2M' },
  }
  for _, case in ipairs(cases) do
    R.eq(status.format_tokens(case[1]), case[2], tostring(case[1]))
  end
  R.eq(status.format_usage({ tokens = 57600, contextWindow = 128000, percent = 45.0 }), 'ctx 45% 57.6k/128k')
  R.eq(status.group_digits(0), '0')
  R.eq(status.group_digits(999), '999')
  R.eq(status.group_digits(128000), '128,000')
  R.eq(status.group_digits(1234567), '1,234,567')
  R.eq(status.format_usage({ tokens = 200, contextWindow = 200000, percent = 0.1 }), 'ctx 0% 200/200k')
end)

R.test('async: await handles immediate and later callbacks; run reports errors', function()
  local got = {}
  async.run(function()
    got[#got + 1] = async.await(function(done)
      done('now')
    end)
    got[#got + 1] = async.await(function(done)
      vim.schedule(function()
        done('later')
      end)
    end)
    return 'finished'
  end, function(ok, value)
    got[#got + 1] = ok and value or 'error'
  end)
  R.wait(function()
    return #got == 3
  end, 'the coroutine')
  R.eq(got, { 'now', 'later', 'finished' })

  local outcome
  async.run(function()
    async.await(vim.schedule)
    error('boom')
  end, function(ok, err)
    outcome = { ok = ok, err = err }
  end)
  R.wait(function()
    return outcome ~= nil
  end, 'the failing coroutine')
  R.eq(outcome.ok, false)
  R.match(outcome.err, 'boom')
  R.match(outcome.err, 'stack traceback', 'errors carry a traceback')
end)

R.test('window/logMessage: mapped to levels, filtered by log_level', function()
  -- The daemon sends none of these today, so feed the client's dispatcher
  -- the way vim.lsp.rpc would.
  local client = require('sessiond').get_client()
  H.clear_notes()
  client:_notification('window/logMessage', { type = 1, message = 'disk full' })
  client:_notification('window/logMessage', { type = 2, message = 'hook timed out' })
  client:_notification('window/logMessage', { type = 3, message = 'opened a session' })
  R.eq(H.notes, {
    { message = 'sessiond: disk full', level = vim.log.levels.ERROR },
    { message = 'sessiond: hook timed out', level = vim.log.levels.WARN },
  })
end)

R.test(':checkhealth sessiond reports the version and the daemon command', function()
  vim.cmd('checkhealth sessiond')
  local text = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
  vim.cmd('bwipeout!')
  R.match(text, 'OK Neovim %d+%.%d+')
  R.match(text, 'OK daemon: .*sessiond %(sessiond [%d.]+%)')
  R.match(text, 'not running')
end)

R.test('commands without an open session say so and touch nothing', function()
  local sessiond = require('sessiond')
  R.eq(sessiond.current_session(), nil)
  R.eq(sessiond.statusline(), '', 'an empty statusline without a session')
  for _, action in ipairs({ 'compact', 'tree', 'label', 'undo', 'covered' }) do
    H.clear_notes()
    local err = R.call(function(cb)
      if action == 'tree' or action == 'undo' then
        sessiond[action](cb)
      else
        sessiond[action](nil, cb)
      end
    end, action)
    R.eq(err.data.kind, 'noSession', action)
    R.eq(H.notes[1].level, vim.log.levels.WARN, action)
    R.match(H.notes[1].message, ':SessiondOpen', action)
  end
  R.eq(sessiond.get_client().state, 'stopped', 'no daemon was started for nothing')
end)
