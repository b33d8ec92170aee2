-- The marker that a full push has filled a shared dict since NGINX created it (configuration.lua writes
-- it), and the wait for it. A freshly started NGINX has empty dicts until the controller's first full
-- push, some milliseconds later: a request or TLS handshake that arrives then waits for the push (up to
-- WAIT seconds) instead of getting a 503 or the default certificate. A reload keeps the dicts and their
-- marker, so only the first moments after a start ever wait.
local ngx = ngx
local ngx_sleep = ngx.sleep
local ngx_now = ngx.now
local ngx_update_time = ngx.update_time

local _M = {}

_M.KEY = "filled"
-- WAIT bounds the wait of one request or handshake, in seconds; STEP is how often the marker is read.
_M.WAIT = 2
_M.STEP = 0.005

-- Once a worker has seen a dict filled it stays filled for the worker's life: only a new NGINX (new
-- workers) or a reload that resized the dict (new workers too) starts one empty.
local seen = {}

-- wait returns true once dict (named name) is filled, false if it is not after WAIT seconds. A worker
-- waits in vain once at most: if the controller cannot push, later requests go on without waiting.
function _M.wait(dict, name)
    if seen[name] then
        return true
    end
    if dict:get(_M.KEY) ~= nil then
        seen[name] = true
        return true
    end
    local deadline = ngx_now() + _M.WAIT
    repeat
        ngx_sleep(_M.STEP)
        ngx_update_time()
        if dict:get(_M.KEY) ~= nil then
            seen[name] = true
            return true
        end
    until ngx_now() >= deadline
    seen[name] = true
    return false
end

return _M
