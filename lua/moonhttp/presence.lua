-- require "moonhttp.presence": who is in which room, seen by every worker.
-- A member is one key of a shared dict owned by the worker that joined it
-- (dict:set's owner = "worker"), so the members a worker holds vanish with
-- it, however it ends: no ghost players after a kill -9 or a crash.
local http = require "moonhttp"

local presence = {}
local Room = {}
Room.__index = Room

local SEP = "\0" -- between the prefix, the room and the member: names may hold anything else

local function check_name(what, s, level)
  if type(s) ~= "string" or s == "" or s:find(SEP, 1, true) then
    error(("presence: %s must be a non-empty string without NUL bytes"):format(what), level + 1)
  end
end

--- presence.new{ dict = name [, prefix = "presence"] }: rooms in the shared dict `name`.
function presence.new(opts)
  if type(opts) ~= "table" or type(opts.dict) ~= "string" then
    error('presence.new: dict must name a shared dict (presence.new{ dict = "presence" })', 2)
  end
  local prefix = opts.prefix or "presence"
  check_name("prefix", prefix, 2)
  return setmetatable({ dict = http.shared[opts.dict], prefix = prefix .. SEP }, Room)
end

local function key(self, room, member)
  check_name("room", room, 3)
  check_name("member", member, 3)
  return self.prefix .. room .. SEP .. member
end

--- p:join(room, member [, data]): member is in room, with data (a string; true when none),
--- until p:leave or the end of this worker. Returns true, or nil and the dict's error.
function Room:join(room, member, data)
  if data ~= nil and type(data) ~= "string" then error("presence: data must be a string", 2) end
  return self.dict:set(key(self, room, member), data or true, { owner = "worker" })
end

--- p:leave(room, member): true.
function Room:leave(room, member)
  return self.dict:delete(key(self, room, member))
end

--- p:list(room): { [member] = data } of everyone in room, whichever worker joined them.
function Room:list(room)
  check_name("room", room, 2)
  local start = self.prefix .. room .. SEP
  local out = {}
  for _, k in ipairs(self.dict:keys(0)) do
    if k:sub(1, #start) == start then
      local v = self.dict:get(k)
      if v ~= nil then out[k:sub(#start + 1)] = v end
    end
  end
  return out
end

--- p:count(room): how many are in room.
function Room:count(room)
  local n = 0
  for _ in pairs(self:list(room)) do n = n + 1 end
  return n
end

return presence
