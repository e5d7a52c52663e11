-- The session tree as a flat list for a picker (vim.ui.select).
--
-- A session is mostly one long chain (each message is the child of the one
-- before), so indenting every entry by its distance from the root would push
-- everything off the screen. As in pi's tree view, a line is indented only
-- where the tree branches: the children of an entry with several children
-- get a connector ("├─ ", "└─ ") and one more level of depth.
local inert = require('sessiond.text').inert

local M = {}

local unpack = table.unpack or unpack

M.default_markers = { leaf = '▶', active = '•', none = ' ' }

-- Label entries are shown as the label on their target, not as lines.
local HIDDEN_TYPES = { label = true }

local function value(v)
  if v == vim.NIL then
    return nil
  end
  return v
end

local FALLBACK_TEXT = {
  compaction = 'compaction',
  branch_summary = 'branch summary',
  model_change = 'model change',
  thinking_level_change = 'thinking level change',
  session_info = 'session name',
  label = 'label',
}

local function text_of(node)
  local preview = value(node.preview)
  if preview and preview ~= '' then
    return inert(preview)
  end
  local role = value(node.role)
  if node.type == 'message' and role then
    return inert(role)
  end
  return FALLBACK_TEXT[node.type] or inert(node.type)
end

-- Every node reachable from the roots, parents before children. Iterative:
-- a long session is a chain thousands of entries deep.
local function preorder(nodes, roots)
  local order, stack = {}, {}
  for i = #roots, 1, -1 do
    stack[#stack + 1] = roots[i]
  end
  local seen = {}
  while #stack > 0 do
    local id = table.remove(stack)
    local node = nodes[id]
    -- `seen` guards against a damaged answer listing a node twice.
    if node and not seen[id] then
      seen[id] = true
      order[#order + 1] = id
      local children = node.children or {}
      for i = #children, 1, -1 do
        stack[#stack + 1] = children[i]
      end
    end
  end
  return order
end

--- Build the picker items from a `session/tree` result.
--- opts.markers: {leaf, active, none} overriding `default_markers`;
--- opts.show_all: also list label entries.
---@param tree table {nodes, rootIds, leafId}
---@param opts? {markers?: table, show_all?: boolean}
---@return table[] items {id, node, type, role, label, depth, prefix, active, leaf, text, line}
function M.items(tree, opts)
  opts = opts or {}
  local markers = vim.tbl_extend('force', M.default_markers, opts.markers or {})
  local nodes = {}
  for _, node in ipairs(tree.nodes or {}) do
    nodes[node.id] = node
  end
  local function shown(node)
    return opts.show_all or not HIDDEN_TYPES[node.type]
  end

  local order = preorder(nodes, tree.rootIds or {})

  -- Subtrees without a shown entry are left out, so that a hidden label
  -- entry does not leave a dangling "├─" behind.
  local visible = {}
  for i = #order, 1, -1 do
    local node = nodes[order[i]]
    local any = shown(node)
    for _, child in ipairs(node.children or {}) do
      any = any or visible[child] == true
    end
    visible[node.id] = any
  end

  -- The leaf may be a hidden label entry (labelling moves the leaf, as in
  -- pi): then the nearest shown ancestor is where the user is.
  local leaf = value(tree.leafId)
  while leaf and nodes[leaf] and not shown(nodes[leaf]) do
    leaf = value(nodes[leaf].parentId)
  end

  local items = {}
  local stack = {}
  local roots = vim.tbl_filter(function(id)
    return visible[id]
  end, tree.rootIds or {})
  -- Several roots branch like several children (a session reset to the root).
  local root_connectors = #roots > 1
  for i = #roots, 1, -1 do
    local last = i == #roots
    local own = root_connectors and (last and '└─ ' or '├─ ') or ''
    local rest = root_connectors and (last and '   ' or '│  ') or ''
    stack[#stack + 1] = { roots[i], own, rest, root_connectors and 1 or 0 }
  end
  local listed = {}
  while #stack > 0 do
    local id, own, rest, depth = unpack(table.remove(stack))
    local node = nodes[id]
    listed[id] = true
    local children = vim.tbl_filter(function(child)
      return visible[child] and not listed[child]
    end, node.children or {})
    if shown(node) then
      local label = inert(value(node.label))
      local active = node.active == true
      local is_leaf = id == leaf
      local marker = is_leaf and markers.leaf or active and markers.active or markers.none
      local text = text_of(node)
      items[#items + 1] = {
        id = id,
        node = node,
        type = node.type,
        role = value(node.role),
        label = label,
        depth = depth,
        prefix = own,
        active = active,
        leaf = is_leaf,
        text = text,
        line = ('%s %s%s%s'):format(marker, own, label and ('[' .. label .. '] ') or '', text),
      }
    end
    -- A hidden entry hands its own connector on, so its child stands in its place.
    local child_own = shown(node) and rest or own
    if #children == 1 then
      stack[#stack + 1] = { children[1], child_own, rest, depth }
    else
      for i = #children, 1, -1 do
        local last = i == #children
        stack[#stack + 1] = {
          children[i],
          rest .. (last and '└─ ' or '├─ '),
          rest .. (last and '   ' or '│  '),
          depth + 1,
        }
      end
    end
  end
  return items
end

--- The item for an entry id, and its index.
function M.find(items, id)
  for i, item in ipairs(items) do
    if item.id == id then
      return item, i
    end
  end
end

--- `line` cut to `width` display cells, ending in "…" when cut.
---@param line string
---@param width integer
---@return string
function M.fit(line, width)
  if width < 1 then
    return ''
  end
  if vim.fn.strdisplaywidth(line) <= width then
    return line
  end
  local chars = vim.fn.strchars(line)
  local cut = math.min(chars, width - 1)
  local text = vim.fn.strcharpart(line, 0, cut)
  -- Wide characters take two cells: drop characters until the text and "…" fit.
  while cut > 0 and vim.fn.strdisplaywidth(text) > width - 1 do
    cut = cut - 1
    text = vim.fn.strcharpart(line, 0, cut)
  end
  return text .. '…'
end

--- The display lines of the items (what the picker shows).
function M.lines(items)
  return vim.tbl_map(function(item)
    return item.line
  end, items)
end

return M
