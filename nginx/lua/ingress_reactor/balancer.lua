-- Round-robin load balancing over endpoint lists that the controller pushes into a shared dict
-- (see configuration.lua). Every location sets $proxy_upstream_name; access() checks that the upstream
-- has endpoints (503 otherwise, which balancer_by_lua cannot send) and balance() picks the peer.
--
-- A retry (proxy_next_upstream) goes to an endpoint the request has not tried yet; a request tries at
-- most 3 endpoints, or its route's number (proxy-next-upstream-tries). A route's timeouts
-- (proxy-connect-timeout, proxy-send-timeout, proxy-read-timeout) come from the router in
-- $ingress_reactor_upstream_options: "<connect ms> <send ms> <read ms> <tries>", 0 and -1 for defaults.
--
-- Each worker keeps the decoded list per upstream with the version it was decoded at, so a request
-- costs one shared-dict read of a number, and a list is decoded again only after it changed.
local ngx_balancer = require("ngx.balancer")
local cjson = require("cjson.safe")
local filled = require("ingress_reactor.filled")

local ngx = ngx
local ngx_log = ngx.log
local ERR = ngx.ERR
local math_min = math.min
local math_random = math.random

local dict = ngx.shared.ingress_reactor_endpoints

local _M = {}

-- Shared-dict keys; configuration.lua writes them.
_M.VERSION_PREFIX = "v:"
_M.DATA_PREFIX = "e:"

-- upstream name -> { version = number, peers = { { address = ip, host = "ip or [ipv6]", port = n }, ... }, next = index }
local cache = {}

local function lookup(name)
    local version = dict:get(_M.VERSION_PREFIX .. name)
    if not version then
        cache[name] = nil
        return nil
    end
    local entry = cache[name]
    if entry and entry.version == version then
        return entry
    end
    local raw = dict:get(_M.DATA_PREFIX .. name)
    if not raw then
        return nil
    end
    local peers, err = cjson.decode(raw)
    if type(peers) ~= "table" or #peers == 0 then
        ngx_log(ERR, "endpoints of upstream ", name, " are unreadable: ", err or "empty list")
        return nil
    end
    for _, peer in ipairs(peers) do
        -- ngx.balancer parses "host:port" URLs, where IPv6 addresses need brackets.
        if peer.address:find(":", 1, true) then
            peer.host = "[" .. peer.address .. "]"
        else
            peer.host = peer.address
        end
    end
    -- Start each worker at a random position so that workers do not hit the same endpoint in lockstep.
    entry = { version = version, peers = peers, next = math_random(#peers) }
    cache[name] = entry
    return entry
end

function _M.init_worker()
    math.randomseed(ngx.now() * 1000 + ngx.worker.pid())
end

-- access() runs for every proxied request (access_by_lua at http level).
function _M.access()
    local name = ngx.var.proxy_upstream_name
    if not name or name == "" then
        return
    end
    local entry = lookup(name)
    if not entry and not filled.wait(dict, "endpoints") then
        ngx_log(ERR, "no endpoints pushed since NGINX started ", filled.WAIT, " s ago at least; answering 503 for ", name)
    elseif not entry then
        entry = lookup(name) -- the first full push arrived while this request waited
    end
    if not entry then
        return ngx.exit(ngx.HTTP_SERVICE_UNAVAILABLE)
    end
    ngx.ctx.ingress_reactor_upstream = entry
end

local DEFAULT_TRIES = 3

-- upstream_options applies the route's timeouts and returns its tries (nil: the default).
local function upstream_options()
    local v = ngx.var.ingress_reactor_upstream_options
    if not v or v == "" then
        return nil
    end
    local c, s, r, tries = v:match("^(%d+) (%d+) (%d+) (%-?%d+)$")
    if not c then
        ngx_log(ERR, "unreadable upstream options ", v)
        return nil
    end
    c, s, r = tonumber(c), tonumber(s), tonumber(r)
    if c > 0 or s > 0 or r > 0 then
        local ok, err = ngx_balancer.set_timeouts(c > 0 and c / 1000 or nil, s > 0 and s / 1000 or nil, r > 0 and r / 1000 or nil)
        if not ok then
            ngx_log(ERR, "set_timeouts: ", err)
        end
    end
    tries = tonumber(tries)
    if tries < 0 then
        return nil
    end
    return tries
end

function _M.balance()
    local ctx = ngx.ctx
    local entry = ctx.ingress_reactor_upstream
    if not entry then
        -- access() did not run (a subrequest, or a custom template without it): look the upstream up
        -- here. An auth subrequest on the request's own host names its upstream apart (router.route_auth).
        local name = ngx.is_subrequest and ngx.var.ingress_reactor_auth_upstream
        entry = lookup((name ~= nil and name ~= "") and name or ngx.var.proxy_upstream_name or "")
        if not entry then
            return ngx.exit(ngx.HTTP_SERVICE_UNAVAILABLE)
        end
        ctx.ingress_reactor_upstream = entry
    end
    local peers = entry.peers
    local n = #peers
    local i = entry.next
    if i > n then
        i = 1
    end
    local tried = ctx.ingress_reactor_tried
    if not tried then
        local tries = upstream_options() or DEFAULT_TRIES
        if tries == 0 then
            tries = n
        end
        if n > 1 and tries > 1 then
            ctx.ingress_reactor_tried = { [i] = true, count = 1 }
            -- Retries (proxy_next_upstream) go to other endpoints.
            local ok, err = ngx_balancer.set_more_tries(math_min(n, tries) - 1)
            if not ok then
                ngx_log(ERR, "set_more_tries: ", err)
            end
        end
    else
        -- A retry. The round-robin position is the worker's, and its other requests moved it since
        -- this request's last try: skip the endpoints this request already tried while others are left.
        if tried.count < n then
            while tried[i] do
                i = i % n + 1
            end
        end
        tried[i] = true
        tried.count = tried.count + 1
    end
    entry.next = i % n + 1
    local peer = peers[i]
    local ok, err = ngx_balancer.set_current_peer(peer.host, peer.port)
    if not ok then
        ngx_log(ERR, "set_current_peer ", peer.host, ":", peer.port, ": ", err)
        return ngx.exit(ngx.HTTP_INTERNAL_SERVER_ERROR)
    end
end

return _M
