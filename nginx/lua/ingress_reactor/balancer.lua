-- Round-robin load balancing over endpoint lists that the controller pushes into a shared dict
-- (see configuration.lua). Every location sets $proxy_upstream_name; access() checks that the upstream
-- has endpoints (503 otherwise, which balancer_by_lua cannot send) and balance() picks the peer.
--
-- A retry (proxy_next_upstream) goes to an endpoint the request has not tried yet; a request tries at
-- most the ConfigMap's proxy-next-upstream-tries (3) endpoints, or its route's number. A route's timeouts
-- (proxy-connect-timeout, proxy-send-timeout, proxy-read-timeout) come from the router in
-- $ingress_reactor_upstream_options: "<connect ms> <send ms> <read ms> <tries>", 0 and -1 for defaults.
--
-- A route's balancing settings (affinity, upstream-hash-by, load-balance) come from the router in
-- $ingress_reactor_balance, the JSON that balancing.lua describes: cookie affinity picks the endpoint in
-- access() (which may set the cookie), hashing and EWMA in balance(), and log() feeds EWMA its samples.
-- Hashing and balanced affinity share one ring per upstream and endpoint list; EWMA statistics are per
-- upstream and endpoint, and outlive changes of the list for the endpoints that remain.
--
-- Each worker keeps the decoded list per upstream with the version it was decoded at, so a request
-- costs one shared-dict read of a number, and a list is decoded again only after it changed.
local ngx_balancer = require("ngx.balancer")
local cjson = require("cjson.safe")
local filled = require("ingress_reactor.filled")
local balancing = require("ingress_reactor.balancing")

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
    local ids = {}
    for i, peer in ipairs(peers) do
        -- ngx.balancer parses "host:port" URLs, where IPv6 addresses need brackets.
        if peer.address:find(":", 1, true) then
            peer.host = "[" .. peer.address .. "]"
        else
            peer.host = peer.address
        end
        -- As $upstream_addr writes it.
        ids[i] = peer.host .. ":" .. peer.port
    end
    -- Start each worker at a random position so that workers do not hit the same endpoint in lockstep.
    entry = { name = name, version = version, peers = peers, ids = ids, next = math_random(#peers), tag = balancing.upstream_tag(name) }
    cache[name] = entry
    return entry
end

-- The tries of routes without proxy-next-upstream-tries: the ConfigMap's (set_default_tries), 3 by default.
local default_tries = 3

-- set_default_tries sets the tries of routes without their own (the ConfigMap's
-- proxy-next-upstream-tries; 0: each endpoint once); init_by_lua calls it.
function _M.set_default_tries(n)
    default_tries = n
end

function _M.init_worker()
    math.randomseed(ngx.now() * 1000 + ngx.worker.pid())
end

-- Balancing settings by the value of $ingress_reactor_balance, compiled once per worker; the table
-- starts again when it holds MAX_SETTINGS values (settings of routes that are gone).
local MAX_SETTINGS = 1000
local settings_cache, settings_count = {}, 0

-- settings returns the compiled balancing settings of the request's route, or nil for round robin.
local function settings()
    local raw = ngx.var.ingress_reactor_balance
    if not raw or raw == "" then
        return nil
    end
    local s = settings_cache[raw]
    if s ~= nil then
        return s or nil
    end
    local v = cjson.decode(raw)
    s = false
    if type(v) == "table" then
        if v.hash then
            local parts, err = balancing.parse_expression(v.hash)
            if parts then
                s = { hash = parts, subset = v.subset }
            else
                ngx_log(ERR, "upstream-hash-by ", v.hash, ": ", err)
            end
        elseif type(v.cookie) == "table" then
            s = { cookie = v.cookie }
        elseif v.lb == "ewma" then
            s = { ewma = true }
        end
    end
    if not s then
        ngx_log(ERR, "unreadable balancing settings ", raw, "; round robin")
    end
    if settings_count >= MAX_SETTINGS then
        settings_cache, settings_count = {}, 0
    end
    settings_cache[raw], settings_count = s, settings_count + 1
    return s or nil
end

-- ring returns the hash ring of entry's endpoints, built on first use.
local function ring(entry)
    local r = entry.ring
    if not r then
        r = balancing.ring(entry.ids)
        entry.ring = r
    end
    return r
end

-- tokens returns the persistent-affinity cookie values of entry's endpoints under key: value -> index
-- and index -> value.
local function tokens(entry, key)
    entry.tokens = entry.tokens or {}
    local t = entry.tokens[key]
    if not t then
        t = { by_value = {}, by_index = {} }
        for i, id in ipairs(entry.ids) do
            local v = balancing.token(key, id)
            t.by_value[v], t.by_index[i] = i, v
        end
        entry.tokens[key] = t
    end
    return t
end

-- EWMA statistics per upstream name (id -> { ewma, at }), synced to each new endpoint list.
local ewma_stats = {}

local function stats(entry)
    local st = ewma_stats[entry.name]
    if not st then
        st = {}
        ewma_stats[entry.name] = st
    end
    if not entry.ewma_synced then
        balancing.sync(st, entry.ids, ngx.now())
        entry.ewma_synced = true
    end
    return st
end

-- set_cookie adds the affinity cookie to the response; false when the phase does not allow it.
local function set_cookie(c, value)
    local ok, err = pcall(function()
        local v = balancing.cookie_header(c, value, ngx.var.https == "on", ngx.var.http_user_agent, ngx.now())
        local h = ngx.header["Set-Cookie"]
        if type(h) == "table" then
            h[#h + 1] = v
            ngx.header["Set-Cookie"] = h
        elseif h then
            ngx.header["Set-Cookie"] = { h, v }
        else
            ngx.header["Set-Cookie"] = v
        end
    end)
    if not ok then
        ngx_log(ERR, "setting the affinity cookie: ", err)
    end
    return ok
end

-- new_sticky picks an endpoint for a request without a usable affinity cookie (or whose try failed,
-- with change-on-failure), leaving out those in skip, and sets the cookie to it. Balanced affinity
-- draws a random key and takes its endpoint on the ring; persistent affinity takes the next endpoint
-- in round-robin order and writes its token.
local function new_sticky(entry, c, skip)
    local n = #entry.peers
    local i, value
    if c.persistent then
        i = entry.next
        for _ = 1, n do
            if i > n then
                i = 1
            end
            if not (skip and skip[i]) then
                break
            end
            i = i + 1
        end
        if i > n then
            i = 1
        end
        entry.next = i % n + 1
        value = tokens(entry, c.key).by_index[i]
    else
        local r = ring(entry)
        -- A few draws find a key whose endpoint is not in skip (ingress-nginx draws up to 20).
        for _ = 1, 20 do
            value = balancing.new_key()
            i = balancing.find(r, balancing.hash(value))
            if not (skip and skip[i]) then
                break
            end
        end
    end
    set_cookie(c, value .. "|" .. entry.tag)
    return i
end

-- sticky returns the endpoint of the request's affinity cookie, or picks one and sets the cookie.
local function sticky(entry, c)
    -- Not $cookie_<name>, which matches names in any case and takes the first cookie of the name: a
    -- cookie of the same name that another host set for a parent domain comes first when it is older.
    local i, v, tag
    local header = ngx.var.http_cookie
    for _, raw in ipairs(balancing.cookie_values(header, c.name)) do
        -- The key keeps its endpoint whichever upstream's tag it carries (the router chose the upstream).
        v, tag = balancing.split_cookie(raw)
        if c.persistent then
            -- An endpoint that is gone no longer has a token: the request gets a new one.
            i = tokens(entry, c.key).by_value[v]
        elseif balancing.valid_key(v) then
            -- Balanced: the key's endpoint on the current ring, which changes for the keys that a new
            -- endpoint takes over, and for those of an endpoint that is gone.
            i = balancing.find(ring(entry), balancing.hash(v))
        end
        if i then
            -- A cookie written before tags gets this upstream's, so that the router keeps its client on
            -- this side of a canary from now on (else the canary's rules decide each of its requests);
            -- not when it has such a cookie behind an untagged one of another host, each time.
            if not tag and not balancing.cookie_has_tag(header, c.name, entry.tag) then
                set_cookie(c, v .. "|" .. entry.tag)
            end
            break
        end
    end
    return i or new_sticky(entry, c)
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
    local ctx = ngx.ctx
    ctx.ingress_reactor_upstream = entry
    local s = settings()
    if s and s.cookie then
        -- Here rather than in balance(), where the response's headers cannot be set.
        ctx.ingress_reactor_sticky = sticky(entry, s.cookie)
    end
end


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

-- first_pick returns the endpoint of a request's first try under settings s.
local function first_pick(entry, s, ctx)
    local n = #entry.peers
    if s then
        if s.cookie and ctx.ingress_reactor_sticky then
            return ctx.ingress_reactor_sticky
        elseif s.hash then
            local h = balancing.hash(balancing.evaluate(s.hash, ngx.var))
            ctx.ingress_reactor_hash = h
            if s.subset and s.subset > 1 then
                local set = balancing.walk(ring(entry), h, s.subset)
                return set[math_random(#set)]
            end
            return balancing.find(ring(entry), h)
        elseif s.ewma then
            ctx.ingress_reactor_ewma = true
            return balancing.pick_ewma(entry.ids, stats(entry), nil, ngx.now())
        end
    end
    local i = entry.next
    if i > n then
        i = 1
    end
    entry.next = i % n + 1
    return i
end

-- retry_pick returns the endpoint of a retry (proxy_next_upstream) under settings s: one the request
-- has not tried while there is one, except with cookie affinity without change-on-failure, which
-- stays on the cookie's endpoint (as ingress-nginx).
local function retry_pick(entry, s, ctx, tried)
    local n = #entry.peers
    local skip = tried.count < n and tried or nil
    if s then
        if s.cookie and ctx.ingress_reactor_sticky then
            if not s.cookie.change_on_failure then
                return ctx.ingress_reactor_sticky
            end
            -- The cookie follows the new endpoint (where the phase allows setting it).
            local i = new_sticky(entry, s.cookie, skip)
            ctx.ingress_reactor_sticky = i
            return i
        elseif s.hash and ctx.ingress_reactor_hash then
            return balancing.find(ring(entry), ctx.ingress_reactor_hash, skip)
        elseif s.ewma then
            return balancing.pick_ewma(entry.ids, stats(entry), skip, ngx.now())
        end
    end
    -- The round-robin position is the worker's, and its other requests moved it since this request's
    -- last try: skip the endpoints this request already tried while others are left.
    local i = entry.next
    if i > n then
        i = 1
    end
    if skip then
        while skip[i] do
            i = i % n + 1
        end
    end
    entry.next = i % n + 1
    return i
end

function _M.balance()
    local ctx = ngx.ctx
    local entry = ctx.ingress_reactor_upstream
    local s
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
    if not ngx.is_subrequest then
        -- A subrequest shares its parent's variables: the parent route's settings are not its own.
        s = settings()
    end
    local peers = entry.peers
    local n = #peers
    local i
    local tried = ctx.ingress_reactor_tried
    if not tried then
        i = first_pick(entry, s, ctx)
        local tries = upstream_options() or default_tries
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
        i = retry_pick(entry, s, ctx, tried)
        if not tried[i] then
            tried[i] = true
            tried.count = tried.count + 1
        end
    end
    local peer = peers[i]
    local ok, err = ngx_balancer.set_current_peer(peer.host, peer.port)
    if not ok then
        ngx_log(ERR, "set_current_peer ", peer.host, ":", peer.port, ": ", err)
        return ngx.exit(ngx.HTTP_INTERNAL_SERVER_ERROR)
    end
end

-- last returns the last value of a list variable ($upstream_addr: "a, b : c").
local function last(v)
    return v and v:match("([^%s,:]+)%s*$")
end

-- log runs in the log phase of every request (nginx.tmpl): a request balanced by EWMA gives the
-- latency of its last try to its endpoint's statistics.
function _M.log()
    local ctx = ngx.ctx
    if not ctx.ingress_reactor_ewma then
        return
    end
    local entry = ctx.ingress_reactor_upstream
    local addr = ngx.var.upstream_addr
    local id = addr and addr:match("([^%s,]+)%s*$")
    if not entry or not id then
        return
    end
    local rtt = (tonumber(last(ngx.var.upstream_connect_time)) or 0) + (tonumber(last(ngx.var.upstream_response_time)) or 0)
    balancing.observe(stats(entry), id, rtt, ngx.now())
end

return _M
