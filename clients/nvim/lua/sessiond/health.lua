-- :checkhealth sessiond — the things that stop the plugin from working
-- before any command runs: Neovim's version and the daemon's command.
local M = {}

function M.check()
  local health = vim.health
  health.start('sessiond.nvim')
  local v = vim.version()
  local version = ('%d.%d.%d'):format(v.major, v.minor, v.patch)
  if vim.fn.has('nvim-0.10') == 1 then
    health.ok('Neovim ' .. version)
  else
    health.error('Neovim ' .. version .. ' is too old: sessiond.nvim needs 0.10 or newer')
    return
  end

  local config = require('sessiond').config
  if config.socket then
    if vim.uv.fs_stat(config.socket) then
      health.ok('daemon socket: ' .. config.socket)
    else
      health.warn(
        'no daemon listening at ' .. config.socket,
        { 'Start one: sessiond serve --socket ' .. config.socket }
      )
    end
  else
    local exe = config.cmd[1]
    if vim.fn.executable(exe) == 1 then
      local out = vim.system({ exe, '--version' }, { text = true }):wait(10000)
      local text = vim.trim((out.stdout or '') .. (out.stderr or ''))
      if out.code == 0 then
        health.ok(('daemon: %s (%s)'):format(vim.fn.exepath(exe), text))
      else
        health.warn(('%s --version failed (code %s): %s'):format(exe, out.code, text))
      end
    else
      health.error(('daemon command not found: %s'):format(exe), {
        'Install sessiond into a Python environment (pip install . in its repository), then put its bin/ on PATH or set cmd in setup() to the full path of sessiond.',
      })
    end
  end

  local client = require('sessiond').get_client()
  if client:is_running() then
    health.ok(('connected to sessiond %s'):format(client.info.serverInfo.version))
  else
    health.info('the daemon is not running (it starts on the first command)')
  end
end

return M
