-- One line for a whole entry (as session/entries and session/entry answer), for
-- lists of entries, as the daemon's previews are for tree nodes. Entries come from
-- files any program may have written: every field is checked, and the line is inert.
local inert = require('sessiond.text').inert

local M = {}

local function str(v)
  return type(v) == 'string' and v or ''
end

local function tbl(v)
  return type(v) == 'table' and v or {}
end

local function content_text(content)
  if type(content) == 'string' then
    return content
  end
  local parts = {}
  for _, block in ipairs(tbl(content)) do
    block = tbl(block)
    if block.type == 'text' then
      parts[#parts + 1] = str(block.text)
    elseif block.type == 'toolCall' then
      parts[#parts + 1] = ('[%s call]'):format(block.name ~= nil and str(block.name) or 'tool')
    elseif block.type == 'image' then
      parts[#parts + 1] = '[image]'
    end
  end
  return table.concat(parts, ' ')
end

local function text_of(entry)
  local kind = entry.type
  if kind == 'message' then
    local message = tbl(entry.message)
    local role = str(message.role) ~= '' and message.role or 'message'
    local tool = role == 'toolResult' and str(message.toolName) ~= '' and (' ' .. message.toolName) or ''
    local body = content_text(message.content)
    if body == '' then
      body = str(message.command) ~= '' and message.command or str(message.summary)
    end
    return ('%s%s: %s'):format(role, tool, body)
  elseif kind == 'compaction' or kind == 'branch_summary' then
    return ('%s: %s'):format((kind:gsub('_', ' ')), str(entry.summary))
  elseif kind == 'custom_message' then
    local custom = str(entry.customType)
    return ('%s: %s'):format(custom ~= '' and custom or 'custom message', content_text(entry.content))
  elseif kind == 'label' then
    local label = str(entry.label)
    return ('label %s: %s'):format(str(entry.targetId), label ~= '' and label or '(cleared)')
  elseif kind == 'model_change' then
    return ('model: %s/%s'):format(str(entry.provider), str(entry.modelId))
  elseif kind == 'session_info' then
    return 'session name: ' .. str(entry.name)
  end
  return type(kind) == 'string' and (kind:gsub('_', ' ')) or 'entry'
end

--- "user: Fix the table of contents…": the entry's role or type and its text on one
--- inert line, whitespace runs collapsed.
---@param entry table
---@return string
function M.preview(entry)
  local text = text_of(tbl(entry))
  -- Escapes first, so that a line break shows as "\n" rather than as a space.
  return (inert(text):gsub('%s+', ' '):gsub('^ ', ''):gsub(' $', ''))
end

--- "message (user)", "compaction".
function M.kind(entry)
  entry = tbl(entry)
  local role = entry.type == 'message' and tbl(entry.message).role
  if type(role) == 'string' then
    return inert(('%s (%s)'):format(str(entry.type), role))
  end
  return inert(str(entry.type))
end

return M
