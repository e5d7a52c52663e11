-- The plugin's options: defaults, merging and checking. Kept apart from
-- init.lua so that the client and the commands can read them without a
-- require cycle.
local M = {}

M.defaults = {
  -- How to start the daemon (stdio). WARNING keeps the daemon's INFO lines out
  -- of Neovim's LSP log, where everything on stderr is recorded as an error.
  cmd = { 'sessiond', 'serve', '--stdio', '--log-level', 'WARNING' },
  -- Connect to a running `sessiond serve --socket PATH` instead of spawning.
  socket = nil,
  -- Extra environment variables and working directory for the spawned daemon.
  env = nil,
  cwd = nil,
  -- The model's context window in tokens; nil leaves the daemon's default (128000).
  context_window = nil,
  -- Daemon settings for this connection ({group = {key = value}}), sent in initialize.
  settings = nil,
  -- Hook handlers, by pi's hook name: function(params) -> answer table or nil.
  hooks = {},
  -- Off by default: a plugin should not take keys the user did not give it.
  -- true for the defaults below, or a table {action = lhs | false}.
  keymaps = false,
  -- Where a returned editorText opens: 'split', 'vsplit', 'tab' or 'current'.
  editor = 'split',
  -- The tree picker: markers {leaf, active, none}; show_all lists label entries too.
  tree = { markers = nil, show_all = false },
  -- window/logMessage below this level are not shown.
  log_level = vim.log.levels.WARN,
  -- How long a clean stop may take before the daemon is terminated.
  stop_timeout_ms = 3000,
  -- How long the daemon may take to answer initialize.
  start_timeout_ms = 15000,
}

M.default_keymaps = {
  open = '<leader>so',
  compact = '<leader>sc',
  tree = '<leader>st',
  label = '<leader>sl',
  status = '<leader>ss',
  undo = '<leader>su',
  covered = '<leader>sv',
}

local types = {
  cmd = 'table',
  socket = 'string',
  env = 'table',
  cwd = 'string',
  context_window = 'number',
  settings = 'table',
  hooks = 'table',
  keymaps = { 'boolean', 'table' },
  editor = 'string',
  tree = 'table',
  log_level = 'number',
  stop_timeout_ms = 'number',
  start_timeout_ms = 'number',
}

local editors = { split = true, vsplit = true, tab = true, current = true }

local function type_ok(value, expected)
  if type(expected) == 'string' then
    return type(value) == expected
  end
  return vim.tbl_contains(expected, type(value))
end

--- Check options; returns a list of problems (empty when all is well).
---@param opts table
---@return string[]
function M.problems(opts)
  local problems = {}
  for key, value in pairs(opts) do
    local expected = types[key]
    if expected == nil then
      problems[#problems + 1] = ('unknown option %q'):format(key)
    elseif not type_ok(value, expected) then
      local wanted = type(expected) == 'table' and table.concat(expected, ' or ') or expected
      problems[#problems + 1] = ('option %q must be a %s, not a %s'):format(key, wanted, type(value))
    end
  end
  if type(opts.cmd) == 'table' and (#opts.cmd == 0 or type(opts.cmd[1]) ~= 'string') then
    problems[#problems + 1] = 'option "cmd" must be a non-empty list of strings'
  end
  if type(opts.context_window) == 'number' and opts.context_window < 1 then
    problems[#problems + 1] = 'option "context_window" must be a positive number of tokens'
  end
  if type(opts.editor) == 'string' and not editors[opts.editor] then
    problems[#problems + 1] = 'option "editor" must be split, vsplit, tab or current'
  end
  table.sort(problems)
  return problems
end

--- The defaults with `opts` on top. Lists (cmd) are replaced, not merged.
---@param opts? table
---@return table config, string[] problems
function M.resolve(opts)
  opts = opts or {}
  local problems = M.problems(opts)
  local config = vim.deepcopy(M.defaults)
  for key, value in pairs(opts) do
    if types[key] ~= nil and type_ok(value, types[key]) then
      local base = config[key]
      -- Option tables (settings, tree, env) merge into the defaults; lists
      -- (cmd) replace them.
      if type(value) == 'table' and type(base) == 'table' and not vim.islist(value) then
        config[key] = vim.tbl_deep_extend('force', base, value)
      else
        config[key] = vim.deepcopy(value)
      end
    end
  end
  return config, problems
end

--- The settings sent in initialize: the user's, plus the context window.
---@param config table
---@return table|nil
function M.initialize_settings(config)
  local settings = vim.deepcopy(config.settings or {})
  if config.context_window then
    settings.context = settings.context or {}
    settings.context.defaultContextWindow = config.context_window
  end
  return next(settings) and settings or nil
end

--- The keys to map: {action = lhs}, from `keymaps = true | table`.
---@param keymaps boolean|table
---@return table<string, string>
function M.keymaps(keymaps)
  if keymaps == true then
    return vim.deepcopy(M.default_keymaps)
  end
  if type(keymaps) ~= 'table' then
    return {}
  end
  local maps = {}
  for action, lhs in pairs(vim.tbl_extend('force', M.default_keymaps, keymaps)) do
    if type(lhs) == 'string' and lhs ~= '' then
      maps[action] = lhs
    end
  end
  return maps
end

return M
