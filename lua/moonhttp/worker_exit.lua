-- http.on_worker_exit(fn): the app's cleanup of what a dead worker kept outside
-- the server (Redis, PostgreSQL). The master notes each worker that died (a
-- signal, a failing exit status) in shared memory; every worker whose code has
-- hooks looks for such news every POLL seconds, and the first to claim a death
-- runs the hooks for it, each as its own light thread, so a death is heard in
-- exactly one worker and a hook that raises is logged without harm to the
-- worker. The master's replacement for the dead worker claims too. In a stop
-- nobody survives to hear, and a server of one process has no master to tell.
local core = require "moonhttp.core"

local M = {}

local POLL = 0.1 -- seconds: a death is heard well within a second
local hooks = {}
local started = false

-- Hooks running now: a thread ends with the task that spawned it, so listen waits for them.
local running = 0

local function run(fn, info)
  local worker, pid = info.worker, info.pid
  local ok, err = pcall(fn, info)
  running = running - 1
  if not ok then
    core.log("error", string.format("http.on_worker_exit: the hook raised for worker %d (pid %d): %s",
      worker, pid, tostring(err)))
  end
end

local function hear(info)
  for _, fn in ipairs(hooks) do
    -- each hook its own copy: one that changes info does not change what the next sees
    running = running + 1
    core.spawn(run, fn, { worker = info.worker, pid = info.pid, reason = info.reason })
  end
end

local function listen()
  started = true
  if not core.want_worker_exits() then return end
  while true do
    local info = core.claim_worker_exit()
    while info do
      hear(info)
      info = core.claim_worker_exit()
    end
    -- code a reload replaced leaves the news to the new code
    if core.stopping() or core.draining() or not core.sleep(POLL) then break end
  end
  while running > 0 do core.sleep(POLL) end
end

function M.add(fn)
  if type(fn) ~= "function" then error("http.on_worker_exit: expected a function", 3) end
  if started or (#hooks == 0 and not pcall(core.on_start, listen)) then
    error("http.on_worker_exit: only while the script loads", 3)
  end
  hooks[#hooks + 1] = fn
end

return M
