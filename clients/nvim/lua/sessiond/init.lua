-- sessiond.nvim: Neovim's side of sessiond, the daemon that owns pi coding-agent
-- sessions. Setup, the shared connection, and the public Lua API; the
-- commands' flows live in sessiond.commands.
local config = require('sessiond.config')

local M = {}

M.config = config.resolve()

local shared = nil -- the connection every command uses, made on first use

local function supported()
  return vim.fn.has('nvim-0.10') == 1
end

local LOG_LEVELS = {
  [1] = vim.log.levels.ERROR,
  [2] = vim.log.levels.WARN,
  [3] = vim.log.levels.INFO,
  [4] = vim.log.levels.DEBUG,
  [5] = vim.log.levels.DEBUG,
}

--- Show a window/logMessage if it is at or above `config.log_level`.
function M.on_log_message(params)
  local level = LOG_LEVELS[params.type] or vim.log.levels.INFO
  if level >= M.config.log_level then
    vim.notify('sessiond: ' .. tostring(params.message), level)
  end
end

local function client_options(cfg)
  return {
    cmd = cfg.cmd,
    socket = cfg.socket and vim.fs.normalize(cfg.socket),
    env = cfg.env,
    cwd = cfg.cwd,
    settings = config.initialize_settings(cfg),
    hooks = cfg.hooks,
    start_timeout_ms = cfg.start_timeout_ms,
    stop_timeout_ms = cfg.stop_timeout_ms,
  }
end

--- The shared client (not started until the first request).
---@return sessiond.Client
function M.get_client()
  if not shared then
    local status = require('sessiond.status')
    shared = require('sessiond.client').new(client_options(M.config))
    status.attach(shared)
    shared:on('window/logMessage', M.on_log_message)
  end
  return shared
end

local function set_keymaps(maps)
  local actions = {
    open = { ':SessiondOpen ', 'open a session file' },
    compact = { '<Cmd>SessiondCompact<CR>', 'compact the session' },
    tree = { '<Cmd>SessiondTree<CR>', 'go to another point of the tree' },
    label = { '<Cmd>SessiondLabel<CR>', 'label an entry' },
    status = { '<Cmd>SessiondStatus<CR>', 'show the session status' },
    undo = { '<Cmd>SessiondUndo<CR>', 'undo the last compaction' },
    covered = { '<Cmd>SessiondCovered<CR>', 'show what the last summary stands for' },
  }
  for action, lhs in pairs(maps) do
    local spec = actions[action]
    if spec then
      vim.keymap.set('n', lhs, spec[1], { desc = 'sessiond: ' .. spec[2] })
    else
      vim.notify(('sessiond: unknown keymap action %q'):format(action), vim.log.levels.WARN)
    end
  end
end

--- Configure the plugin and create its commands. Returns false (and says
--- why) on a Neovim that is too old.
---@param opts? table see README.md, "Setup"
---@return boolean
function M.setup(opts)
  if not supported() then
    vim.notify('sessiond.nvim needs Neovim 0.10 or newer', vim.log.levels.ERROR)
    return false
  end
  local cfg, problems = config.resolve(opts)
  for _, problem in ipairs(problems) do
    vim.notify('sessiond: ' .. problem, vim.log.levels.WARN)
  end
  M.config = cfg
  if shared then
    -- A running daemon keeps the options it was started with; the next start
    -- (after :SessiondStop) uses these.
    shared.opts = client_options(cfg)
  end
  require('sessiond.commands').register()
  set_keymaps(config.keymaps(cfg.keymaps))
  local group = vim.api.nvim_create_augroup('sessiond', { clear = true })
  vim.api.nvim_create_autocmd('VimLeavePre', {
    group = group,
    desc = 'sessiond: stop the daemon so that it flushes its sessions',
    callback = function()
      M.stop_sync()
    end,
  })
  return true
end

--- Stop the daemon and wait for it (for VimLeavePre and scripts).
function M.stop_sync(timeout_ms)
  if not shared or shared.state == 'stopped' then
    return true
  end
  shared:stop()
  return vim.wait(timeout_ms or M.config.stop_timeout_ms, function()
    return shared.state == 'stopped'
  end, 10)
end

-- The public actions. Each takes an optional callback(err, result).
function M.open(path, callback)
  require('sessiond.commands').open(path, callback)
end

function M.compact(instructions, callback)
  require('sessiond.commands').compact(instructions, callback)
end

function M.tree(callback)
  require('sessiond.commands').tree(callback)
end

function M.label(text, callback)
  require('sessiond.commands').label(text, callback)
end

--- Undo the context's newest compaction.
function M.undo(callback)
  require('sessiond.commands').undo(callback)
end

--- Show what a compaction's summary stands for (default: the newest on the path).
function M.covered(entry_id, callback)
  require('sessiond.commands').covered(entry_id, callback)
end

function M.status(callback)
  require('sessiond.commands').status(callback)
end

function M.stop(callback)
  require('sessiond.commands').stop(callback)
end

--- The current session's id, or nil.
function M.current_session()
  return require('sessiond.status').current()
end

--- Statusline text: "ctx 45% 57.6k/128k", "compacting…", or "" with no session.
--- See sessiond.status.statusline for the options.
function M.statusline(opts)
  return require('sessiond.status').statusline(opts)
end

return M
