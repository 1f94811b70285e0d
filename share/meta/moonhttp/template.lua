---@meta moonhttp.template
-- lua-language-server annotations for `require "moonhttp.template"` (docs/reference/template.md).

local template = {}

---Compiles a template source: a function of `env` answering the text, or `nil, err`.
---@param src string
---@param name? string
---@return (fun(env: table): string)|nil render
---@return string? err
function template.compile(src, name) end

---Renders a template file with `env`.
---@param file string
---@param env table
---@return string|nil text
---@return string? err
function template.render(file, env) end

---HTML text escaping.
---@param v any
---@return string
function template.escape(v) end

return template
