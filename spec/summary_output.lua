-- busted output handler: the usual terminal output, then one plain line
-- "N passed, N failed, N skipped" that CI log readers understand.
return function(options)
  local busted = require "busted"
  local handler = require("busted.outputHandlers.utfTerminal")(options)
  busted.subscribe({ "suite", "end" }, function(_, count, total)
    if count == total then
      io.write(string.format("\n%d passed, %d failed, %d skipped\n", #handler.successes,
        #handler.failures + #handler.errors, #handler.pendings))
      io.flush()
    end
    return nil, true
  end)
  return handler
end
