-- Waiting calls inside the user's own coroutines. A waiting call (a socket
-- read, http.sleep, a fetch) yields its coroutine with a private marker;
-- coroutine.resume below sees the marker and, instead of returning it to
-- the user, yields its own coroutine with it, level by level, until the
-- task's coroutine yields to the loop. When the loop resumes the task, the
-- results travel back down: each level resumes the coroutine it passed the
-- yield up from. lua-nginx-module does the same in C
-- (ngx_http_lua_coroutine_resume / ngx_http_lua_run_thread).
--
-- guard_into and guard_back tell the CPU watchdog (lua_guard.h) which
-- thread runs, so a loop that never yields inside a user coroutine is
-- stopped like one in the handler itself.
return function(marker, guard_into, guard_back)
  local co_resume, co_yield, co_create, co_close = coroutine.resume, coroutine.yield,
    coroutine.create, coroutine.close

  local function resume(co, ...)
    guard_into(co)
    return guard_back(co_resume(co, ...))
  end

  local function pass(co, ok, first, ...)
    if ok and first == marker then
      return pass(co, resume(co, co_yield(marker)))
    end
    return ok, first, ...
  end

  function coroutine.resume(co, ...)
    return pass(co, resume(co, ...))
  end

  function coroutine.wrap(f)
    local co = co_create(f)
    local function finish(ok, ...)
      if ok then return ... end
      local err = ...
      co_close(co)
      error(err, type(err) == "string" and 2 or 0)
    end
    return function(...)
      return finish(pass(co, resume(co, ...)))
    end
  end
end
