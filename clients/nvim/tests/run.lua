-- Entry point: nvim --headless -u NONE -i NONE -n -l tests/run.lua [filter]
-- Loads every tests/test_*.lua in name order, runs them, and exits with the
-- number of failures (capped), so that a shell sees success or failure.
local here = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h')
local root = vim.fn.fnamemodify(here, ':h')
vim.opt.runtimepath:prepend(root)
package.path = here .. '/?.lua;' .. package.path

local R = require('runner')

local files = vim.fn.glob(here .. '/test_*.lua', false, true)
table.sort(files)
for _, file in ipairs(files) do
  R.group = vim.fn.fnamemodify(file, ':t:r'):gsub('^test_%d*_?', '')
  dofile(file)
end
R.group = nil

local failures = R.run(_G.arg and _G.arg[1] or nil)
io.stdout:flush()
os.exit(math.min(failures, 100))
