-- Hooks, a shared socket daemon, a crash, and the clean stop (last).
local R = require('runner')
local H = require('helpers')
local sessiond = require('sessiond')
local status = require('sessiond.status')
local client_mod = require('sessiond.client')

R.test('hooks: declared in initialize, a before-compact hook can cancel', function()
  local calls = {}
  local answer = { cancel = true }
  local hooked = client_mod.new({
    cmd = H.cmd,
    env = H.env,
    settings = H.settings,
    hooks = {
      session_before_compact = function(params)
        calls[#calls + 1] = { name = 'before', params = params }
        return answer
      end,
      session_compact = function(params)
        calls[#calls + 1] = { name = 'compact', params = params }
      end,
      -- Hooks run in a coroutine: this one asks the user before answering.
      session_before_tree = function(params)
        local choice = require('sessiond.async').select({ 'go', 'stay' }, { prompt = 'Leave the branch?' })
        calls[#calls + 1] = { name = 'tree', params = params, choice = choice }
        return choice == 'stay' and { cancel = true } or nil
      end,
    },
  })
  -- The fixture's own navigation asks too.
  H.script({ H.pick('^go$') })
  local fixture = H.make_session(hooked, 'hooks')
  R.eq(#calls, 1)
  R.eq(calls[1].choice, 'go')
  calls = {}
  H.sync(hooked, 'session/open', { path = fixture.path })

  local _, err = hooked:request_sync('compaction/run', { sessionId = fixture.id }, R.timeout_ms)
  R.eq(client_mod.error_kind(err), 'cancelled', 'the hook cancelled the compaction')
  R.eq(#calls, 1)
  R.eq(calls[1].params.sessionId, fixture.id)
  R.ok(#calls[1].params.preparation.summarizeEntryIds > 0, 'the hook saw the preparation')
  R.eq(H.read_entries(fixture.path)[11], nil, 'nothing written')

  answer = nil -- no opinion: the daemon summarizes as usual
  local result = H.sync(hooked, 'compaction/run', { sessionId = fixture.id })
  R.eq(result.fromExtension, false)
  R.wait(function()
    return #calls == 3
  end, 'the session_compact notification')
  R.eq(calls[3].name, 'compact')
  R.eq(calls[3].params.compactionEntry.id, result.entry.id)

  H.script({ H.pick('^stay$') })
  local stayed = H.sync(hooked, 'tree/navigate', { sessionId = fixture.id, targetId = fixture.ids.a1 })
  R.eq(stayed.cancelled, true, 'the user said stay')
  R.eq(calls[4].params.targetId, fixture.ids.a1)
  H.script({ H.pick('^go$') })
  local went = H.sync(hooked, 'tree/navigate', { sessionId = fixture.id, targetId = fixture.ids.a1 })
  R.eq(went.cancelled, false)
  R.eq(went.leafId, fixture.ids.a1)

  local exit = R.call(function(cb)
    hooked:stop(cb)
  end, 'the hooked daemon to stop')
  R.eq(exit.clean, true)
end)

R.test("socket: two clients of one daemon see each other's changes", function()
  local socket = H.path('run/sessiond-test.sock')
  local server = vim.system(
    { H.sessiond, 'serve', '--socket', socket, '--log-level', 'WARNING' },
    { env = H.env, stdin = true }
  )
  local ok, err = pcall(function()
    H.wait_for_socket(socket)
    local a = client_mod.new({ socket = socket, name = 'a' })
    local b = client_mod.new({ socket = socket, name = 'b' })
    local fixture = H.make_session(a, 'socket')
    H.sync(a, 'session/open', { path = fixture.path })
    H.sync(b, 'session/open', { path = fixture.path })
    local seen
    b:on('session/changed', function(params)
      seen = params
    end)
    local appended = H.sync(a, 'session/append', {
      sessionId = fixture.id,
      entries = { H.user('from client a') },
    })
    R.wait(function()
      return seen ~= nil
    end, "b to hear of a's append")
    R.eq(seen.appendedIds, appended.ids)
    R.eq(seen.sessionId, fixture.id)

    -- Stopping a socket client ends its connection, not the shared daemon.
    local exit = R.call(function(cb)
      a:stop(cb)
    end, 'client a to stop')
    R.eq(exit.code, 0)
    R.eq(a.state, 'stopped')
    local entry = H.sync(b, 'session/entry', { sessionId = fixture.id, entryId = appended.ids[1] })
    R.eq(entry.entry.message.content[1].text, 'from client a')
    R.call(function(cb)
      b:stop(cb)
    end, 'client b to stop')
    R.eq(server:is_closing(), false, 'the daemon still runs')
  end)
  server:kill(15)
  local done = server:wait(5000)
  if not ok then
    error(err, 0)
  end
  R.eq(done.code, 0, 'the socket daemon shut down cleanly on SIGTERM')
end)

R.test('a missing daemon command or socket is reported, not raised', function()
  local broken = client_mod.new({ cmd = { H.path('no-such-sessiond') } })
  local _, err = broken:request_sync('session/list', { sessionDir = H.tmp })
  R.eq(client_mod.error_kind(err), 'startFailed')
  R.match(err.message, 'cannot start sessiond')
  R.eq(broken.state, 'stopped')

  local nobody = client_mod.new({ socket = H.path('run/nobody.sock') })
  local _, err2 = nobody:request_sync('session/list', { sessionDir = H.tmp })
  R.eq(client_mod.error_kind(err2), 'startFailed')
  R.match(err2.message, 'no sessiond socket at .*nobody%.sock')
end)

R.test('a stream that is not JSON-RPC fails the waiting requests at once', function()
  -- A peer on a socket that answers anything with a body that is not JSON.
  local socket = H.path('run/broken.sock')
  vim.fn.mkdir(H.path('run'), 'p')
  local server = vim.uv.new_pipe(false)
  server:bind(socket)
  server:listen(4, function()
    local stream = vim.uv.new_pipe(false)
    server:accept(stream)
    stream:read_start(function(_, data)
      if data then
        local body = '{"id":1,"re'
        stream:write(('Content-Length: %d\r\n\r\n%s'):format(#body, body))
      end
    end)
  end)
  local broken = client_mod.new({ socket = socket, start_timeout_ms = 60000 })
  local started = vim.uv.hrtime()
  local _, err = broken:request_sync('session/list', { sessionDir = H.tmp }, 30000)
  R.ok(err ~= nil, 'the request was answered with an error')
  R.ok((vim.uv.hrtime() - started) / 1e9 < 20, 'well before the start timeout')
  R.eq(broken.state, 'stopped')
  server:close()
end)

R.test('a daemon that dies is noticed, and the next command starts a new one', function()
  local client = sessiond.get_client()
  R.ok(client:is_running())
  R.ok(status.current() ~= nil, 'a session is open')
  local pids = H.daemon_pids()
  R.eq(#pids, 1)
  local exits = {}
  local off = client:on('client/exit', function(exit)
    exits[#exits + 1] = exit
  end)
  vim.uv.kill(pids[1], 'sigkill')
  R.wait(function()
    return #exits == 1
  end, 'the exit')
  off()
  R.eq(exits[1].clean, false)
  R.eq(exits[1].signal, 9)
  R.eq(client.state, 'stopped')
  R.eq(status.current(), nil, 'the daemon closed every session with it')
  R.eq(sessiond.statusline(), '')

  -- The file survived: every acknowledged entry is on disk.
  local path = H.path('shared.jsonl')
  local entries = H.read_entries(path)
  R.eq(entries[#entries].type, 'label')

  local err, result = R.call(function(cb)
    sessiond.open(path, cb)
  end, 'the reopen')
  R.eq(err, nil)
  R.eq(result.entryCount, #entries - 1)
  R.eq(#H.daemon_pids(), 1)
  R.ok(H.daemon_pids()[1] ~= pids[1], 'a new process')
  R.wait(function()
    return sessiond.statusline():match('^ctx') ~= nil
  end, 'the statusline to come back')
end)

R.test(':SessiondStop stops the daemon cleanly', function()
  local client = sessiond.get_client()
  R.ok(client:is_running())
  vim.cmd('SessiondStop')
  R.wait(function()
    return client.state == 'stopped'
  end, 'the daemon to stop')
  R.eq(client.exit.code, 0, 'exit code 0: shutdown came before exit')
  R.eq(client.exit.clean, true)
  R.eq(H.daemon_pids(), {}, 'no daemon left behind')
  R.eq(sessiond.statusline(), '')
  R.eq(H.note('stopped %('), nil, 'a clean stop is not reported as a problem')
  -- Stopping again is harmless.
  local err, exit = R.call(function(cb)
    sessiond.stop(cb)
  end, 'the second stop')
  R.eq(err, nil)
  R.eq(exit.clean, true)
end)
