-- busted output handler for finding where spec time goes: the usual terminal
-- output, and a line per test and per file with its wall time, appended to
-- $TIMING_OUT (default /tmp/mh-spec-times.txt), e.g.
--   TIMING_OUT=/tmp/t.txt MOONHTTP_BIN=$PWD/build/moonhttp busted -o spec/timing_output.lua
--   sort -rn /tmp/t.txt | head
return function(options)
  local busted = require "busted"
  local socket = require "socket"
  local handler = require("busted.outputHandlers.utfTerminal")(options)
  local out = assert(io.open(os.getenv("TIMING_OUT") or "/tmp/mh-spec-times.txt", "a"))
  local t0, f0 = {}, {}
  busted.subscribe({ "test", "start" }, function(el) t0[el] = socket.gettime(); return nil, true end)
  busted.subscribe({ "test", "end" }, function(el, _, status)
    out:write(string.format("%7.2f %s %s :: %s\n", socket.gettime() - t0[el], status,
      el.trace and el.trace.short_src or "?", handler.getFullName(el)))
    out:flush()
    return nil, true
  end)
  busted.subscribe({ "file", "start" }, function(el) f0[el] = socket.gettime(); return nil, true end)
  busted.subscribe({ "file", "end" }, function(el)
    out:write(string.format("%7.2f FILE %s\n", socket.gettime() - f0[el], el.name))
    out:flush()
    return nil, true
  end)
  return handler
end
