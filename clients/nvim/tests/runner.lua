-- A minimal test runner for `nvim --headless -u NONE -l`: no plugin manager,
-- no busted. Tests are plain functions run in order; they may block on the
-- event loop with `wait`/`call`, which is how they meet the real daemon.
local R = {}

local tests = {}
local unpack = table.unpack or unpack

R.timeout_ms = tonumber(os.getenv('SESSIOND_TEST_TIMEOUT_MS')) or 15000

--- Register a test. `group` names the file it came from.
function R.test(name, fn)
  tests[#tests + 1] = { name = (R.group and (R.group .. ': ') or '') .. name, fn = fn }
end

local function fail(message, level)
  error(message, (level or 1) + 1)
end

function R.eq(actual, expected, what)
  if not vim.deep_equal(actual, expected) then
    fail(
      ('%sexpected %s, got %s'):format(
        what and (what .. ': ') or '',
        vim.inspect(expected),
        vim.inspect(actual)
      ),
      2
    )
  end
end

function R.ok(value, what)
  if not value then
    fail(
      ('expected a true value%s, got %s'):format(what and (' (' .. what .. ')') or '', vim.inspect(value)),
      2
    )
  end
  return value
end

function R.match(text, pattern, what)
  if type(text) ~= 'string' or not text:find(pattern) then
    fail(('%s%s does not match %q'):format(what and (what .. ': ') or '', vim.inspect(text), pattern), 2)
  end
end

function R.contains(list, wanted, what)
  for _, v in ipairs(list or {}) do
    if vim.deep_equal(v, wanted) then
      return
    end
  end
  fail(('%s%s not in %s'):format(what and (what .. ': ') or '', vim.inspect(wanted), vim.inspect(list)), 2)
end

--- Process events until `cond()` is true; fails after the timeout.
function R.wait(cond, what, timeout_ms)
  local ok = vim.wait(timeout_ms or R.timeout_ms, cond, 10)
  if not ok then
    fail('timed out waiting for ' .. (what or 'a condition'), 2)
  end
end

--- Call `fn(callback)` and wait for the callback; returns its arguments.
function R.call(fn, what)
  local results
  fn(function(...)
    results = { n = select('#', ...), ... }
  end)
  R.wait(function()
    return results ~= nil
  end, what or 'a callback')
  return unpack(results, 1, results.n)
end

--- Run every registered test; prints one line each and the totals. Returns
--- the number of failures.
function R.run(filter)
  local passed, failed = 0, 0
  local started = vim.uv.hrtime()
  for _, t in ipairs(tests) do
    if not filter or t.name:find(filter, 1, true) then
      local t0 = vim.uv.hrtime()
      local ok, err = xpcall(t.fn, debug.traceback)
      -- The cleanup's checks belong to the test that just ran.
      if R.after_each then
        local cleaned, cleanup_err = xpcall(R.after_each, debug.traceback)
        if ok and not cleaned then
          ok, err = false, cleanup_err
        end
      end
      local ms = (vim.uv.hrtime() - t0) / 1e6
      if ok then
        passed = passed + 1
        io.stdout:write(('ok    %s (%d ms)\n'):format(t.name, ms))
      else
        failed = failed + 1
        io.stdout:write(
          ('FAIL  %s (%d ms)\n      %s\n'):format(t.name, ms, (tostring(err):gsub('\n', '\n      ')))
        )
      end
    end
  end
  io.stdout:write(('\nran %d tests in %.1f s\n'):format(passed + failed, (vim.uv.hrtime() - started) / 1e9))
  -- The last line is the plain "N passed, M failed" that CI reads.
  io.stdout:write(('%d passed, %d failed\n'):format(passed, failed))
  if passed + failed == 0 then
    return 1
  end
  return failed
end

return R
