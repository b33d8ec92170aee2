-- Request and connection limits per client address (limit-rps, limit-rpm, limit-connections,
-- limit-burst-multiplier, limit-allowlist; nginx/ann_ratelimit.go) over the shared dict
-- ingress_reactor_limits, so that a new or changed limit is route data and never a reload. The router
-- calls enter() with a route's validated "limit" object once it has admitted the request; the log
-- phase calls leave(), which releases the request's connection count, also when the request failed.
--
-- Rates are a leaky bucket with NGINX's limit_req semantics (burst, nodelay), kept as the bucket's
-- "theoretical arrival time" (GCRA): the key holds, in milliseconds, when the bucket will be empty. A
-- request adds one interval (1000 / rps or 60000 / rpm ms); it is admitted when the bucket then holds
-- at most burst + 1 intervals beyond now, so burst + 1 requests pass at once and then one per interval,
-- as limit_req with burst and nodelay does. The key names the rate and burst (compile_limit in
-- router.lua): a bucket's debt is time at its own rate, so after a changed limit-rps, limit-rpm or
-- limit-burst-multiplier every client starts a new bucket at the new rate (NGINX keeps its excess in
-- requests, so a raised limit helps at once there too; the debt of the old rate would refuse a client
-- for up to (burst + 1) old intervals, minutes with limit-rpm). A refused request takes its interval back, so it counts
-- against nothing (nor against the other rate). The entry expires when its bucket is empty, so an idle
-- client costs no memory and starts with an empty bucket. Every step is one atomic dict operation: the
-- workers share the buckets without a lock; when two workers admit requests of one client in the same
-- instant, the expiry may be set one interval early, which admits at most one request more.
--
-- Connections are a counter per key, taken on entry and given back in the log phase; the key travels
-- in $ingress_reactor_limit_conn, which survives ngx.exec into a profile's named location (ngx.ctx
-- does not).
--
-- When the dict is full, NGINX evicts the least recently used entries: an evicted bucket starts
-- empty, an evicted connection count at zero (that client may then exceed its limit until its
-- requests end). docs/annotations.md and --limits-dict-size say how much a megabyte holds.
local ngx = ngx
local ngx_var = ngx.var
local ngx_log = ngx.log
local ERR = ngx.ERR

local dict = ngx.shared.ingress_reactor_limits

local _M = {}

-- REQ_STATUS answers a request over limit-rps or limit-rpm, CONN_STATUS one over limit-connections:
-- the ConfigMap's limit-req-status-code and limit-conn-status-code (set_status), 503 by default.
_M.REQ_STATUS = 503
_M.CONN_STATUS = 503

-- Idle connection counters are dropped this long after they reach zero, in seconds.
local IDLE_COUNTER_TTL = 60

-- take adds one interval to the bucket under key; true when the request is admitted.
local function take(key, interval, burst, now)
    local tat, err = dict:incr(key, interval, now, interval / 1000)
    if not tat then
        ngx_log(ERR, "rate limit: ", err, "; the request is admitted")
        return true, false
    end
    local debt = tat - now
    if debt < interval then
        -- The entry outlived the moment its bucket emptied (expiry has millisecond steps): empty it.
        dict:incr(key, interval - debt)
        debt = interval
    end
    if debt > (burst + 1) * interval then
        dict:incr(key, -interval)
        return false
    end
    dict:expire(key, debt / 1000)
    return true, true
end

local function give_back(key, interval)
    dict:incr(key, -interval)
end

-- enter applies limit l (a compiled route "limit": zone, rps, rps_burst, rpm, rpm_burst, conn, allow)
-- to a client whose address is addr (4 or 16 bytes). It returns nil when the request may go on, else
-- the status to answer.
function _M.enter(l, addr, admits)
    if l.allow and admits(l.allow, addr) then
        return nil
    end
    local now = ngx.now() * 1000
    local rps_key, rps_taken
    if l.rps then
        rps_key = l.rps_key .. addr
        local ok
        ok, rps_taken = take(rps_key, l.rps_interval, l.rps_burst, now)
        if not ok then
            return _M.REQ_STATUS
        end
    end
    if l.rpm then
        if not take(l.rpm_key .. addr, l.rpm_interval, l.rpm_burst, now) then
            if rps_taken then
                give_back(rps_key, l.rps_interval)
            end
            return _M.REQ_STATUS
        end
    end
    if l.conn then
        local key = "c:" .. l.zone .. ":" .. addr
        local n, err = dict:incr(key, 1, 0)
        if not n then
            ngx_log(ERR, "connection limit: ", err, "; the request is admitted")
            return nil
        end
        if n > l.conn then
            dict:incr(key, -1)
            return _M.CONN_STATUS
        end
        if n == 1 then
            dict:expire(key, 0) -- counting again: no longer idle
        end
        local ok = pcall(function()
            ngx_var.ingress_reactor_limit_conn = key
        end)
        if not ok then
            -- Without the variable the count could never be given back.
            dict:incr(key, -1)
            ngx_log(ERR, "limit-connections needs \"set $ingress_reactor_limit_conn \"\";\" in the public location (a custom template lacks it); not counted")
        end
    end
    return nil
end

-- leave gives back the connection the request counted, if any; the log phase calls it.
function _M.leave()
    local key = ngx_var.ingress_reactor_limit_conn
    if not key or key == "" then
        return
    end
    ngx_var.ingress_reactor_limit_conn = ""
    local n = dict:incr(key, -1)
    if n and n <= 0 then
        dict:expire(key, IDLE_COUNTER_TTL)
    end
end

-- set_status records the statuses of requests over the limits; init_by_lua calls it.
function _M.set_status(req, conn)
    _M.REQ_STATUS, _M.CONN_STATUS = req, conn
end

return _M
