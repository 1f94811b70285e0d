-- The relative links of a Markdown page that lead nowhere: broken_links(page)
-- lists "page -> target" for a missing file and "page -> target#fragment"
-- for a fragment naming no heading of the Markdown page it points at.
-- spec/docs_spec.lua runs it over the tree's pages, spec/install_spec.lua
-- over the installed ones (a link into a folder `make install` leaves out).
local H = require "helper"

-- GitHub's anchor for a heading: lower case, punctuation dropped, spaces to
-- hyphens, a -1, -2... suffix for repeats.
local function anchors(text)
  local set, seen = {}, {}
  local in_code = false
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    if line:find("^```") then in_code = not in_code end
    local title = not in_code and line:match("^#+%s+(.-)%s*$")
    if title then
      local slug = title:lower():gsub("[^%w%- _]", ""):gsub(" ", "-")
      local n = seen[slug]
      seen[slug] = (n or 0) + 1
      set[n and (slug .. "-" .. n) or slug] = true
    end
  end
  return set
end

-- The relative links of a page that lead nowhere: a missing file, or a
-- #fragment naming no heading of the Markdown page it points at.
local function broken_links(page)
  local broken = {}
  local dir = page:match("^(.*)/") or "."
  local text = assert(H.read_file(page), page)
  text = text:gsub("\n```.-\n```", "") -- links inside code blocks are code
  for target, frag in text:gmatch("%]%(([^)#%s]*)#?([^)%s]*)[^)]*%)") do
    if not target:find("^%a+:") then
      local path = target == "" and page or dir .. "/" .. target
      local f = io.open(path, "r")
      if not f then
        broken[#broken + 1] = page .. " -> " .. target
      else
        local body = f:read("a")
        f:close()
        if frag ~= "" and path:find("%.md$") and body and not anchors(body)[frag] then
          broken[#broken + 1] = page .. " -> " .. target .. "#" .. frag
        end
      end
    end
  end
  return broken
end

return broken_links
