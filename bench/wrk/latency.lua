-- Prints the latency tail wrk's --latency table leaves out (p99.9 and the
-- maximum, in microseconds) as one line that bench/lib.sh's parse_wrk reads.
-- bench/wrk/pipeline.lua loads this file too, so every load reports it.
done = function(summary, latency, requests)
  io.write(string.format("TAIL p99.9_us=%d max_us=%d\n", latency:percentile(99.9), latency.max))
end
