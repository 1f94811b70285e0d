-- http.on_start(fn, { once = true }): every worker runs this in fn's place.
-- The worker whose claim takes the job runs fn and marks it done when fn
-- ends, however it ends (the <close> runs on a return, an error, and a kill);
-- the others wait for that, so their own once-function returns only after
-- the job ran, and one of them takes the job over when its worker dies
-- before it is done (the master gives a dead worker's jobs back).
-- claim(key) -> "mine" | "busy" | "done" | "full"; done(key).
return function(claim, done, sleep, stopping)
  local finish = { __close = function(self) done(self.key) end }
  return function(fn, key)
    while true do
      local state = claim(key)
      if state == "mine" then
        local _ <close> = setmetatable({ key = key }, finish)
        return fn()
      elseif state ~= "busy" then -- "done", or "full" (claim logged it)
        return
      end
      if stopping() or not sleep(0.1) then
        return
      end
    end
  end
end
