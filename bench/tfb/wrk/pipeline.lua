-- wrk -s bench/tfb/wrk/pipeline.lua URL -- PATH: HTTP/1.1 pipelining 16
-- deep (the plaintext test's depth): every write carries 16 GET PATH. wrk
-- counts each parsed response as one request.
local batch
init = function(args)
  batch = string.rep("GET " .. (args[1] or "/plaintext") .. " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 16)
end
request = function() return batch end
