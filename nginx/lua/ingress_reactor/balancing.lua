-- The balancing methods of a route besides round robin (affinity, upstream-hash-by, load-balance), as
-- pure functions over an upstream's endpoint list, so that they are tested without a request. A
-- route's settings are route data: the router hands them to balancer.lua in $ingress_reactor_balance
-- (the JSON that configuration.lua checked and wrote), and balancer.lua keeps the state per worker:
-- a hash ring per upstream and endpoint list, EWMA statistics per upstream and endpoint.
--
--   {"hash": "<expression>", "subset": n}   consistent hashing on an expression of request variables
--                                           (only the allow-listed ones, see parse_expression); with
--                                           "subset", one of the n endpoints that follow the key on the ring
--   {"lb": "ewma"}                          power of two choices by the latency (EWMA) of each endpoint
--   {"cookie": {...}}                       session affinity by a cookie (cookie_header lists the fields)
--
-- The ring: every endpoint ("address:port", the same string in every worker and every replica) puts
-- points on a 32-bit circle (MD5 of the id and a counter); a key (CRC32) belongs to the endpoint of the
-- first point at or after it. Removing an endpoint moves only its own keys, adding one takes only the
-- keys it now owns.
local bit = require("bit")

local ngx = ngx
local byte = string.byte
local sub = string.sub
local find = string.find
local lower = string.lower
local floor = math.floor
local random = math.random
local exp = math.exp
local md5_bin = ngx.md5_bin
local crc32 = ngx.crc32_long
local concat = table.concat
local tohex = bit.tohex
local gmatch = string.gmatch
local match = string.match

local _M = {}

-- Request variables that an upstream-hash-by expression may name (nginx/ann_affinity.go keeps the
-- same list), and the prefixes of the families it may name.
_M.VARIABLES = { remote_addr = true, binary_remote_addr = true, request_uri = true, uri = true, document_uri = true,
    args = true, query_string = true, host = true, http_host = true, scheme = true, request_method = true,
    server_name = true, server_port = true }
_M.PREFIXES = { "arg_", "http_", "cookie_" }
-- MAX_EXPRESSION bounds an expression, in bytes.
_M.MAX_EXPRESSION = 256

local function allowed_variable(name)
    if _M.VARIABLES[name] then
        return true
    end
    for _, p in ipairs(_M.PREFIXES) do
        if #name > #p and sub(name, 1, #p) == p and not find(name, "[^a-z0-9_]") then
            return true
        end
    end
    return false
end

-- parse_expression splits an upstream-hash-by expression into its parts: literal text (letters,
-- digits, "-", "_", ".", ":", "/") and variables ("$name" or "${name}", names in lower case), or returns
-- nil and why. Each part is { text } or { var = name }.
function _M.parse_expression(s)
    if type(s) ~= "string" or s == "" or #s > _M.MAX_EXPRESSION then
        return nil, "an expression of 1 to " .. _M.MAX_EXPRESSION .. " bytes"
    end
    local parts, i, vars = {}, 1, 0
    while i <= #s do
        if byte(s, i) == 36 then -- "$"
            local name, after = s:match("^{([%w_]+)}()", i + 1)
            if not name then
                name, after = s:match("^([%w_]+)()", i + 1)
            end
            if not name then
                return nil, "\"$\" at byte " .. i .. " starts no variable name"
            end
            name = lower(name)
            if not allowed_variable(name) then
                return nil, "variable $" .. name .. " is not one an expression may use"
            end
            parts[#parts + 1] = { var = name }
            vars = vars + 1
            i = after
        else
            local text, after = s:match("^([%w%-_%.:/]+)()", i)
            if not text then
                return nil, "byte " .. i .. " is not a letter, digit, -, _, ., :, / or a variable"
            end
            parts[#parts + 1] = { text }
            i = after
        end
    end
    if vars == 0 then
        return nil, "no variable: every request would go to the same endpoint"
    end
    return parts
end

-- evaluate returns the value of parsed expression parts for the request whose variables var holds.
function _M.evaluate(parts, var)
    if #parts == 1 and parts[1].var then
        return var[parts[1].var] or ""
    end
    local out = {}
    for i, p in ipairs(parts) do
        out[i] = p.var and (var[p.var] or "") or p[1]
    end
    return concat(out)
end

-- hash returns the ring position of a key.
function _M.hash(key)
    return crc32(key)
end

-- ring builds the hash ring of an endpoint list: ids[i] is endpoint i's id ("address:port"). Every
-- endpoint gets 160 points, fewer from 100 endpoints up (at least 40), so that building the ring of a
-- large upstream stays short.
local RANKS = 65536 -- endpoints of one upstream, at most
function _M.ring(ids)
    local n = math.min(#ids, RANKS)
    local per = 160
    if n > 100 then
        per = math.max(40, floor(16000 / n / 4) * 4)
    end
    -- Each point is one number, hash * RANKS + the rank of its endpoint's id, so that a plain sort
    -- orders points by hash and ties (rare) by id: every worker and replica builds the same ring
    -- whatever the order of the endpoint list.
    local order = {}
    for i = 1, n do
        order[i] = i
    end
    table.sort(order, function(a, b)
        return ids[a] < ids[b]
    end)
    local points = {}
    for rank, i in ipairs(order) do
        local id = ids[i]
        for j = 0, per / 4 - 1 do
            local d = md5_bin(id .. "-" .. j)
            for k = 0, 12, 4 do
                local b1, b2, b3, b4 = byte(d, k + 1, k + 4)
                points[#points + 1] = (((b1 * 256 + b2) * 256 + b3) * 256 + b4) * RANKS + (rank - 1)
            end
        end
    end
    table.sort(points)
    local hashes, owners = {}, {}
    for i, p in ipairs(points) do
        local rank = p % RANKS
        hashes[i], owners[i] = (p - rank) / RANKS, order[rank + 1]
    end
    return { hashes = hashes, owners = owners, n = n }
end

-- position returns the index of the first point at or after h, wrapping around.
local function position(r, h)
    local hs = r.hashes
    local lo, hi = 1, #hs
    if h > hs[hi] then
        return 1
    end
    while lo < hi do
        local mid = floor((lo + hi) / 2)
        if hs[mid] < h then
            lo = mid + 1
        else
            hi = mid
        end
    end
    return lo
end

-- walk returns up to k distinct endpoints (indexes) that follow h on ring r, in ring order, leaving
-- out those in skip (index -> true).
function _M.walk(r, h, k, skip)
    local out, seen = {}, {}
    local owners = r.owners
    local total = #owners
    local p = position(r, h)
    for _ = 1, total do
        local o = owners[p]
        if not seen[o] then
            seen[o] = true
            if not (skip and skip[o]) then
                out[#out + 1] = o
                if #out == k then
                    break
                end
            end
        end
        p = p % total + 1
    end
    return out
end

-- find returns the endpoint (index) of key h on ring r, or the first one after it not in skip.
function _M.find(r, h, skip)
    return _M.walk(r, h, 1, skip)[1]
end

-- EWMA: each endpoint's latency (connect plus response time of each try, in seconds), decayed over
-- DECAY seconds: a score drifts toward 0 while an endpoint gets no request, so a slow endpoint is
-- tried again later.
_M.DECAY = 10

-- score returns the decayed EWMA of stats s (nil: never measured, 0) at now.
function _M.score(s, now)
    if not s then
        return 0
    end
    local td = now - s.at
    if td <= 0 then
        return s.ewma
    end
    return s.ewma * exp(-td / _M.DECAY)
end

-- observe adds a latency sample rtt of endpoint id to stats (id -> { ewma, at }) at now.
function _M.observe(stats, id, rtt, now)
    local s = stats[id]
    if not s then
        stats[id] = { ewma = rtt, at = now }
        return
    end
    local td = now - s.at
    local w = td > 0 and exp(-td / _M.DECAY) or 1
    -- A sample at the same instant weighs like one a little later, so that a burst still moves it.
    if w > 0.9 then
        w = 0.9
    end
    s.ewma = s.ewma * w + rtt * (1 - w)
    s.at = now
end

-- sync keeps the statistics of the endpoints in ids and drops the others; a new endpoint starts at the
-- mean of the known ones (a slow start: it does not get every request until it is measured).
function _M.sync(stats, ids, now)
    local keep, sum, known = {}, 0, 0
    for _, id in ipairs(ids) do
        keep[id] = true
        if stats[id] then
            sum = sum + _M.score(stats[id], now)
            known = known + 1
        end
    end
    for id in pairs(stats) do
        if not keep[id] then
            stats[id] = nil
        end
    end
    if known > 0 then
        for _, id in ipairs(ids) do
            if not stats[id] then
                stats[id] = { ewma = sum / known, at = now }
            end
        end
    end
end

-- pick_ewma returns the endpoint (index) with the lower score of two picked at random among those not
-- in skip (all when every one is).
function _M.pick_ewma(ids, stats, skip, now)
    local candidates = {}
    for i = 1, #ids do
        if not (skip and skip[i]) then
            candidates[#candidates + 1] = i
        end
    end
    if #candidates == 0 then
        for i = 1, #ids do
            candidates[i] = i
        end
    end
    local c = #candidates
    if c == 1 then
        return candidates[1]
    end
    local a = random(c)
    local b = random(c - 1)
    if b >= a then
        b = b + 1
    end
    a, b = candidates[a], candidates[b]
    if _M.score(stats[ids[b]], now) < _M.score(stats[ids[a]], now) then
        return b
    end
    return a
end

-- Cookies.

-- new_key returns a random cookie value for balanced affinity: 16 hex digits, which say nothing about
-- the endpoint (the ring maps them).
function _M.new_key()
    return tohex(random(0, 0x7fffffff), 8) .. tohex(random(0, 0x7fffffff), 8)
end

-- cookie_values returns the values of the cookies named exactly name in a Cookie header (several
-- Cookie headers joined with ";", as $http_cookie has them), in the order the client sent them. Cookie
-- names are case-sensitive: NGINX's $cookie_<name> is not, so an application's own cookie whose name
-- differs only in case ("route" and "ROUTE") would stand in for the affinity cookie. A client may send
-- several cookies of one name (another path, or a parent domain that another host set): the caller takes
-- the first one it can use.
function _M.cookie_values(header, name)
    local out = {}
    if not header then
        return out
    end
    for pair in gmatch(header, "[^;]+") do
        local k, v = match(pair, "^%s*([^=]-)%s*=%s*(.-)%s*$")
        if k == name and v ~= "" then
            out[#out + 1] = v
        end
    end
    return out
end

-- An affinity cookie's value is "<key>|<tag>": the session's key (new_key's or token's) and the tag of
-- the upstream that wrote it, as ingress-nginx's cookie names its backend after a "|": the router sends
-- a request whose cookie names a route's main or canary upstream there before the canary's rules
-- (router.lua canary_affinity), so a client stays on the side it was first sent to.

-- upstream_tag returns the tag of upstream name: 8 hex digits of its MD5, the same in every worker
-- and replica.
function _M.upstream_tag(name)
    return sub(ngx.md5(name), 1, 8)
end

-- split_cookie returns the key of an affinity cookie value and the tag it carries (nil without one: a
-- value written before tags, which still keeps its endpoint).
function _M.split_cookie(v)
    local key, tag = match(v, "^([^|]*)|(%x%x%x%x%x%x%x%x)$")
    if key then
        return key, tag
    end
    return v, nil
end

-- cookie_has_tag reports whether a cookie named name in a Cookie header carries tag. Any of them
-- counts, not only the first tagged one: a cookie of the same name that another host set for a parent
-- domain (tagged with its own upstream) often comes first, and must not hide this route's.
function _M.cookie_has_tag(header, name, tag)
    for _, v in ipairs(_M.cookie_values(header, name)) do
        local _, t = _M.split_cookie(v)
        if t == tag then
            return true
        end
    end
    return false
end

-- valid_key reports whether v is a value new_key could have written.
function _M.valid_key(v)
    return #v == 16 and not find(v, "[^0-9a-f]")
end

-- token returns the cookie value of endpoint id for persistent affinity: a keyed hash (HMAC-SHA1 with
-- the route's key, which only the controller and NGINX know), so that the value does not reveal the
-- endpoint's address, and is the same in every worker and replica.
function _M.token(key, id)
    local mac = ngx.hmac_sha1(key, id)
    local out = {}
    for i = 1, 12 do
        out[i] = tohex(byte(mac, i), 2)
    end
    return concat(out)
end

-- samesite_none_ok reports whether a browser with this User-Agent handles SameSite=None: some older
-- ones reject such cookies or take them for Strict (session-cookie-conditional-samesite-none).
local NO_SAMESITE_NONE = { "Chrome/4", "Chrome/5", "Chrome/6", "CPU iPhone OS 12", "iPad; CPU OS 12" }
function _M.samesite_none_ok(ua)
    if not ua then
        return true
    end
    for _, p in ipairs(NO_SAMESITE_NONE) do
        if find(ua, p, 1, true) then
            return false
        end
    end
    -- Safari (not Chrome on macOS) on macOS 10.14.
    if find(ua, "Macintosh", 1, true) and find(ua, "Intel Mac OS X 10_14", 1, true) and find(ua, "Safari", 1, true)
        and not find(ua, "Chrome", 1, true) then
        return false
    end
    return true
end

-- cookie_header returns the Set-Cookie value for cookie settings c (name, path, domain, expires and
-- max_age in seconds, secure: true for always, else over HTTPS; samesite, samesite_none_conditional)
-- and value. Every field was validated when it was pushed (configuration.lua).
function _M.cookie_header(c, value, https, ua, now)
    local parts = { c.name .. "=" .. value, "Path=" .. c.path }
    if c.domain then
        parts[#parts + 1] = "Domain=" .. c.domain
    end
    if c.expires then
        parts[#parts + 1] = "Expires=" .. ngx.cookie_time(floor(now) + c.expires)
    end
    if c.max_age then
        parts[#parts + 1] = "Max-Age=" .. c.max_age
    end
    if c.secure or https then
        parts[#parts + 1] = "Secure"
    end
    parts[#parts + 1] = "HttpOnly"
    if c.samesite and not (c.samesite == "None" and c.samesite_none_conditional and not _M.samesite_none_ok(ua)) then
        parts[#parts + 1] = "SameSite=" .. c.samesite
    end
    return concat(parts, "; ")
end

return _M
