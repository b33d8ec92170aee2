-- Host and path routing from a shared dict that the controller fills over the status server
-- (configuration.lua), so that a change of Ingress routes is a push, never a reload. nginx.conf has one
-- catch-all server whose location runs route() in the rewrite phase; the location then proxies to the
-- upstream named in $proxy_upstream_name, which balancer.lua resolves to endpoints.
--
-- Matching (the Go model's Route does the same; a shared table test keeps them equal):
--   server: the host's own entry, else the one-label wildcard "*.<host minus its first label>", else the
--           catch-all entry "";
--   path:   an Exact path equal to $uri, else the longest Prefix path that matches element-wise, else the
--           server's fallback (the default backend, or 404).
--   regex:  a host entry with "regex": true (a host with regex paths, as in ingress-nginx) lists its routes
--           in match order, each with a PCRE "pattern" written by the controller: the first that matches
--           $uri wins, else the fallback.
-- Then, in order: over HTTPS, a route with "client_cert" (auth-tls-*) answers 421 when the connection's
-- SNI name is served by an entry with another "client_ca" (its handshake verified with another CA, or
-- none), 400 (or a 302 to its "error_page") when $ssl_client_verify fails its mode, 403 when the subject
-- DN does not match "match_cn", and sets the ssl-client-* request headers (over plain HTTP the same
-- check comes after the redirect to HTTPS, with no certificate; the host's "fallback_client_cert" checks
-- the requests no route matches that go to its "default_backend"); a route with "host_redirect" (from-to-www-redirect) answers 308 (the ConfigMap's http-redirect-code) to its host; CORS (below);
-- a request whose Content-Length is over the route's "body_limit" (else the default, set_body_limit)
-- gets 413, as NGINX answers on entering a location; "app_root"
-- answers "/" with 302, "redirect_url" answers everything with "redirect_code"; a route with "redirect"
-- (when HTTPS is on) or "force_ssl_redirect" answers plain HTTP with 308 (http-redirect-code) to HTTPS (one trailing slash
-- dropped unless "preserve_trailing_slash"), except a route whose path starts with one of the
-- no-tls-redirect-locations (set_no_tls_redirect_locations); source ranges answer 403 to clients they do not admit; a
-- route without upstream answers 404; a route whose upstream has no endpoints goes to its
-- "default_backend" when it has one; a route with "rewrite" changes the path the backend sees, and
-- "upstream_vhost" its Host header; "upstream_options" (timeouts and tries) and "balance" go to
-- balancer.lua, and "limit_rate" and "connection_header" into NGINX variables; a route with a "canary"
-- sends the requests its rule picks (canary_wanted; before it, canary_affinity for those whose affinity
-- cookie names an upstream) to the canary's upstream when that has endpoints, balanced by the canary's
-- "balance". A
-- route with a "profile" continues in the profile's named location; a body without Content-Length of a
-- route without one is read in the default named location, which limits it. The fallback is the host's
-- "default_backend", else the default.
-- A route with "no_access_log" is left out of the access log, one with "rewrite_log" logs its rewrites.
-- Right after "host_redirect", a route with "cors" decides whether the request's Origin is allowed: if
-- so, an OPTIONS request is answered 204 with the CORS headers (a preflight), and every other response
-- of the request (redirects and 403s included) gets them in the header filter. After source ranges, a
-- route with "limit" counts the request against its rate and connection limits (limits.lua) and
-- answers 503 over them. Then a route with "auth" (basic authentication) answers 401 with its
-- "challenge" as WWW-Authenticate unless the Authorization header names a user of the host's
-- "auth_users" list with its password (auth.lua). A route with "satisfy_any" (satisfy: any) lets a
-- client on its "allow" list in without authentication, and one off the list gets the authentication's
-- answer instead of 403 (basic, else the external auth of its profile; either suffices); the router
-- tells the profile's auth request through $ingress_reactor_satisfied (auth_satisfied).
--
-- Each worker keeps the compiled entry of a host with the version it was compiled at: a request costs a
-- few shared-dict reads, and an entry is decoded again only after it changed.
local cjson = require("cjson.safe")
local bit = require("bit")
local filled = require("ingress_reactor.filled")
local limits = require("ingress_reactor.limits")
local auth = require("ingress_reactor.auth")
local balancing = require("ingress_reactor.balancing")
local ssl = require("ngx.ssl")
local metrics = require("ingress_reactor.metrics")

local ngx = ngx
local ngx_var = ngx.var
local ngx_log = ngx.log
local ERR = ngx.ERR
local WARN = ngx.WARN
local byte = string.byte
local sub = string.sub
local find = string.find
local gsub = string.gsub
local re_match = ngx.re.match
local re_find = ngx.re.find
local lower = string.lower
local band = bit.band
local lshift = bit.lshift

local dict = ngx.shared.ingress_reactor_routes
-- The endpoint lists that balancer.lua reads (its VERSION_PREFIX): a route with a default backend
-- falls back to it when its upstream has none.
local endpoints = ngx.shared.ingress_reactor_endpoints
local ENDPOINTS_VERSION_PREFIX = "v:"

local _M = {}

-- Shared-dict keys; configuration.lua writes them.
_M.VERSION_PREFIX = "v:"
_M.DATA_PREFIX = "h:"
_M.DEFAULT_KEY = "default" -- the default backend's upstream ("" for the built-in 404)
-- UNAVAILABLE is the entry of a host whose changed routes did not fit into the dict: it answers 503.
_M.UNAVAILABLE = '{"unavailable":true,"routes":[]}'

-- How often each worker drops the compiled entries of hosts that changed or are gone, in seconds.
local SWEEP_EVERY = 60

-- The profiles of this configuration (set_profiles): name -> true.
local profiles = {}

-- The body limit of routes without their own (set_body_limit), in bytes (0: none), and whether the
-- configuration has the location that limits their bodies without Content-Length; nil when the
-- template leaves the Content-Length check to NGINX.
local default_body_limit
-- The Strict-Transport-Security value of HTTPS responses (set_hsts), or nil.
local hsts
-- The ConfigMap's add-headers (set_add_headers): { {name, value}, ... }, validated by the controller.
local add_headers = {}
-- The status of redirects to HTTPS and of from-to-www-redirect (set_redirect_code).
local redirect_code = 308
-- The path prefixes whose routes are never redirected to HTTPS (set_no_tls_redirect_locations; the
-- ConfigMap's no-tls-redirect-locations, ingress-nginx's default until the template sets it).
local no_tls_redirect_locations = { "/.well-known/acme-challenge" }
-- Whether requests no route matches are logged (set_log_default_backend).
local log_default_backend = false
local DEFAULT_LOCATION = "@ingress_reactor_default"

-- host -> { version, exact = { path -> route }, prefix = { path -> route }, fallback_redirect }
local cache = {}

-- parse_prefix turns "<hex>/<bits>" into { bytes, bits, whole bytes, mask of the partial byte }, or nil.
function _M.parse_prefix(s)
    if type(s) ~= "string" then
        return nil
    end
    local hex, bits = s:match("^(%x+)/(%d+)$")
    if not hex or (#hex ~= 8 and #hex ~= 32) then
        return nil
    end
    bits = tonumber(bits)
    local n = #hex / 2
    if bits > n * 8 then
        return nil
    end
    local raw = hex:gsub("%x%x", function(h)
        return string.char(tonumber(h, 16))
    end)
    local whole = math.floor(bits / 8)
    local rest = bits % 8
    return {
        bytes = raw,
        head = sub(raw, 1, whole),
        whole = whole,
        mask = rest > 0 and band(lshift(0xff, 8 - rest), 0xff) or nil,
        last = rest > 0 and band(byte(raw, whole + 1), band(lshift(0xff, 8 - rest), 0xff)) or nil,
    }
end

local function contains(p, addr)
    if #addr ~= #p.bytes then
        return false
    end
    if p.whole > 0 and sub(addr, 1, p.whole) ~= p.head then
        return false
    end
    if not p.mask then
        return true
    end
    return band(byte(addr, p.whole + 1), p.mask) == p.last
end

local compile_limit

local function compile_ranges(list)
    if type(list) ~= "table" or #list == 0 then
        return nil
    end
    local out = {}
    for i, s in ipairs(list) do
        local p = _M.parse_prefix(s)
        if not p then
            return nil, "bad source range " .. tostring(s)
        end
        out[i] = p
    end
    return out
end

-- rewrite_fields copies the rewrite group's fields of a route entry into its compiled route.
local function rewrite_fields(route, r)
    route.profile, route.profile_required = r.profile, r.profile_required
    route.ingress_namespace, route.ingress_name = r.ingress_namespace, r.ingress_name
    route.service_name, route.service_port = r.service_name, r.service_port
    route.rewrite = r.rewrite
    route.x_forwarded_prefix = r.x_forwarded_prefix
    route.upstream_vhost = r.upstream_vhost
    route.pattern = r.pattern
    route.literal = r.literal
    route.body_limit = r.body_limit
    route.connection_header = r.connection_header
    if r.limit_rate then
        route.limit_rate, route.limit_rate_after = r.limit_rate[1], r.limit_rate[2]
    end
    route.balance = r.balance -- affinity, upstream-hash-by, load-balance: JSON for balancer.lua
    route.sets_vars = r.upstream_options ~= nil or r.limit_rate ~= nil or r.connection_header ~= nil or r.balance ~= nil
    if r.upstream_options then
        -- The form balancer.lua reads from $ingress_reactor_upstream_options.
        route.upstream_options = table.concat(r.upstream_options, " ")
    end
end

-- compile_redirects copies the redirect options of wire route r (validated when stored) into route.
local function compile_redirects(r, route)
    route.redirect_url, route.redirect_code, route.app_root = r.redirect_url, r.redirect_code, r.app_root
    route.force_ssl_redirect = r.force_ssl_redirect == true
    route.preserve_trailing_slash = r.preserve_trailing_slash == true
    route.use_port_in_redirects = r.use_port_in_redirects == true
    route.no_access_log = r.no_access_log == true
    route.rewrite_log = r.rewrite_log == true
    route.default_backend = r.default_backend
    route.host_redirect = r.host_redirect
    route.response_headers = r.response_headers
    route.redirects = route.redirect_url ~= nil or route.app_root ~= nil
end

-- compile_cors turns a route's "cors" object (validated when stored) into what the router matches:
-- any = "*", exact = { origin = true }, wild = { { head = "<scheme>://", tail = ".<domain>[:<port>]" } },
-- and tail, the part of $ingress_reactor_cors after the allowed origin (see cors_headers).
function _M.compile_cors(c)
    if type(c) ~= "table" then
        return nil
    end
    local out = { any = false, exact = {}, wild = {} }
    for _, o in ipairs(c.origins) do
        if o == "*" then
            out.any = true
        else
            local head, tail = o:match("^(.-://)%*(%..*)$")
            if head then
                out.wild[#out.wild + 1] = { head = head, tail = tail }
            else
                out.exact[o] = true
            end
        end
    end
    out.tail = "\n" .. (c.credentials and "true" or "") .. "\n" .. c.methods .. "\n" .. c.headers .. "\n" .. (c.expose or "") .. "\n" .. c.max_age
    return out
end

-- compile_limit copies a route's "limit" object (validated when stored) with its intervals in ms and
-- its allowlist compiled.
compile_limit = function(l)
    if type(l) ~= "table" then
        return nil
    end
    local out = { zone = l.zone, conn = l.conn, rps = l.rps, rpm = l.rpm, rps_burst = l.rps_burst or 0, rpm_burst = l.rpm_burst or 0 }
    out.rps_interval = l.rps and 1000 / l.rps
    out.rpm_interval = l.rpm and 60000 / l.rpm
    -- The buckets' keys, but for the client's address: a changed rate or burst starts new buckets
    -- (limits.lua).
    out.rps_key = l.rps and ("r:" .. l.zone .. ":" .. l.rps .. "/" .. out.rps_burst .. ":")
    out.rpm_key = l.rpm and ("m:" .. l.zone .. ":" .. l.rpm .. "/" .. out.rpm_burst .. ":")
    local err
    out.allow, err = compile_ranges(l.allow)
    if err then
        return nil, err
    end
    return out
end

-- affinity_cookie returns the name of the affinity cookie of balancing settings b (the JSON that
-- configuration.lua wrote), or nil.
local function affinity_cookie(b)
    local v = b and cjson.decode(b)
    return type(v) == "table" and type(v.cookie) == "table" and v.cookie.name or nil
end

-- compile_canary adds to a route's "canary" object (validated when stored) the names of the NGINX
-- variables that hold its header and cookie, and, for canary_affinity, the affinity cookies and
-- upstream tags of the route (main) and of the canary.
local function compile_canary(c, route)
    if type(c) ~= "table" then
        return nil
    end
    local out = { upstream = c.upstream, weight = c.weight, total = c.total, header_value = c.header_value,
        header_pattern = c.header_pattern, balance = c.balance }
    if c.header then
        out.header_var = "http_" .. gsub(lower(c.header), "-", "_")
    end
    if c.cookie then
        out.cookie_var = "cookie_" .. c.cookie
    end
    out.main_cookie, out.affinity_cookie = affinity_cookie(route.balance), affinity_cookie(c.balance)
    if out.main_cookie then
        out.main_tag = balancing.upstream_tag(route.upstream)
    end
    if out.affinity_cookie then
        out.tag = balancing.upstream_tag(c.upstream)
    end
    return out
end

-- canary_affinity decides, before canary_wanted, the requests whose affinity cookie names the main
-- upstream (false) or the canary's (true), as ingress-nginx's balancer did: a client the canary served
-- stays there while the canary has endpoints, and one the main backend served stays there, whatever
-- the canary's rules say. Returns nil for the others.
function _M.canary_affinity(c)
    if not (c.main_cookie or c.affinity_cookie) then
        return nil
    end
    local header = ngx_var.http_cookie
    if not header then
        return nil
    end
    if c.main_cookie and balancing.cookie_has_tag(header, c.main_cookie, c.main_tag) then
        return false
    end
    if c.affinity_cookie and balancing.cookie_has_tag(header, c.affinity_cookie, c.tag) then
        return true
    end
    return nil
end

-- canary_wanted decides whether the request goes to the route's canary c, as ingress-nginx's balancer
-- did: the header first (its value, else its pattern, else "always" and "never"), then the cookie
-- ("always" and "never"), then the weight, at random; a value that decides nothing falls through.
function _M.canary_wanted(c)
    if c.header_var then
        local v = ngx_var[c.header_var]
        if v then
            if c.header_value then
                if v == c.header_value then
                    return true
                end
            elseif c.header_pattern then
                local from, _, err = re_find(v, c.header_pattern, "jo")
                if from then
                    return true
                elseif err then
                    ngx_log(ERR, "canary-by-header-pattern: ", err)
                    return false
                end
            elseif v == "always" then
                return true
            elseif v == "never" then
                return false
            end
        end
    end
    if c.cookie_var then
        local v = ngx_var[c.cookie_var]
        if v == "always" then
            return true
        elseif v == "never" then
            return false
        end
    end
    return c.weight > 0 and math.random(c.total) <= c.weight
end

-- compile builds the lookup tables of a host entry (validated by configuration.lua when stored). A
-- regex host ("regex": true) keeps its routes as a list in match order instead.
local function compile(raw, version)
    local h, err = cjson.decode(raw)
    if type(h) ~= "table" or type(h.routes) ~= "table" then
        return nil, err or "not an object with routes"
    end
    local e = { version = version, exact = {}, prefix = {}, lens = {}, maxlen = 0, routes = {}, redirect = h.redirect == true,
        unavailable = h.unavailable == true, list = h.regex == true and {} or nil }
    e.default_backend = h.default_backend
    e.fallback_client_cert = h.fallback_client_cert
    if type(h.client_ca) == "table" then
        -- Parsed once per entry version; certificates.lua hands it to verify_client per handshake.
        local cert, cerr = ssl.parse_pem_cert(h.client_ca.pem)
        if not cert then
            return nil, "client_ca: " .. tostring(cerr)
        end
        e.client_ca = { id = h.client_ca.id, depth = h.client_ca.depth, cert = cert }
    end
    -- Each user list is parsed once per host entry, whatever the number of routes sharing it.
    local user_lists = {}
    if type(h.auth_users) == "table" then
        for id, lines in pairs(h.auth_users) do
            user_lists[id] = auth.parse_users(lines)
        end
    end
    for _, r in ipairs(h.routes) do
        local route = { upstream = r.upstream or "", redirect = r.redirect == true }
        compile_redirects(r, route)
        -- no-tls-redirect-locations: compared with the route's path, as ingress-nginx compared the
        -- location's (the Ingress's path, not the request's).
        for _, prefix in ipairs(no_tls_redirect_locations) do
            if sub(r.path, 1, #prefix) == prefix then
                route.no_tls_redirect = true
                break
            end
        end
        route.deny, err = compile_ranges(r.deny)
        if err then
            return nil, err
        end
        route.allow, err = compile_ranges(r.allow)
        if err then
            return nil, err
        end
        route.ranges = route.deny ~= nil or route.allow ~= nil
        -- satisfy any takes effect only with an allowlist and authentication (configuration.lua checks
        -- it too): without authentication it would let every address in.
        route.satisfy_any = r.satisfy_any == true and route.allow ~= nil and (r.auth ~= nil or r.profile_required == true)
        rewrite_fields(route, r)
        route.cors = _M.compile_cors(r.cors)
        if r.auth then
            -- A route naming a list the entry lacks admits nobody (configuration.lua refuses such entries).
            route.auth = { challenge = r.auth.challenge, users = user_lists[r.auth.users] or {} }
        end
        route.client_cert = r.client_cert
        route.canary = compile_canary(r.canary, route)
        route.sets_vars = route.sets_vars or (route.canary ~= nil and route.canary.balance ~= nil)
        if r.profile_required then
            -- auth-cache-key: the auth answers are cached per route (its path and kind), as ingress-nginx
            -- cached them per location: an answer for one path must not admit a request for another.
            route.auth_route = (r.exact and "=" or "") .. r.path
        end
        if type(r.metrics) == "table" then
            -- Request metrics: namespace, ingress, service and the Ingress path (never the request's URI).
            route.metrics = r.metrics[1] .. "\t" .. r.metrics[2] .. "\t" .. r.metrics[3] .. "\t" .. r.path
        end
        route.limit, err = compile_limit(r.limit)
        if err then
            return nil, err
        end
        e.routes[#e.routes + 1] = route
        local into = r.exact and e.exact or e.prefix
        if e.list then
            e.list[#e.list + 1] = route
        elseif into[r.path] == nil then
            into[r.path] = route
            if not r.exact and r.path ~= "/" then
                e.lens[#r.path] = true
                e.maxlen = math.max(e.maxlen, #r.path)
            end
        end
    end
    return e
end

local function lookup(host)
    local version = dict:get(_M.VERSION_PREFIX .. host)
    if not version then
        cache[host] = nil
        return nil
    end
    local e = cache[host]
    if e and e.version == version then
        return e
    end
    local raw = dict:get(_M.DATA_PREFIX .. host)
    if not raw then
        return nil
    end
    local err
    e, err = compile(raw, version)
    if not e then
        ngx_log(ERR, "routes of host ", host == "" and "(catch-all)" or host, " are unreadable: ", err)
        return nil
    end
    e.name = host
    -- The request metrics' labels of each route, and of the host's requests that no route matches
    -- (unless they carry the request's host: metrics.labels per request).
    if host ~= "" or not metrics.per_undefined_host() then
        for _, route in ipairs(e.routes) do
            route.metrics_labels = metrics.labels(route.metrics, host, host)
            if route.canary then
                route.canary.metrics_labels = metrics.labels(route.metrics, host, host, route.canary.upstream)
            end
        end
        e.metrics_labels = metrics.labels(nil, host, host)
    end
    cache[host] = e
    return e
end

-- server returns the entry that serves host: its own, its one-label wildcard's, or the catch-all's.
local function server(host)
    local e = lookup(host)
    if e then
        return e
    end
    local dot = find(host, ".", 1, true)
    -- A wildcard covers one label, which is never empty: ".example.com" is not covered.
    if dot and dot > 1 then
        e = lookup("*" .. sub(host, dot))
        if e then
            return e
        end
    end
    return lookup("")
end

-- serves reports whether an Ingress rule names host (lower case), exactly or by the wildcard one label
-- up: the names whose TLS handshakes ssl-reject-handshake lets through. Rules without a host do not
-- count, as ingress-nginx's catch-all server rejected them.
function _M.serves(host)
    filled.wait(dict, "routes")
    if dict:get(_M.VERSION_PREFIX .. host) then
        return true
    end
    local dot = find(host, ".", 1, true)
    return dot ~= nil and dot > 1 and dict:get(_M.VERSION_PREFIX .. "*" .. sub(host, dot)) ~= nil
end

-- client_ca returns the CA that the handshakes for the SNI name (lower case) verify client certificates
-- with, {id, depth, cert}, or nil: that of the entry that serves the name, as route() finds it.
function _M.client_ca(name)
    local e = server(name)
    return e and e.client_ca
end

-- match returns the route of uri in entry e, or nil for the fallback. A Prefix path p matches uri
-- element-wise when uri is p or starts with p .. "/": the candidates are uri itself and uri cut before
-- each "/", longest first, and only lengths that some Prefix path of the host has are looked up. One
-- backward scan of at most the longest Prefix path's length: a long request path costs no more.
local SLASH = byte("/")

local function match(e, uri)
    local r = e.exact[uri]
    if r then
        return r
    end
    local prefix, lens = e.prefix, e.lens
    local n = #uri
    if lens[n] then
        r = prefix[uri]
        if r then
            return r
        end
    end
    for i = math.min(n, e.maxlen + 1), 2, -1 do
        if lens[i - 1] and byte(uri, i) == SLASH then
            r = prefix[sub(uri, 1, i - 1)]
            if r then
                return r
            end
        end
    end
    return prefix["/"]
end

-- match_regex returns the first route of a regex host's list that matches uri, with the captures of
-- the match when the route rewrites; nil when none matches. Patterns are case-insensitive regexes
-- anchored at the start that the controller wrote for PCRE (see pathregex.go); "jo" keeps each compiled
-- once per worker. A route whose pattern is a fixed prefix is compared without a regex. The work is one
-- match per route of the host at most, each bounded by lua_regex_match_limit; a match that exceeds
-- the bound is an error, answered 500.
local function match_regex(e, uri)
    local lower
    for _, r in ipairs(e.list) do
        local lit = r.literal
        if lit then
            lower = lower or string.lower(uri)
            if sub(lower, 1, #lit) == lit then
                return r, r.rewrite and { [0] = sub(uri, 1, #lit) } or nil
            end
        else
            local m, err = re_match(uri, r.pattern, "jo")
            if m then
                return r, m
            end
            if err then
                return nil, nil, err
            end
        end
    end
    return nil
end

-- rewrite applies a route's rewrite target with the captures m of its match: the path changes (the
-- backend sees it, with the original query string, like NGINX's "rewrite ... break") and the route's
-- X-Forwarded-Prefix goes with it. $0-$9 are one digit, as in NGINX; a missing capture is empty.
local function rewrite(r, m)
    local uri = gsub(r.rewrite, "%$(%d)", function(d)
        return m[tonumber(d)] or ""
    end)
    if uri == "" then
        ngx_log(ERR, "rewrite-target ", r.rewrite, " gives an empty path for ", ngx_var.uri)
        return false
    end
    if r.rewrite_log then -- enable-rewrite-log
        ngx_log(ngx.NOTICE, "rewrite-target of host ", ngx_var.host, ": ", ngx_var.uri, " -> ", uri)
    end
    ngx.req.set_uri(uri, false, true)
    if r.x_forwarded_prefix then
        ngx_var.ingress_reactor_forwarded_prefix = r.x_forwarded_prefix
    end
    return true
end

-- apply_rewrite_fields rewrites the path and sets the upstream Host of route r; false when it cannot
-- (an empty rewritten path, or a template without the variables of nginx.tmpl's catch-all location).
local function apply_rewrite_fields(r, captures)
    local ok, res = pcall(function()
        if r.upstream_vhost then
            ngx_var.ingress_reactor_upstream_vhost = r.upstream_vhost
        end
        return not r.rewrite or rewrite(r, captures)
    end)
    if not ok then
        ngx_log(ERR, "applying rewrite-target or upstream-vhost: ", res, " (a custom template must keep the catch-all location's \"set $ingress_reactor_...\" lines)")
        return false
    end
    return res
end

-- client returns the client's address as 4 or 16 bytes; IPv4-mapped IPv6 addresses as IPv4.
local MAPPED = "\0\0\0\0\0\0\0\0\0\0\255\255"
local function client()
    local a = ngx_var.binary_remote_addr
    if #a == 16 and sub(a, 1, 12) == MAPPED then
        return sub(a, 13)
    end
    return a
end

-- in_ranges reports whether addr is in one of the compiled ranges of list.
local function in_ranges(list, addr)
    for _, p in ipairs(list) do
        if contains(p, addr) then
            return true
        end
    end
    return false
end

-- sweep drops compiled entries whose host changed or is gone, so that hosts that come and go do not
-- keep memory in every worker.
local function sweep(premature)
    if premature then
        return
    end
    for host, e in pairs(cache) do
        if dict:get(_M.VERSION_PREFIX .. host) ~= e.version then
            cache[host] = nil
        end
    end
end

function _M.init_worker()
    local ok, err = ngx.timer.every(SWEEP_EVERY, sweep)
    if not ok then
        ngx_log(ERR, "starting the route cache sweep: ", err)
    end
end

-- https_location is where a plain-HTTP request goes on HTTPS. As ingress-nginx does, one trailing slash
-- of the request URI is dropped unless the route preserves it; the port is written when it is not 443,
-- or always when the route asks for it.
local function https_location(host, r)
    local uri = ngx_var.request_uri
    if not (r and r.preserve_trailing_slash) and byte(uri, -1) == SLASH then
        uri = sub(uri, 1, -2)
    end
    local suffix = ngx_var.ingress_reactor_https_port_suffix or ""
    if suffix == "" and r and r.use_port_in_redirects then
        suffix = ":443"
    end
    return "https://" .. host .. suffix .. uri
end

-- route_redirect answers the request when route r redirects it (app-root for "/", then
-- permanent-redirect or temporal-redirect) and returns true; it runs before source ranges and the
-- redirect to HTTPS, as the same annotations did in ingress-nginx.
local function route_redirect(r, host)
    if r.app_root and ngx_var.uri == "/" then
        ngx.redirect(ngx_var.scheme .. "://" .. (ngx_var.http_host or host) .. r.app_root, 302)
        return true
    end
    if r.redirect_url then
        ngx.redirect(r.redirect_url, r.redirect_code)
        return true
    end
    return false
end

-- host_redirect answers a request for a www twin (from-to-www-redirect) with a 308 to the same URL on
-- the route's host: same scheme, the port the client wrote in its Host header, the request URI without
-- one trailing slash (as ingress-nginx does).
local function host_redirect(r)
    local uri = ngx_var.request_uri
    if byte(uri, -1) == SLASH then
        uri = sub(uri, 1, -2)
    end
    local port = (ngx_var.http_host or ""):match(":(%d+)$")
    return ngx.redirect(ngx_var.scheme .. "://" .. r.host_redirect .. (port and (":" .. port) or "") .. uri, redirect_code)
end

-- allowed_origin returns what Access-Control-Allow-Origin answers to the request under compiled CORS
-- settings c: "*" when any origin is allowed (as ingress-nginx, whatever the request's Origin), the
-- request's Origin when it is on the list (compared in lower case, a wildcard covering one label), or
-- nil.
local MAX_ORIGIN = 1024

local function allowed_origin(c)
    if c.any then
        return "*"
    end
    local origin = ngx_var.http_origin
    if not origin or #origin > MAX_ORIGIN then
        return nil
    end
    local o = lower(origin)
    if c.exact[o] then
        return origin
    end
    for _, w in ipairs(c.wild) do
        local head, tail = w.head, w.tail
        if #o > #head + #tail and sub(o, 1, #head) == head and sub(o, -#tail) == tail
            and find(sub(o, #head + 1, -#tail - 1), "^[a-z0-9-]+$") then
            return origin
        end
    end
    return nil
end

-- cors_headers sets the CORS headers that v, a value of $ingress_reactor_cors, holds:
-- "<allow origin>\n<"true" or "">\n<methods>\n<headers>\n<expose headers or "">\n<max age>". They
-- replace the backend's, as ingress-nginx's more_set_headers did.
local function cors_headers(v)
    local h = ngx.header
    local i = find(v, "\n", 1, true)
    local origin = sub(v, 1, i - 1)
    h["Access-Control-Allow-Origin"] = origin
    if origin ~= "*" then
        -- The answer depends on the request's Origin: caches must keep one per origin.
        local vary = h["Vary"]
        if type(vary) == "table" then
            vary[#vary + 1] = "Origin"
            h["Vary"] = vary
        elseif vary and vary ~= "" then
            h["Vary"] = vary .. ", Origin"
        else
            h["Vary"] = "Origin"
        end
    end
    local j = find(v, "\n", i + 1, true)
    if j > i + 1 then
        h["Access-Control-Allow-Credentials"] = sub(v, i + 1, j - 1)
    end
    i = find(v, "\n", j + 1, true)
    h["Access-Control-Allow-Methods"] = sub(v, j + 1, i - 1)
    j = find(v, "\n", i + 1, true)
    h["Access-Control-Allow-Headers"] = sub(v, i + 1, j - 1)
    i = find(v, "\n", j + 1, true)
    if i > j + 1 then
        h["Access-Control-Expose-Headers"] = sub(v, j + 1, i - 1)
    end
    h["Access-Control-Max-Age"] = sub(v, i + 1)
end

-- cors applies a route's CORS settings: an allowed origin's preflight (any OPTIONS request, as
-- ingress-nginx) is answered 204 here, and true returned; other requests of an allowed origin carry
-- the headers through $ingress_reactor_cors to the header filter, which survives ngx.exec into a
-- profile's named location (ngx.ctx does not).
local function cors(c)
    local allow = allowed_origin(c)
    if not allow then
        return false
    end
    local v = allow .. c.tail
    if ngx_var.request_method == "OPTIONS" then
        cors_headers(v)
        -- As ingress-nginx; NGINX drops both from a 204.
        ngx.header["Content-Type"] = "text/plain charset=UTF-8"
        ngx.header["Content-Length"] = 0
        ngx.exit(ngx.HTTP_NO_CONTENT)
        return true
    end
    local ok = pcall(function()
        ngx_var.ingress_reactor_cors = v
    end)
    if not ok then
        ngx_log(ERR, "enable-cors needs \"set $ingress_reactor_cors \"\";\" in the public location (a custom template lacks it); no CORS headers")
    end
    return false
end

-- header_filter runs in the header filter phase of the public location and of every profile's named
-- location: it sets the route's custom-headers (validated "Name:value" lines, each replacing a header
-- of the same name), then the CORS headers the router decided on.
function _M.header_filter()
    if hsts and ngx_var.https == "on" then -- the ConfigMap's hsts; custom-headers below may replace it
        ngx.header["Strict-Transport-Security"] = hsts
    end
    for i = 1, #add_headers do -- the ConfigMap's add-headers; custom-headers below replace them
        local h = add_headers[i]
        ngx.header[h[1]] = h[2]
    end
    local h = ngx_var.ingress_reactor_response_headers
    if h and h ~= "" then -- custom-headers
        for name, value in h:gmatch("([^:\n]+):([^\n]*)") do
            ngx.header[name] = value
        end
    end
    local v = ngx_var.ingress_reactor_cors
    if v and v ~= "" then -- enable-cors, after custom-headers: its headers win
        cors_headers(v)
    end
end

-- log runs in the log phase of every request (nginx.tmpl sets it in the http block): it gives back
-- the connection a limited request counted.
function _M.log()
    limits.leave()
end

-- set_proxy_vars hands a route's timeouts and tries to balancer.lua, and sets its rate limit and
-- Connection header; false when the template lacks a variable (a custom template without the catch-all
-- location's "set" lines).
local function set_proxy_vars(r)
    local ok, err = pcall(function()
        if r.upstream_options then
            ngx_var.ingress_reactor_upstream_options = r.upstream_options
        end
        if r.limit_rate then
            ngx_var.limit_rate = r.limit_rate
            ngx_var.ingress_reactor_limit_rate_after = r.limit_rate_after
        end
        if r.connection_header then
            ngx_var.ingress_reactor_connection_header = r.connection_header
        end
        local upstream = ngx_var.proxy_upstream_name
        if r.balance and upstream == r.upstream then -- not for its default-backend
            ngx_var.ingress_reactor_balance = r.balance
        elseif r.canary and r.canary.balance and upstream == r.canary.upstream then
            ngx_var.ingress_reactor_balance = r.canary.balance
        end
    end)
    if not ok then
        ngx_log(ERR, "applying proxy options: ", err, " (a custom template must keep the catch-all location's \"set $ingress_reactor_...\" lines)")
    end
    return ok
end

local CLIENT_CERT_HEADERS = { "ssl-client-verify", "ssl-client-subject-dn", "ssl-client-issuer-dn", "ssl-client-cert" }

-- client_cert applies a route's client certificate check c (auth-tls-*) and answers the request when
-- it fails; it returns true then. Over plain HTTP no certificate was sent.
local function client_cert(c)
    if c.mode == "off" then
        -- Asked for none: whatever another route's handshake verified is not this route's to pass on.
        for _, h in ipairs(CLIENT_CERT_HEADERS) do
            ngx.req.clear_header(h)
        end
        ngx.req.set_header("ssl-client-verify", "NONE")
        return false
    end
    local verify = "NONE"
    if ngx_var.https == "on" then
        -- The handshake verified with the CA of the entry that serves its SNI name: it must be this
        -- route's, or the verdict is another host's (NGINX answers 421 in the same case).
        local sni = ngx_var.ssl_server_name
        local ca = sni and sni ~= "" and _M.client_ca(lower(sni))
        if not ca or ca.id ~= c.ca then
            return true, ngx.exit(421)
        end
        if ngx_var.ssl_session_reused == "r" then
            -- nginx.conf turns the session cache off while a host verifies client certificates: a
            -- resumed session did not run verify_client for this name.
            ngx_log(ERR, "client certificate check on a resumed TLS session; answering 421 (a custom template must keep \"ssl_session_cache off\" while hosts verify client certificates)")
            return true, ngx.exit(421)
        end
        verify = ngx_var.ssl_client_verify or "NONE"
    end
    if verify ~= "SUCCESS" and (c.mode == "on" or c.mode == "optional" and verify ~= "NONE") then
        if c.error_page then
            return true, ngx.redirect(c.error_page, 302)
        end
        return true, ngx.exit(ngx.HTTP_BAD_REQUEST)
    end
    local subject = verify ~= "NONE" and ngx_var.ssl_client_s_dn or nil
    if c.match_cn then
        local from, _, err = re_find(subject or "", c.match_cn, "jo")
        if err then
            ngx_log(ERR, "auth-tls-match-cn: ", err)
            return true, ngx.exit(ngx.HTTP_INTERNAL_SERVER_ERROR)
        end
        if not from then
            return true, ngx.exit(ngx.HTTP_FORBIDDEN)
        end
    end
    ngx.req.set_header("ssl-client-verify", verify)
    ngx.req.set_header("ssl-client-subject-dn", subject)
    ngx.req.set_header("ssl-client-issuer-dn", verify ~= "NONE" and ngx_var.ssl_client_i_dn or nil)
    ngx.req.set_header("ssl-client-cert", c.pass_cert and verify ~= "NONE" and ngx_var.ssl_client_escaped_cert or nil)
    return false
end

local metrics_var_missing = false

-- set_metrics_labels sets the request metrics' labels (metrics.lua); pcall'd: a custom template may
-- lack the variable.
local function set_metrics_labels(v)
    ngx_var.ingress_reactor_metrics = v
end

-- route runs in the rewrite phase of the catch-all location.
function _M.route()
    local host = ngx_var.host or ""
    local e = server(host)
    if not e and filled.wait(dict, "routes") then
        e = server(host) -- the first full push arrived while this request waited
    end
    if not e then
        ngx_log(ERR, "no routes pushed since NGINX started ", filled.WAIT, " s ago at least; answering 503")
        return ngx.exit(ngx.HTTP_SERVICE_UNAVAILABLE)
    end
    if e.unavailable then
        ngx_log(ERR, "routes of host ", host, " changed but did not fit into the routes dict; answering 503 (raise --routes-dict-size)")
        return ngx.exit(ngx.HTTP_SERVICE_UNAVAILABLE)
    end
    local r, captures, err
    if e.list then
        r, captures, err = match_regex(e, ngx_var.uri)
        if err then
            ngx_log(ERR, "matching the regex paths of host ", host, ": ", err)
            return ngx.exit(ngx.HTTP_INTERNAL_SERVER_ERROR)
        end
    else
        r = match(e, ngx_var.uri)
    end
    local metrics_on = metrics.enabled()
    local labels
    if metrics_on then
        if r then
            labels = r.metrics_labels or metrics.labels(r.metrics, e.name, host)
        else
            labels = e.metrics_labels or metrics.labels(nil, e.name, host)
        end
    end
    if metrics_on and not pcall(set_metrics_labels, labels) then
        metrics_on = false
        if not metrics_var_missing then -- once per worker: every request would log it
            metrics_var_missing = true
            ngx_log(ERR, "request metrics: the catch-all location lacks \"set $ingress_reactor_metrics \"\";\" (start again from nginx/nginx.tmpl); requests are not counted")
        end
    end
    -- enable-access-log: false, or no route (the default backend answers) without the ConfigMap's
    -- enable-access-log-for-default-backend.
    if (r and r.no_access_log or not r and not log_default_backend)
        and not pcall(function() ngx_var.ingress_reactor_no_access_log = "1" end) then
        -- enable-access-log: false; a custom template without the variable logs the request.
        ngx_log(ERR, "enable-access-log: the catch-all location lacks \"set $ingress_reactor_no_access_log \"\";\" (start again from nginx/nginx.tmpl)")
    end
    if r and r.response_headers then
        -- custom-headers: header_filter sets them, in this location or the profile's (a variable
        -- outlives ngx.exec, ngx.ctx does not).
        ngx_var.ingress_reactor_response_headers = r.response_headers
    end
    -- Over HTTPS first of all, as NGINX checked client certificates before any phase; over plain HTTP
    -- after the redirect to HTTPS (below).
    local https = ngx_var.https == "on"
    -- The fallback of an Ingress's default-backend is checked as that Ingress's paths are.
    local cc
    if r then
        cc = r.client_cert
    elseif e.default_backend then
        cc = e.fallback_client_cert
    end
    if https and cc and client_cert(cc) then
        return
    end
    if not cc and e.client_ca then
        -- A path of this host that another Ingress serves without client certificates: its backend must
        -- not take a client's own ssl-client-* headers for a verdict.
        for _, h in ipairs(CLIENT_CERT_HEADERS) do
            ngx.req.clear_header(h)
        end
    end
    if r and r.host_redirect then
        return host_redirect(r)
    end
    -- CORS before the route's redirects and source ranges, as ingress-nginx's location had it: a
    -- preflight is answered 204, and a redirect or a 403 carries the CORS headers.
    if r and r.cors and cors(r.cors) then
        return
    end
    local content_length = ngx_var.http_content_length
    if default_body_limit then
        -- Before the route's redirects, as NGINX checks it when it enters a location (and after CORS,
        -- whose headers the 413 carries, as in ingress-nginx): a named location (ngx.exec) skips that
        -- check, so the router makes it for every route.
        local limit = r and r.body_limit or default_body_limit
        local length = limit > 0 and content_length and tonumber(content_length)
        if length and length > limit then
            ngx_log(ERR, "client intended to send too large body: ", length, " bytes, limit ", limit)
            return ngx.exit(413) -- ngx.HTTP_REQUEST_ENTITY_TOO_LARGE is not in every lua-nginx-module
        end
    end
    if r and r.redirects and route_redirect(r, host) then
        return
    end
    local upstream, redirect
    if r then
        upstream, redirect = r.upstream, r.redirect
    else
        upstream, redirect = e.default_backend or dict:get(_M.DEFAULT_KEY) or "", e.redirect
    end
    -- The request's scheme, or a trusted proxy's X-Forwarded-Proto (use-forwarded-headers).
    if ngx_var.ingress_reactor_pass_scheme == "http" and not (r and r.no_tls_redirect)
        and (redirect and ngx_var.ingress_reactor_https == "1" or r and r.force_ssl_redirect) then
        return ngx.redirect(https_location(host, r), redirect_code)
    end
    if not https and cc and client_cert(cc) then
        return
    end
    -- satisfied: with satisfy any, an access check has let the request in, so the others are skipped.
    local satisfied = false
    if r and r.ranges then
        local addr = client()
        if r.deny and in_ranges(r.deny, addr) then
            return ngx.exit(ngx.HTTP_FORBIDDEN) -- satisfy any or not: credentials never override a deny
        end
        if r.allow then
            if in_ranges(r.allow, addr) then
                satisfied = r.satisfy_any
            elseif not r.satisfy_any then
                return ngx.exit(ngx.HTTP_FORBIDDEN)
            end
        end
    end
    if r and r.limit then
        local status = limits.enter(r.limit, client(), in_ranges)
        if status then
            return ngx.exit(status)
        end
    end
    if r and r.auth and not satisfied then
        if auth.check(r.auth.users, ngx_var.http_authorization) then
            satisfied = r.satisfy_any
        elseif not (r.satisfy_any and r.profile_required) then
            ngx.header["WWW-Authenticate"] = r.auth.challenge
            return ngx.exit(ngx.HTTP_UNAUTHORIZED)
        end
        -- satisfy any with external auth as well: the auth service decides.
    end
    if satisfied and r.profile_required and not pcall(function() ngx_var.ingress_reactor_satisfied = "1" end) then
        -- The profile's auth request then asks the auth service, as with satisfy all.
        ngx_log(ERR, "satisfy: the catch-all location lacks \"set $ingress_reactor_satisfied \"\";\" (start again from nginx/nginx.tmpl)")
    end
    if upstream == "" then
        return ngx.exit(ngx.HTTP_NOT_FOUND)
    end
    local to_canary = r and r.canary
    if to_canary then
        to_canary = _M.canary_affinity(r.canary)
        if to_canary == nil then
            to_canary = _M.canary_wanted(r.canary)
        end
    end
    if to_canary and endpoints:get(ENDPOINTS_VERSION_PREFIX .. r.canary.upstream) then
        upstream = r.canary.upstream -- canary: a canary without endpoints leaves the request to the main backend
        if metrics_on then
            ngx_var.ingress_reactor_metrics = r.canary.metrics_labels or metrics.labels(r.metrics, e.name, host, upstream)
        end
    elseif r and r.default_backend and not endpoints:get(ENDPOINTS_VERSION_PREFIX .. upstream) then
        upstream = r.default_backend -- default-backend: the route's Service has no endpoints
    end
    if r and (r.rewrite or r.upstream_vhost) and not apply_rewrite_fields(r, captures) then
        return ngx.exit(ngx.HTTP_INTERNAL_SERVER_ERROR)
    end
    ngx_var.proxy_upstream_name = upstream
    if r and r.sets_vars and not set_proxy_vars(r) then
        return ngx.exit(ngx.HTTP_INTERNAL_SERVER_ERROR)
    end
    if r and r.profile_required and not profiles[r.profile] then
        -- A profile that restricts access (external auth): never served without it.
        ngx_log(WARN, "route of host ", host, " names profile ", r.profile, ", which this configuration lacks; refused: it restricts access")
        return ngx.exit(ngx.HTTP_SERVICE_UNAVAILABLE)
    elseif r and r.profile and not profiles[r.profile] then
        -- Pushed for a configuration that is not (or no longer) live: served without the profile's
        -- settings until it is, rather than sent to a location this configuration lacks.
        ngx_log(WARN, "route of host ", host, " names profile ", r.profile, ", which this configuration lacks; served without it")
    elseif r and r.profile then
        if r.ingress_name then -- custom error pages: who the route belongs to, and who answers them
            ngx_var.ingress_reactor_error_upstream = r.default_backend or dict:get(_M.DEFAULT_KEY) or ""
            ngx_var.ingress_reactor_error_namespace = r.ingress_namespace
            ngx_var.ingress_reactor_error_ingress = r.ingress_name
            ngx_var.ingress_reactor_error_service = r.service_name or ""
            ngx_var.ingress_reactor_error_port = r.service_port or ""
        end
        if r.auth_route and not pcall(function() ngx_var.ingress_reactor_auth_route = r.auth_route end) then
            -- ParseTemplate refuses such a template: without the variable, cached auth answers would be
            -- shared by the host's routes of one profile.
            ngx_log(ERR, "auth-cache-key: the catch-all location lacks \"set $ingress_reactor_auth_route \"\";\"; refused")
            return ngx.exit(ngx.HTTP_INTERNAL_SERVER_ERROR)
        end
        -- The profile's named location (rendered into nginx.conf) proxies with its directives.
        return ngx.exec("@" .. r.profile)
    end
    -- A body without Content-Length (chunked, or HTTP/2) is limited while NGINX reads it, by the
    -- location's client_max_body_size: the catch-all location has none (the check above replaces it),
    -- the default location has the default limit.
    if default_body_limit and not content_length
        and (ngx_var.http_transfer_encoding or ngx.req.http_version() == 2) then
        return ngx.exec(DEFAULT_LOCATION)
    end
end

-- auth_satisfied runs in the rewrite phase of the internal location that calls an auth service (and
-- first in route_auth): when the router let the request in already (satisfy any, the client's address on
-- the allowlist, or valid basic credentials), it answers the auth request 200 without asking the
-- service, as NGINX's satisfy any skips auth_request then. The auth answer's headers are then empty, so
-- the request carries none of auth-response-headers. Returns whether it answered.
function _M.auth_satisfied()
    if ngx_var.ingress_reactor_satisfied ~= "1" then
        return false
    end
    ngx.status = ngx.HTTP_OK
    ngx.exit(ngx.HTTP_OK)
    return true
end

-- route_auth runs in the rewrite phase of the internal location that calls an auth service on the
-- request's own host (auth-url "https://$host/oauth2/auth"): it routes the auth request by this
-- NGINX's routes for the host and the URL's path ($ingress_reactor_auth_uri), as the request would be
-- routed when it came back through NGINX, and answers 500 (the auth request fails, the request is
-- denied) when no plain route serves that path. A subrequest shares its parent's variables, so the
-- upstream goes in $ingress_reactor_auth_upstream, which the balancer reads for subrequests, and
-- $proxy_upstream_name stays the parent's.
function _M.route_auth()
    if _M.auth_satisfied() then
        return
    end
    local uri = ngx_var.ingress_reactor_auth_uri or ""
    local path, args = uri:match("^([^?]*)%??(.*)$")
    local host = ngx_var.host or ""
    local e = server(host)
    local r, err
    if e and not e.unavailable then
        if e.list then
            r, _, err = match_regex(e, path)
        else
            r = match(e, path)
        end
    end
    if not r or err or not r.upstream or r.upstream == "" or r.profile or r.host_redirect or r.redirects then
        ngx_log(ERR, "auth-url on the request's host: no route of host ", host, " sends ", path,
            " to a Service without a profile; the request is denied")
        return ngx.exit(ngx.HTTP_INTERNAL_SERVER_ERROR)
    end
    ngx_var.ingress_reactor_auth_upstream = r.upstream
    ngx.req.set_uri(path, false)
    ngx.req.set_uri_args(args)
end

-- custom_error runs in the rewrite phase of a custom error page's location (custom-http-errors): the
-- route's default backend answers it, or NGINX's own page for the code when there is none.
function _M.custom_error()
    local upstream = ngx_var.ingress_reactor_error_upstream
    if not upstream or upstream == "" then
        return ngx.exit(tonumber(ngx_var.ingress_reactor_error_code) or ngx.HTTP_INTERNAL_SERVER_ERROR)
    end
    ngx_var.proxy_upstream_name = upstream
    -- As ingress-nginx: the error backend gets "/" (the query kept) and the request's own Host; the
    -- original URI is in X-Original-URI.
    ngx_var.ingress_reactor_upstream_vhost = ""
    ngx.req.set_uri("/", false)
end

-- set_body_limit records the body limit of routes without their own (proxy-body-size), in bytes (0:
-- none); init_by_lua calls it when the catch-all location leaves the Content-Length check to the router.
function _M.set_body_limit(limit)
    default_body_limit = limit
end

-- set_hsts sets the Strict-Transport-Security value of HTTPS responses (the ConfigMap's hsts keys), or
-- nil for none; init_by_lua calls it.
function _M.set_hsts(value)
    hsts = value
end

-- set_add_headers sets the headers of every response (the ConfigMap's add-headers): a list of
-- {name, value} pairs; init_by_lua calls it.
function _M.set_add_headers(list)
    add_headers = list
end

-- set_redirect_code sets the status of redirects to HTTPS and to the www twin (the ConfigMap's
-- http-redirect-code); init_by_lua calls it.
function _M.set_redirect_code(code)
    redirect_code = code
end

-- set_no_tls_redirect_locations sets the path prefixes whose routes are never redirected to HTTPS (the
-- ConfigMap's no-tls-redirect-locations, validated by the controller); init_by_lua calls it.
function _M.set_no_tls_redirect_locations(prefixes)
    no_tls_redirect_locations = prefixes
end

-- set_log_default_backend says whether the requests no route matches are logged (the ConfigMap's
-- enable-access-log-for-default-backend); init_by_lua calls it.
function _M.set_log_default_backend(on)
    log_default_backend = on
end

-- set_profiles records the profiles (named locations) of the configuration being loaded; init_by_lua
-- calls it, so every worker of a configuration knows exactly its own.
function _M.set_profiles(names)
    profiles = {}
    for _, n in ipairs(names) do
        profiles[n] = true
    end
end

return _M
