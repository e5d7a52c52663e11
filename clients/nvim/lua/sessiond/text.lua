-- Text from a session (previews, labels, names, first messages, paths, the daemon's
-- messages quoting them) made inert before the plugin shows it.
--
-- A session file may hold line breaks, terminal escapes or bidirectional overrides in
-- any string: shown as they are, they split a picker row or a message in two (a line
-- that reads as the plugin's own), break nvim_buf_set_lines, or show text other than
-- what is there. Each such character is spelled as an escape ("\n", "\x1b", "\u202e").
local M = {}

local NAMED = { ['\n'] = '\\n', ['\t'] = '\\t', ['\r'] = '\\r' }

local function byte_escape(c)
  return NAMED[c] or ('\\x%02x'):format(c:byte())
end

---@param text any
---@return any text, inert when it is a string
function M.inert(text)
  if type(text) ~= 'string' then
    return text
  end
  -- C0 controls and DEL; C1 controls (U+0080-U+009F); the line and paragraph separators
  -- and bidirectional embeddings and overrides (U+2028-U+202E); the isolates
  -- (U+2066-U+2069).
  text = text:gsub('[%z\1-\31\127]', byte_escape)
  text = text:gsub('\194([\128-\159])', byte_escape)
  text = text:gsub('\226\128([\168-\174])', function(c)
    return ('\\u%04x'):format(0x2000 + c:byte() - 128)
  end)
  text = text:gsub('\226\129([\166-\169])', function(c)
    return ('\\u%04x'):format(0x2040 + c:byte() - 128)
  end)
  return text
end

return M
