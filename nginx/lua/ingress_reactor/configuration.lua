-- The controller-only API of the internal status server (content_by_lua). It fills the shared dicts
-- that balancer.lua and certificates.lua read, so endpoint and certificate changes need no reload.
--
--   POST /configuration/endpoints     {"full": bool, "upstreams": {"<name>": [{"address": "10.0.0.1", "port": 8080}, ...]}}
--   GET  /configuration/endpoints     {"upstreams": {...}, "filled": bool}
--   POST /configuration/certificates  {"full": bool, "certificates": {"<id>": {"cert": "<PEM>", "key": "<PEM>",
--                                      "ocsp": "<base64 DER>", "ocsp_expires": <unix seconds>} | null},
--                                      "hosts": {"<host>": "<id>" | null}}
--   GET  /configuration/certificates  {"hosts": {"<host>": "<id>"}, "certificates": ["<id>", ...], "stapled": {"<id>": true},
--                                      "filled": bool}
--
-- "ocsp" (enable-ocsp) is the OCSP response the controller fetched and checked for that very certificate;
-- certificates.lua staples it until "ocsp_expires", after which the dict forgets it. A certificate pushed
-- without one is stapled no more.
--   POST /configuration/routes        {"full": bool, "hosts": {"<host>": {"redirect": bool, "routes": [...]} | null},
--                                      "default_upstream": "<name>" | ""}
--   GET  /configuration/routes        {"hosts": {...}, "default_upstream": "<name>", "filled": bool}
--
-- A routes entry is one server of the model (router.lua says how requests are matched); the host ""
-- is the catch-all server. Each route is {"path": "/...", "exact": bool, "upstream": "<name>" | "",
-- "redirect": bool, "deny": ["<hex>/<bits>", ...], "allow": [...], "rewrite": "<target>",
-- "x_forwarded_prefix": "<prefix>", "upstream_vhost": "<host>"} plus the redirect options of
-- nginx/routeoptions.go ("redirect_url", "redirect_code", "app_root", "force_ssl_redirect",
-- "preserve_trailing_slash", "use_port_in_redirects", "default_backend", "response_headers": "Name:value"
-- lines joined by "\n"), "host_redirect", "cors" ({"origins": [...], "methods", "headers", "expose",
-- "credentials", "max_age"}) and "limit" ({"zone", "rps", "rps_burst", "rpm", "rpm_burst", "conn",
-- "allow": [...]}) and "auth" ({"challenge", "users": an ID of the host's "auth_users"}), "satisfy_any"
-- (true: an address on "allow" needs no authentication, others need it instead of 403); a host
-- entry may name its fallback "default_backend" and hold "auth_users" (ID -> "user:hash\n" lines).
-- A route's "client_cert" ({"mode", "ca", "match_cn", "error_page", "pass_cert"}) names the host's
-- "client_ca" ({"id", "pem", "depth"}: the CA its handshakes verify client certificates with, which
-- certificates.lua reads through router.lua). A route's "balance" ({"hash", "subset"}, {"lb"} or
-- {"cookie": {...}}: affinity, upstream-hash-by, load-balance, see balancing.lua) is stored as the JSON
-- string that balancer.lua reads. A host with "regex": true lists its routes in match
-- order, each with a PCRE "pattern" (and a lower-case "literal" prefix when the pattern is one).
-- A changed host whose new routes do
-- not fit into the dict answers 503 until they do, rather than keep routes that may admit more.
-- A host entry this side cannot take (a route it refuses) is left as it was, the rest of the push is
-- stored, and the answer is 422 with "refused": {"<host>": {"route": <1-based index, 0 for the host
-- itself>, "error": "..."}}: the controller leaves the Ingress that wrote the route out and pushes the
-- host again. (With a full dict as well, the 507 answer carries "refused" too.)
--
-- "full": true replaces everything (entries not in the body are removed); otherwise only the listed
-- entries change, and an empty endpoint list or a null removes one. A request is validated completely
-- before anything is written. Errors answer 4xx/5xx with {"error": "..."}.
--
-- "filled" says that a full push has filled the dict since NGINX created it: a reload keeps the shared
-- dicts, except one whose size changed, which it replaces with an empty one. Only a full push writes
-- the marker, so an incremental push into an emptied dict does not hide that it needs a full one. Both
-- GETs answer {"filled": bool} alone with ?only=filled, which costs nothing whatever the dict holds.
--
-- A certificate whose packed value is byte-identical to the stored one is not parsed again (it was
-- checked when it was stored): a full push of unchanged certificates is cheap. It counts as "unchanged".
--
-- A valid request is written removals first, so that they make room for the rest. When the dict is
-- full, whatever fits is still written and live; the answer is then 507 with the usual counts, the
-- "error" (which names the flag to raise) and "not_stored": the upstreams or certificate ids that did
-- not fit (certificates also "hosts_not_stored"). An entry that did not fit keeps its previous value;
-- a host whose certificate is not in the dict at all gets the wildcard or default certificate.
local cjson = require("cjson.safe")
local ssl = require("ngx.ssl")
local balancer = require("ingress_reactor.balancer")
local certificates = require("ingress_reactor.certificates")
local router = require("ingress_reactor.router")
local balancing = require("ingress_reactor.balancing")

local ngx = ngx
local null = cjson.null

local endpoints_dict = ngx.shared.ingress_reactor_endpoints
local certificates_dict = ngx.shared.ingress_reactor_certificates
local routes_dict = ngx.shared.ingress_reactor_routes

local SEQUENCE = "seq"
local FILLED = require("ingress_reactor.filled").KEY -- the marker of a full push; see above

local _M = {}

-- limits bounds what a routes push may hold. A custom template may lower them (init_by_lua); a route
-- beyond one is refused alone, and the controller takes its Ingress out of service.
_M.limits = { path_length = 4096 }

local function respond(status, body)
    ngx.status = status
    ngx.header["Content-Type"] = "application/json"
    ngx.say(cjson.encode(body))
    return ngx.exit(status)
end

local function fail(status, message)
    return respond(status, { error = message })
end

local function read_body()
    ngx.req.read_body()
    local body = ngx.req.get_body_data()
    if body then
        return body
    end
    local path = ngx.req.get_body_file()
    if not path then
        return nil
    end
    local f, err = io.open(path, "rb")
    if not f then
        return nil, err
    end
    body = f:read("*a")
    f:close()
    return body
end

local function decode_request()
    local body, err = read_body()
    if not body then
        return nil, "empty request body" .. (err and (": " .. err) or "")
    end
    local req
    req, err = cjson.decode(body)
    if type(req) ~= "table" then
        return nil, "request body is not a JSON object: " .. (err or type(req))
    end
    if req.full ~= nil and type(req.full) ~= "boolean" then
        return nil, "\"full\" must be a boolean"
    end
    return req
end

local function valid_ip(a)
    if type(a) ~= "string" then
        return false
    end
    local o1, o2, o3, o4 = a:match("^(%d+)%.(%d+)%.(%d+)%.(%d+)$")
    if o1 then
        return tonumber(o1) < 256 and tonumber(o2) < 256 and tonumber(o3) < 256 and tonumber(o4) < 256
    end
    return a:find(":", 1, true) ~= nil and a:match("^[%x:%.]+$") ~= nil
end

local function valid_port(p)
    return type(p) == "number" and p >= 1 and p <= 65535 and p == math.floor(p)
end

-- next_version bumps the dict's sequence. The counter is created with safe_add and then only
-- incremented: incr with an initial value may evict other entries (endpoint lists) when the dict is full.
local function next_version(dict)
    local v, err = dict:incr(SEQUENCE, 1)
    if not v and err == "not found" then
        local ok, add_err = dict:safe_add(SEQUENCE, 0)
        if not ok and add_err ~= "exists" then
            return nil, "create sequence: " .. tostring(add_err)
        end
        v, err = dict:incr(SEQUENCE, 1)
    end
    if not v then
        return nil, "incr: " .. tostring(err)
    end
    return v
end

-- store writes value under data_key, then a new version under version_key, or reports why not and
-- leaves the previous value live. safe_set never evicts other entries (a full dict is an error the
-- controller sees, not silently lost endpoints), but it frees an existing value of another size before
-- it finds no room for the new one: the old value is written back into the room it just freed.
local function store(dict, data_key, version_key, value)
    local old = dict:get(data_key)
    local ok, err = dict:safe_set(data_key, value)
    if ok then
        local v
        v, err = next_version(dict)
        if v then
            ok, err = dict:safe_set(version_key, v)
            if ok then
                return true
            end
        end
    end
    if old == nil then
        dict:delete(data_key)
    elseif not dict:safe_set(data_key, old) then
        -- Not expected (the room was just freed); never leave a version without its data.
        dict:delete(version_key)
        dict:delete(data_key)
    end
    if err ~= "no memory" then
        ngx.log(ngx.ERR, "storing ", data_key, ": ", tostring(err))
    end
    return nil, err
end

-- put sets key to value like store, for entries without a version (host names).
local function put(dict, key, value)
    local old = dict:get(key)
    local ok, err = dict:safe_set(key, value)
    if not ok and old ~= nil then
        dict:safe_set(key, old)
    end
    return ok, err
end

-- sorted returns the keys of t in order, so that a push that does not fit stores the same entries
-- each time it is retried.
local function sorted(t)
    local out = {}
    for k in pairs(t) do
        out[#out + 1] = k
    end
    table.sort(out)
    return out
end

-- remove_versioned deletes the entries of names (values and versions) from dict.
local function remove_versioned(dict, data_prefix, version_prefix, names)
    for _, name in ipairs(names) do
        dict:delete(version_prefix .. name)
        dict:delete(data_prefix .. name)
    end
end

-- store_versioned writes updates (name -> value) into dict, in name order, and returns how many changed,
-- how many were unchanged, the names that did not fit and the total. An identical value keeps its
-- version, so workers keep what they decoded from it. on_not_stored(name), when given, runs for each
-- name that did not fit.
local function store_versioned(dict, data_prefix, version_prefix, updates, on_not_stored)
    local changed, unchanged, not_stored, total = 0, 0, {}, 0
    for _, name in ipairs(sorted(updates)) do
        local value = updates[name]
        total = total + 1
        if dict:get(data_prefix .. name) == value and dict:get(version_prefix .. name) then
            unchanged = unchanged + 1
        elseif store(dict, data_prefix .. name, version_prefix .. name, value) then
            changed = changed + 1
        else
            not_stored[#not_stored + 1] = name
            if on_not_stored then
                on_not_stored(name)
            end
        end
    end
    return changed, unchanged, not_stored, total
end

-- listing shows the first ten of names, in order, and how many more there are.
local function listing(names)
    table.sort(names)
    local shown = {}
    for i = 1, math.min(#names, 10) do
        shown[i] = names[i]
    end
    local list = table.concat(shown, ", ")
    if #names > #shown then
        list = list .. ", and " .. (#names - #shown) .. " more"
    end
    return list
end

-- dict_full answers 507 for a push of which some entries did not fit. Everything else in the push is
-- live; body carries the counts of a 200 answer plus what was not stored. parts are
-- { noun, names that did not fit, how many the request wrote }.
local function dict_full(dict, dict_name, flag, parts, body)
    local what = {}
    for _, part in ipairs(parts) do
        local noun, missing, total = part[1], part[2], part[3]
        if #missing > 0 then
            what[#what + 1] = string.format("%d of %d %s (%s)", #missing, total, noun, listing(missing))
        end
    end
    body.error = string.format("%s dict full: raise %s (now %d MB). %s did not fit and keep what they had "
        .. "before, if anything; everything else in the request is live",
        dict_name, flag, math.floor(dict:capacity() / 1048576 + 0.5), table.concat(what, " and "))
    ngx.log(ngx.ERR, body.error)
    return respond(507, body)
end

-- mark_filled writes the marker of a full push into dict, after everything the push holds is stored:
-- requests that wait for the first push (filled.lua) go on as soon as they see it.
local function mark_filled(dict)
    local ok, err = dict:safe_set(FILLED, true)
    if not ok then
        ngx.log(ngx.ERR, "storing the marker of a full push: ", tostring(err))
    end
end

local function filled(dict)
    return dict:get(FILLED) ~= nil
end

-- only_filled answers a GET with ?only=filled, or returns false for a GET of everything.
local function only_filled(dict)
    if ngx.req.get_uri_args().only ~= "filled" then
        return false
    end
    respond(200, { filled = filled(dict) })
    return true
end

local function keys_with_prefix(dict, prefix)
    local out = {}
    local n = #prefix
    for _, k in ipairs(dict:get_keys(0)) do
        if k:sub(1, n) == prefix then
            out[#out + 1] = k:sub(n + 1)
        end
    end
    return out
end

local function get_endpoints()
    if only_filled(endpoints_dict) then
        return
    end
    local upstreams = {}
    for _, name in ipairs(keys_with_prefix(endpoints_dict, balancer.DATA_PREFIX)) do
        local list = cjson.decode(endpoints_dict:get(balancer.DATA_PREFIX .. name) or "[]")
        if list then
            upstreams[name] = list
        end
    end
    return respond(200, { upstreams = upstreams, filled = filled(endpoints_dict) })
end

-- Every request must carry the token the controller put into nginx.conf: reads too, since they show
-- Secret names, upstreams and pod addresses to any process that can reach the loopback port. The
-- digests are compared so that the time taken says nothing about a prefix of the token.
local function authorized()
    local want = ngx.var.ingress_reactor_token
    local got = ngx.var.http_x_ingress_reactor_token
    if not want or #want < 32 or not got then
        return false
    end
    return ngx.sha1_bin(got) == ngx.sha1_bin(want)
end

-- Access-phase check of the status server (access_by_lua_block): a request without the token ends here.
function _M.authorize()
    if not authorized() then
        return fail(403, "missing or wrong X-Ingress-Reactor-Token")
    end
end

-- post_body answers a GET with get() and anything but a POST with 405; for a POST it checks the token
-- and returns the decoded body, or answers 403 or 400. It returns nil when it has answered.
local function post_body(get)
    local method = ngx.req.get_method()
    if method == "GET" then
        get()
        return nil
    end
    if method ~= "POST" then
        fail(405, "use GET or POST")
        return nil
    end
    if not authorized() then
        fail(403, "missing or wrong X-Ingress-Reactor-Token")
        return nil
    end
    local req, err = decode_request()
    if not req then
        fail(400, err)
        return nil
    end
    return req
end

function _M.endpoints()
    local req = post_body(get_endpoints)
    if not req then
        return
    end
    if type(req.upstreams) ~= "table" then
        return fail(400, "\"upstreams\" must be an object of upstream name to endpoint list")
    end

    -- Validate everything and build the normalized values first.
    local updates, removals = {}, {}
    for name, list in pairs(req.upstreams) do
        if type(name) ~= "string" or not name:match("^[a-z0-9-]+$") then
            return fail(400, "invalid upstream name " .. tostring(name))
        end
        if list == null or (type(list) == "table" and #list == 0) then
            removals[#removals + 1] = name
        elseif type(list) ~= "table" then
            return fail(400, "endpoints of " .. name .. " must be a list")
        else
            local normalized = {}
            for i, ep in ipairs(list) do
                if type(ep) ~= "table" or not valid_ip(ep.address) or not valid_port(ep.port) then
                    return fail(400, "upstream " .. name .. ": endpoint " .. i .. " needs an IP \"address\" and a \"port\" in 1-65535")
                end
                normalized[i] = { address = ep.address, port = ep.port }
            end
            updates[name] = cjson.encode(normalized)
        end
    end
    if req.full then
        for _, name in ipairs(keys_with_prefix(endpoints_dict, balancer.VERSION_PREFIX)) do
            if req.upstreams[name] == nil then
                removals[#removals + 1] = name
            end
        end
    end

    -- Removals first: they free the room that the updates may need.
    remove_versioned(endpoints_dict, balancer.DATA_PREFIX, balancer.VERSION_PREFIX, removals)
    local changed, unchanged, not_stored, total = store_versioned(endpoints_dict, balancer.DATA_PREFIX, balancer.VERSION_PREFIX, updates)
    if req.full then
        mark_filled(endpoints_dict)
    end
    local body = { changed = changed, unchanged = unchanged, removed = #removals }
    if #not_stored > 0 then
        body.not_stored = not_stored
        return dict_full(endpoints_dict, "endpoints", "--endpoints-dict-size", { { "upstreams", not_stored, total } }, body)
    end
    return respond(200, body)
end

-- ocsp_staple checks the "ocsp" and "ocsp_expires" of a pushed certificate: it returns { der, ttl }, false
-- when there is none (or it has expired), or nil and why not.
local function ocsp_staple(pair)
    if pair.ocsp == nil and pair.ocsp_expires == nil then
        return false
    end
    if type(pair.ocsp) ~= "string" or pair.ocsp == "" or #pair.ocsp > 98304 then
        return nil, "\"ocsp\" must be a base64 string"
    end
    local der = ngx.decode_base64(pair.ocsp)
    if not der then
        return nil, "\"ocsp\" must be a base64 string"
    end
    local expires = pair.ocsp_expires
    if type(expires) ~= "number" or expires ~= math.floor(expires) or expires <= 0 then
        return nil, "\"ocsp_expires\" must be a time in unix seconds"
    end
    local ttl = expires - ngx.time()
    if ttl <= 0 then
        return false
    end
    return { der = der, ttl = ttl }
end

local function get_certificates()
    if only_filled(certificates_dict) then
        return
    end
    local hosts = {}
    for _, host in ipairs(keys_with_prefix(certificates_dict, certificates.HOST_PREFIX)) do
        hosts[host] = certificates_dict:get(certificates.HOST_PREFIX .. host)
    end
    local ids = keys_with_prefix(certificates_dict, certificates.VERSION_PREFIX)
    table.sort(ids)
    local stapled = {}
    for _, id in ipairs(keys_with_prefix(certificates_dict, certificates.OCSP_PREFIX)) do
        stapled[id] = true
    end
    return respond(200, { hosts = hosts, certificates = ids, stapled = stapled, filled = filled(certificates_dict) })
end

function _M.certificates()
    local req = post_body(get_certificates)
    if not req then
        return
    end
    local certs = req.certificates or {}
    local hosts = req.hosts or {}
    if type(certs) ~= "table" or type(hosts) ~= "table" then
        return fail(400, "\"certificates\" and \"hosts\" must be objects")
    end

    local updates, removed_ids, unchanged = {}, {}, 0
    local staples = {} -- id -> { der, ttl } or false
    for id, pair in pairs(certs) do
        if type(id) ~= "string" or not id:match("^[a-z0-9.-]+/[a-z0-9.-]+$") then
            return fail(400, "invalid certificate id " .. tostring(id) .. " (want namespace/name)")
        end
        if pair == null then
            removed_ids[#removed_ids + 1] = id
        else
            if type(pair) ~= "table" or type(pair.cert) ~= "string" or type(pair.key) ~= "string" then
                return fail(400, "certificate " .. id .. " needs \"cert\" and \"key\" PEM strings")
            end
            local staple, serr = ocsp_staple(pair)
            if serr then
                return fail(400, "certificate " .. id .. ": " .. serr)
            end
            staples[id] = staple
            local value = certificates.pack(pair.cert, pair.key)
            local packed = value ~= nil
            if not packed then
                value = cjson.encode({ cert = pair.cert, key = pair.key })
            end
            if certificates_dict:get(certificates.DATA_PREFIX .. id) == value
                and certificates_dict:get(certificates.VERSION_PREFIX .. id) then
                -- The live value, byte for byte: it was parsed when it was stored, and parsing every
                -- certificate and key of a full push again blocks this worker for seconds.
                unchanged = unchanged + 1
            else
                -- What is checked is what workers will parse: the PEM that the stored value gives back.
                local cert, key = pair.cert, pair.key
                if packed then
                    cert, key = certificates.unpack(value)
                end
                local _, perr = ssl.parse_pem_cert(cert)
                if perr then
                    return fail(400, "certificate " .. id .. ": cannot parse the certificate chain: " .. perr)
                end
                _, perr = ssl.parse_pem_priv_key(key)
                if perr then
                    -- The message of the parser names no key material.
                    return fail(400, "certificate " .. id .. ": cannot parse the private key: " .. perr)
                end
            end
            updates[id] = value
        end
    end
    local host_updates, removed_hosts = {}, {}
    for host, id in pairs(hosts) do
        if type(host) ~= "string" or not host:match("^[a-z0-9*][a-z0-9.-]*$") then
            return fail(400, "invalid host " .. tostring(host))
        end
        if id == null then
            removed_hosts[#removed_hosts + 1] = host
        elseif type(id) ~= "string" then
            return fail(400, "host " .. host .. ": certificate id must be a string")
        elseif certs[id] == null then
            return fail(400, "host " .. host .. " refers to certificate " .. id .. ", which this request removes")
        elseif not updates[id] and (req.full or not certificates_dict:get(certificates.VERSION_PREFIX .. id)) then
            return fail(400, "host " .. host .. " refers to unknown certificate " .. id)
        else
            host_updates[host] = id
        end
    end
    if req.full then
        for _, host in ipairs(keys_with_prefix(certificates_dict, certificates.HOST_PREFIX)) do
            if hosts[host] == nil then
                removed_hosts[#removed_hosts + 1] = host
            end
        end
        for _, id in ipairs(keys_with_prefix(certificates_dict, certificates.VERSION_PREFIX)) do
            if certs[id] == nil then
                removed_ids[#removed_ids + 1] = id
            end
        end
    end

    -- Removals first, hosts before their certificates: they free the room that the updates may need,
    -- and no host is left naming a certificate that is gone.
    for _, host in ipairs(removed_hosts) do
        certificates_dict:delete(certificates.HOST_PREFIX .. host)
    end
    remove_versioned(certificates_dict, certificates.DATA_PREFIX, certificates.VERSION_PREFIX, removed_ids)
    local function live(id)
        return certificates_dict:get(certificates.VERSION_PREFIX .. id) ~= nil
    end
    local hosts_of = {}
    for _, host in ipairs(sorted(host_updates)) do
        local id = host_updates[host]
        hosts_of[id] = hosts_of[id] or {}
        table.insert(hosts_of[id], host)
    end
    local hosts_not_stored = {}
    -- set_hosts points the hosts of id at it and returns how many entries it wrote.
    local function set_hosts(id)
        local written = 0
        for _, host in ipairs(hosts_of[id] or {}) do
            if put(certificates_dict, certificates.HOST_PREFIX .. host, id) then
                written = written + 1
            else
                hosts_not_stored[#hosts_not_stored + 1] = host
            end
        end
        return written
    end
    -- drop_hosts removes the entries of id's hosts that name a certificate that is not live, so that
    -- they fall back to the wildcard or default certificate.
    local function drop_hosts(id)
        for _, host in ipairs(hosts_of[id] or {}) do
            local current = certificates_dict:get(certificates.HOST_PREFIX .. host)
            if current and not live(current) then
                certificates_dict:delete(certificates.HOST_PREFIX .. host)
            end
        end
    end

    -- Certificates to write: rotations first (a failed one keeps the previous certificate live, and
    -- it may be about to expire), then the one behind the default host "*", then the rest by id.
    local pending, rank = {}, {}
    for id, value in pairs(updates) do
        if certificates_dict:get(certificates.DATA_PREFIX .. id) ~= value or not live(id) then
            pending[#pending + 1] = id
            rank[id] = live(id) and 0 or (host_updates["*"] == id and 1 or 2)
        end
    end
    table.sort(pending, function(a, b)
        if rank[a] ~= rank[b] then
            return rank[a] < rank[b]
        end
        return a < b
    end)
    -- Hosts of certificates already live cost little room and go first.
    for _, id in ipairs(sorted(hosts_of)) do
        if not rank[id] then
            set_hosts(id)
        end
    end
    local changed, not_stored = 0, {}
    for _, id in ipairs(pending) do
        local was_live = live(id)
        if store(certificates_dict, certificates.DATA_PREFIX .. id, certificates.VERSION_PREFIX .. id, updates[id]) then
            if set_hosts(id) == 0 and hosts_of[id] and not was_live then
                -- None of its hosts fit: the certificate would only take room.
                certificates_dict:delete(certificates.VERSION_PREFIX .. id)
                certificates_dict:delete(certificates.DATA_PREFIX .. id)
                not_stored[#not_stored + 1] = id
            else
                changed = changed + 1
            end
        else
            not_stored[#not_stored + 1] = id
            if live(id) then
                set_hosts(id) -- the previous certificate of the same Secret stays live
            else
                drop_hosts(id)
            end
        end
    end

    -- OCSP responses go with the certificate stored now; one that does not fit is not stapled.
    for id, staple in pairs(staples) do
        local key = certificates.OCSP_PREFIX .. id
        local version = certificates_dict:get(certificates.VERSION_PREFIX .. id)
        if staple and version and live(id) and certificates_dict:get(certificates.DATA_PREFIX .. id) == updates[id] then
            -- Tagged with the version of the certificate it belongs to: a worker that reads the
            -- certificate and then the response between two pushes never staples one certificate's
            -- response to another (certificates.serve compares them).
            if not certificates_dict:safe_set(key, version .. "\n" .. staple.der, staple.ttl) then
                certificates_dict:delete(key)
            end
        else
            certificates_dict:delete(key)
        end
    end
    for _, id in ipairs(removed_ids) do
        certificates_dict:delete(certificates.OCSP_PREFIX .. id)
    end

    if req.full then
        mark_filled(certificates_dict)
    end
    local body = { changed = changed, unchanged = unchanged, removed = #removed_ids, removed_hosts = #removed_hosts }
    if #not_stored > 0 or #hosts_not_stored > 0 then
        body.not_stored = not_stored[1] and not_stored or nil
        body.hosts_not_stored = hosts_not_stored[1] and hosts_not_stored or nil
        local host_count = 0
        for _ in pairs(host_updates) do
            host_count = host_count + 1
        end
        return dict_full(certificates_dict, "certificates", "--certificates-dict-size",
            { { "certificates", not_stored, #pending }, { "hosts", hosts_not_stored, host_count } }, body)
    end
    return respond(200, body)
end

local function get_routes()
    if only_filled(routes_dict) then
        return
    end
    -- The stored entries are JSON already; decoding and encoding them again would turn an empty route
    -- list into an object.
    local parts = {}
    for _, host in ipairs(keys_with_prefix(routes_dict, router.VERSION_PREFIX)) do
        local raw = routes_dict:get(router.DATA_PREFIX .. host)
        if raw then
            parts[#parts + 1] = cjson.encode(host) .. ":" .. raw
        end
    end
    ngx.status = 200
    ngx.header["Content-Type"] = "application/json"
    ngx.say('{"hosts":{', table.concat(parts, ","), '},"default_upstream":',
        cjson.encode(routes_dict:get(router.DEFAULT_KEY) or ""), ',"filled":', tostring(filled(routes_dict)), "}")
    return ngx.exit(200)
end

local function valid_upstream(u)
    return u == "" or (type(u) == "string" and #u <= 255 and u:match("^[a-z0-9-]+$") ~= nil)
end

-- rewrite_fields checks the regex and rewrite fields of route r and copies them into out, or returns why
-- not. The patterns are PCRE written by the controller from a parsed regex; they are not compiled here:
-- the router compiles each once per worker ("jo").
local function rewrite_fields(r, out, regex_host)
    for _, f in ipairs({ "pattern", "literal", "rewrite", "x_forwarded_prefix", "upstream_vhost" }) do
        local v = r[f]
        if v ~= nil and (type(v) ~= "string" or v == "" or #v > 8192 or v:find("[%c\"]")) then
            return "\"" .. f .. "\" must be a non-empty string"
        end
    end
    if regex_host and not r.pattern then
        return "a route of a regex host needs a \"pattern\""
    end
    if r.rewrite and not r.rewrite:match("^[%w%-%._~/:%$]+$") then
        return "invalid \"rewrite\" " .. r.rewrite
    end
    if r.x_forwarded_prefix and not r.x_forwarded_prefix:match("^[%w%-%._~/:]+$") then
        return "invalid \"x_forwarded_prefix\" " .. r.x_forwarded_prefix
    end
    if r.upstream_vhost and not (r.upstream_vhost:match("^[%w%.%-]+$") or r.upstream_vhost:match("^[%w%.%-]+:%d+$")) then
        return "invalid \"upstream_vhost\" " .. r.upstream_vhost
    end
    if r.profile ~= nil and (type(r.profile) ~= "string" or not r.profile:match("^ingress_reactor_p%x+$") or #r.profile > 64) then
        return "invalid \"profile\" " .. tostring(r.profile)
    end
    for _, f in ipairs({ "ingress_namespace", "ingress_name", "service_name", "service_port" }) do
        local v = r[f]
        if v ~= nil and (type(v) ~= "string" or #v > 253 or not v:match("^[%w%.%-]*$")) then
            return "invalid \"" .. f .. "\""
        end
    end
    -- Request metrics' labels: namespace, ingress and service names (Kubernetes names, no tab).
    local m = r.metrics
    if m ~= nil then
        if type(m) ~= "table" or #m ~= 3 then
            return "invalid \"metrics\""
        end
        for i = 1, 3 do
            if type(m[i]) ~= "string" or #m[i] > 253 or not m[i]:match("^[%w%.%-]*$") then
                return "invalid \"metrics\""
            end
        end
        if type(r.path) ~= "string" or r.path:find("%c") then
            return "invalid \"path\" for metrics"
        end
        out.metrics = m
    end
    if r.profile_required ~= nil and (r.profile_required ~= true or r.profile == nil) then
        return "invalid \"profile_required\""
    end
    out.profile, out.ingress_namespace, out.ingress_name = r.profile, r.ingress_namespace, r.ingress_name
    out.profile_required = r.profile_required
    out.service_name, out.service_port = r.service_name, r.service_port
    out.pattern, out.literal, out.rewrite = r.pattern, r.literal, r.rewrite
    out.x_forwarded_prefix, out.upstream_vhost = r.x_forwarded_prefix, r.upstream_vhost
end

-- Redirect options of a route (nginx/ann_redirect.go): targets are printable ASCII without spaces, so
-- that they cannot split or extend the Location header.
local REDIRECT_CODES = { [301] = true, [302] = true, [303] = true, [307] = true, [308] = true }
local REDIRECT_FLAGS = { "force_ssl_redirect", "preserve_trailing_slash", "use_port_in_redirects",
    -- and the logging group's (nginx/ann_logging.go)
    "no_access_log", "rewrite_log" }

local function redirect_target(s)
    return type(s) == "string" and #s <= 2048 and not s:find("[%z\1-\32\127-\255]")
end

-- normalize_response_headers checks the custom-headers of route r (nginx/ann_customheaders.go): lines of
-- an RFC 7230 token, ":" and a value of printable ASCII and tabs; it copies them to out, or returns why not.
local function normalize_response_headers(r, out)
    local h = r.response_headers
    if h == nil then
        return nil
    end
    if type(h) ~= "string" or h == "" or #h > 32768 then
        return "\"response_headers\" must be a non-empty string"
    end
    for line in (h .. "\n"):gmatch("([^\n]*)\n") do
        if not line:match("^[%w!#%$%%&'%*%+%-%.%^_`|~]+:[\t\32-\126]*$") then
            return "invalid \"response_headers\" line " .. line:sub(1, 64)
        end
    end
    out.response_headers = h
end

-- normalize_redirects checks the redirect options of route r and copies them to out, or returns why not.
local function normalize_redirects(r, out)
    if r.redirect_url ~= nil then
        if not redirect_target(r.redirect_url) or not r.redirect_url:match("^https?://[^/?#]") then
            return "\"redirect_url\" must be an http or https URL of printable ASCII"
        end
        if not REDIRECT_CODES[r.redirect_code] then
            return "\"redirect_code\" must be 301, 302, 303, 307 or 308"
        end
        out.redirect_url, out.redirect_code = r.redirect_url, r.redirect_code
    end
    if r.app_root ~= nil then
        if not redirect_target(r.app_root) or r.app_root:sub(1, 1) ~= "/" then
            return "\"app_root\" must be a path of printable ASCII"
        end
        out.app_root = r.app_root
    end
    for _, flag in ipairs(REDIRECT_FLAGS) do
        if r[flag] ~= nil and type(r[flag]) ~= "boolean" then
            return "\"" .. flag .. "\" must be a boolean"
        end
        out[flag] = r[flag] or nil
    end
    if r.host_redirect ~= nil then
        if type(r.host_redirect) ~= "string" or #r.host_redirect > 253 or not r.host_redirect:match("^[a-z0-9][a-z0-9.-]*$") then
            return "\"host_redirect\" must be a host name"
        end
        out.host_redirect = r.host_redirect
    end
    if r.default_backend ~= nil then
        if r.default_backend == "" or not valid_upstream(r.default_backend) then
            return "invalid default_backend " .. tostring(r.default_backend)
        end
        out.default_backend = r.default_backend
    end
end

-- CORS and rate limits of a route (nginx/ann_cors.go, nginx/ann_ratelimit.go). The CORS values become
-- response headers: lists of tokens only, so they cannot split or extend a header.
local MAX_CORS_VALUE = 4096
local MAX_LIMIT = 1000000000

local function valid_origin(s)
    if type(s) ~= "string" or #s > 300 then
        return false
    end
    if s == "*" or s == "null" then
        return true
    end
    local host, port = s:match("^[a-z][a-z0-9+.-]*://([^:/]+)(.*)$")
    if not host or (port ~= "" and not port:match("^:[1-9]%d?%d?%d?%d?$")) then
        return false
    end
    if host:sub(1, 2) == "*." then
        host = host:sub(3)
    end
    for label in (host .. "."):gmatch("([^.]*)%.") do
        if not label:match("^[a-z0-9-]+$") then
            return false
        end
    end
    return true
end

local function token_list(v, pattern)
    return type(v) == "string" and #v <= MAX_CORS_VALUE and v:match(pattern) ~= nil
end

local function whole(n, lowest)
    return type(n) == "number" and n == math.floor(n) and n >= lowest and n <= MAX_LIMIT
end

-- normalize_cors checks route r's "cors" and copies it to out, or returns why not.
local function normalize_cors(r, out)
    local c = r.cors
    if c == nil then
        return
    end
    if type(c) ~= "table" or type(c.origins) ~= "table" then
        return "\"cors\" must be an object with a list of \"origins\""
    end
    for k, o in pairs(c.origins) do
        if type(k) ~= "number" or not valid_origin(o) then
            return "invalid CORS origin " .. tostring(o)
        end
    end
    if not token_list(c.methods, "^[%a, *]+$") or not token_list(c.headers, "^[%w%-_, *]+$")
        or (c.expose ~= nil and not token_list(c.expose, "^[%w%-_, *]+$")) then
        return "CORS methods and headers must be lists of tokens"
    end
    if type(c.credentials) ~= "boolean" or type(c.max_age) ~= "number" or c.max_age ~= math.floor(c.max_age)
        or c.max_age < 0 or c.max_age > 2147483647 then
        return "CORS \"credentials\" must be a boolean and \"max_age\" whole seconds"
    end
    if #c.origins == 0 then
        return -- no origin allowed: nothing to do (cjson would write the empty list as an object)
    end
    local origins = {}
    for i, o in ipairs(c.origins) do
        origins[i] = o
    end
    out.cors = { origins = origins, methods = c.methods, headers = c.headers, expose = c.expose,
        credentials = c.credentials, max_age = c.max_age }
end

-- normalize_limit checks route r's "limit" and copies it to out, or returns why not.
local function normalize_limit(r, out)
    local l = r.limit
    if l == nil then
        return
    end
    if type(l) ~= "table" or type(l.zone) ~= "string" or not l.zone:match("^%x+$") or #l.zone > 64 then
        return "\"limit\" must be an object with a hex \"zone\""
    end
    for _, f in ipairs({ "rps", "rpm", "conn" }) do
        if l[f] ~= nil and not whole(l[f], 1) then
            return "limit \"" .. f .. "\" must be a whole number from 1 to " .. MAX_LIMIT
        end
    end
    for _, f in ipairs({ "rps_burst", "rpm_burst" }) do
        if l[f] ~= nil and not whole(l[f], 0) then
            return "limit \"" .. f .. "\" must be a whole number from 0 to " .. MAX_LIMIT
        end
    end
    if not (l.rps or l.rpm or l.conn) then
        return "\"limit\" sets no limit"
    end
    if l.allow ~= nil then
        if type(l.allow) ~= "table" then
            return "limit \"allow\" must be a list"
        end
        for _, p in ipairs(l.allow) do
            if not router.parse_prefix(p) then
                return "limit range " .. tostring(p) .. " is not <hex address>/<bits>"
            end
        end
    end
    out.limit = { zone = l.zone, rps = l.rps, rps_burst = l.rps_burst, rpm = l.rpm, rpm_burst = l.rpm_burst, conn = l.conn,
        allow = (l.allow and #l.allow > 0) and l.allow or nil }
end

-- whole_in reports whether v is an integer from lo to hi.
local function whole_in(v, lo, hi)
    return type(v) == "number" and v == math.floor(v) and v >= lo and v <= hi
end

-- normalize_proxy checks the proxy options of route r (nginx/ann_proxy.go) and copies them to out, or
-- returns why not: "body_limit" in bytes (0: none), "upstream_options" as connect, send and read
-- timeouts in milliseconds (0: the default) and the tries (-1: the default, 0: each endpoint once),
-- "limit_rate" as bytes per second and bytes before the limit, "connection_header" as header tokens.
local MAX_TIMEOUT_MS = 365 * 24 * 3600 * 1000
local function normalize_proxy(r, out)
    if r.body_limit ~= nil then
        if not whole_in(r.body_limit, 0, 2 ^ 53) then
            return "\"body_limit\" must be a whole number of bytes"
        end
        out.body_limit = r.body_limit
    end
    local o = r.upstream_options
    if o ~= nil then
        if type(o) ~= "table" or #o ~= 4 or not whole_in(o[1], 0, MAX_TIMEOUT_MS) or not whole_in(o[2], 0, MAX_TIMEOUT_MS)
            or not whole_in(o[3], 0, MAX_TIMEOUT_MS) or not whole_in(o[4], -1, 100) then
            return "\"upstream_options\" must be three timeouts in milliseconds and a number of tries"
        end
        out.upstream_options = o
    end
    local l = r.limit_rate
    if l ~= nil then
        if type(l) ~= "table" or #l ~= 2 or not whole_in(l[1], 1, 2 ^ 40) or not whole_in(l[2], 0, 2 ^ 40) then
            return "\"limit_rate\" must be a rate and a size in bytes"
        end
        out.limit_rate = l
    end
    local c = r.connection_header
    if c ~= nil then
        if type(c) ~= "string" or #c > 256 or not c:match("^[%w%-]+$") and not c:match("^[%w%-][%w%-, ]*[%w%-]$") then
            return "\"connection_header\" must be header tokens"
        end
        out.connection_header = c
    end
end

-- normalize_balance checks the balancing settings of route r (nginx/ann_affinity.go; balancing.lua
-- describes them) and writes them to out as the JSON that the router hands to balancer.lua, or returns
-- why not. Cookie attributes are tokens and paths without ";", "," or control characters, so that they
-- cannot add attributes or headers to the Set-Cookie header.
local SAMESITE = { None = true, Lax = true, Strict = true }
local MAX_COOKIE_SECONDS = 2 ^ 31 - 1
local function normalize_balance(r, out)
    local b = r.balance
    if b == nil then
        return nil
    end
    if type(b) ~= "table" then
        return "\"balance\" must be an object"
    end
    local n = {}
    if b.hash ~= nil then
        local _, err = balancing.parse_expression(b.hash)
        if err then
            return "\"balance\" \"hash\": " .. err
        end
        if b.subset ~= nil and not whole_in(b.subset, 1, 1000) then
            return "\"balance\" \"subset\" must be a whole number from 1 to 1000"
        end
        n.hash, n.subset = b.hash, b.subset
    elseif b.lb ~= nil then
        if b.lb ~= "ewma" then
            return "\"balance\" \"lb\" must be \"ewma\""
        end
        n.lb = b.lb
    elseif b.cookie ~= nil then
        local c = b.cookie
        if type(c) ~= "table" or type(c.name) ~= "string" or #c.name > 128 or not c.name:match("^[%w!#%$%%&'%*%+%-%.%^_`|~]+$") then
            return "\"balance\" \"cookie\" needs a \"name\" of token characters"
        end
        if type(c.path) ~= "string" or #c.path > 1024 or not c.path:match("^/[\33-\126]*$") or c.path:find("[;,]") then
            return "\"balance\" cookie \"path\" must be a path of printable ASCII without ; and ,"
        end
        if c.domain ~= nil and (type(c.domain) ~= "string" or #c.domain > 253 or not c.domain:match("^%.?[%w%-%.]+$")) then
            return "\"balance\" cookie \"domain\" must be a domain name"
        end
        if c.samesite ~= nil and not SAMESITE[c.samesite] then
            return "\"balance\" cookie \"samesite\" must be None, Lax or Strict"
        end
        for _, f in ipairs({ "expires", "max_age" }) do
            if c[f] ~= nil and not whole_in(c[f], 0, MAX_COOKIE_SECONDS) then
                return "\"balance\" cookie \"" .. f .. "\" must be whole seconds"
            end
        end
        for _, f in ipairs({ "secure", "samesite_none_conditional", "change_on_failure", "persistent" }) do
            if c[f] ~= nil and type(c[f]) ~= "boolean" then
                return "\"balance\" cookie \"" .. f .. "\" must be a boolean"
            end
        end
        if c.persistent and (type(c.key) ~= "string" or not c.key:match("^%x+$") or #c.key < 32 or #c.key > 128) then
            return "\"balance\" persistent cookie needs a hex \"key\" of 32 to 128 digits"
        end
        n.cookie = { name = c.name, path = c.path, domain = c.domain, samesite = c.samesite, expires = c.expires,
            max_age = c.max_age, secure = c.secure or nil, samesite_none_conditional = c.samesite_none_conditional or nil,
            change_on_failure = c.change_on_failure or nil, persistent = c.persistent or nil,
            key = c.persistent and c.key or nil }
    else
        return "\"balance\" must have \"hash\", \"lb\" or \"cookie\""
    end
    out.balance = cjson.encode(n)
end

-- MAX_AUTH_USERS bounds one user list of a host entry (nginx/ann_basicauth.go: maxAuthUsersBytes).
local MAX_AUTH_USERS = 64 * 1024

-- normalize_auth_users checks the user lists of a host entry ("auth_users": id -> "user:hash\n"
-- lines, basic authentication) and returns them, or nil and why (never their content).
local function normalize_auth_users(lists)
    if lists == nil then
        return nil
    end
    if type(lists) ~= "table" then
        return nil, "\"auth_users\" must be an object"
    end
    local out, any = {}, false
    for id, lines in pairs(lists) do
        if type(id) ~= "string" or not id:match("^[0-9a-f]+$") or #id > 64 then
            return nil, "\"auth_users\" keys must be hex IDs"
        end
        if type(lines) ~= "string" or lines == "" or #lines > MAX_AUTH_USERS then
            return nil, "\"auth_users\" list " .. id .. " must be a non-empty string of at most " .. MAX_AUTH_USERS .. " bytes"
        end
        local n = 0
        for line in lines:gmatch("[^\n]+") do
            n = n + 1
            if not line:match("^[^:%c]+:[\033-\126]+$") then
                return nil, "\"auth_users\" list " .. id .. ", line " .. n .. ": not user:hash"
            end
        end
        out[id] = lines
        any = true
    end
    return any and out or nil
end

-- normalize_auth checks the basic authentication of route r against the host's user lists.
local function normalize_auth(r, out, lists)
    local a = r.auth
    if a == nil then
        return nil
    end
    if type(a) ~= "table" or type(a.challenge) ~= "string" or #a.challenge > 1024
        or not a.challenge:match('^Basic realm="[\032-\126]*"$') then
        return "\"auth\" must have a \"challenge\" Basic realm=\"...\" of printable ASCII"
    end
    if type(a.users) ~= "string" or not (lists and lists[a.users]) then
        return "\"auth\" names user list " .. tostring(a.users):sub(1, 64) .. ", which the host does not have"
    end
    out.auth = { challenge = a.challenge, users = a.users }
end

-- normalize_satisfy checks "satisfy_any" (satisfy: any) of route r, after its source ranges, basic
-- authentication and profile were normalized into out: it needs an allowlist and authentication, since
-- without authentication it would let every address in.
local function normalize_satisfy(r, out)
    local s = r.satisfy_any
    if s == nil then
        return nil
    end
    if s ~= true or out.allow == nil or (out.auth == nil and out.profile_required ~= true) then
        return "\"satisfy_any\" must be true, and needs \"allow\" and \"auth\" or \"profile_required\""
    end
    out.satisfy_any = true
end

-- MAX_CLIENT_CA bounds the CA certificates of a host entry (nginx/ann_clientcert.go: maxClientCABytes).
local MAX_CLIENT_CA = 64 * 1024

-- normalize_client_ca checks a host entry's "client_ca" ({"id", "pem", "depth"}: the CA that its
-- handshakes verify client certificates with) and returns it, or nil and why.
local function normalize_client_ca(c)
    if c == nil then
        return nil
    end
    if type(c) ~= "table" or type(c.id) ~= "string" or not c.id:match("^[0-9a-f]+$") or #c.id > 64 then
        return nil, "\"client_ca\" must have a hex \"id\""
    end
    if type(c.depth) ~= "number" or c.depth < 1 or c.depth > 16 or c.depth % 1 ~= 0 then
        return nil, "\"client_ca\" must have a \"depth\" from 1 to 16"
    end
    if type(c.pem) ~= "string" or c.pem == "" or #c.pem > MAX_CLIENT_CA or not ssl.parse_pem_cert(c.pem) then
        return nil, "\"client_ca\" must have PEM certificates of at most " .. MAX_CLIENT_CA .. " bytes in \"pem\""
    end
    return { id = c.id, pem = c.pem, depth = c.depth }
end

local CLIENT_CERT_MODES = { on = true, off = true, optional = true, optional_no_ca = true }

-- normalize_client_cert checks the client certificate check of route r ("client_cert": {"mode", "ca":
-- the host's "client_ca" id unless mode is "off", "match_cn": a PCRE pattern, "error_page": a URL,
-- "pass_cert": bool}).
local function normalize_client_cert(r, out, ca)
    local c = r.client_cert
    if c == nil then
        return nil
    end
    if type(c) ~= "table" or not CLIENT_CERT_MODES[c.mode] then
        return "\"client_cert\" must have a \"mode\": on, off, optional or optional_no_ca"
    end
    if c.mode ~= "off" and (type(c.ca) ~= "string" or not ca or ca.id ~= c.ca) then
        return "\"client_cert\" names CA " .. tostring(c.ca):sub(1, 64) .. ", which is not the host's \"client_ca\""
    end
    if c.match_cn ~= nil then
        if type(c.match_cn) ~= "string" or c.match_cn == "" or #c.match_cn > 4096 then
            return "\"client_cert\" \"match_cn\" must be a pattern"
        end
        local _, _, err = ngx.re.find("", c.match_cn, "jo")
        if err then
            return "\"client_cert\" \"match_cn\" does not compile: " .. err
        end
    end
    if c.error_page ~= nil and (type(c.error_page) ~= "string" or #c.error_page > 2048
        or not c.error_page:match("^https?://[\033-\126]+$")) then
        return "\"client_cert\" \"error_page\" must be an http or https URL of printable ASCII"
    end
    if c.pass_cert ~= nil and type(c.pass_cert) ~= "boolean" then
        return "\"client_cert\" \"pass_cert\" must be a boolean"
    end
    out.client_cert = { mode = c.mode, ca = c.mode ~= "off" and c.ca or nil, match_cn = c.match_cn,
        error_page = c.error_page, pass_cert = c.pass_cert or nil }
end

-- normalize_canary checks the canary of route r (nginx/ann_canary.go: "canary": {"upstream", "weight",
-- "total", "header", "header_value", "header_pattern": a PCRE pattern, "cookie", "balance": as a route's})
-- and copies it to out, or returns why not.
local function normalize_canary(r, out)
    local c = r.canary
    if c == nil then
        return nil
    end
    if type(c) ~= "table" or c.upstream == "" or not valid_upstream(c.upstream) then
        return "\"canary\" must have an \"upstream\""
    end
    if not whole_in(c.total, 1, 1000000) or not whole_in(c.weight, 0, c.total) then
        return "\"canary\" must have a \"weight\" from 0 to its \"total\""
    end
    if c.header ~= nil and (type(c.header) ~= "string" or #c.header > 256 or not c.header:match("^[%w_%-]+$")) then
        return "\"canary\" \"header\" must be a header name"
    end
    if c.cookie ~= nil and (type(c.cookie) ~= "string" or #c.cookie > 256 or not c.cookie:match("^[%w_%-%.]+$")) then
        return "\"canary\" \"cookie\" must be a cookie name"
    end
    if c.header_value ~= nil and (type(c.header_value) ~= "string" or c.header_value == "" or #c.header_value > 1024
        or not c.header_value:match("^[\032-\126]+$") or not c.header) then
        return "\"canary\" \"header_value\" must be printable ASCII, with a \"header\""
    end
    if c.header_pattern ~= nil then
        if type(c.header_pattern) ~= "string" or c.header_pattern == "" or #c.header_pattern > 4096 or not c.header then
            return "\"canary\" \"header_pattern\" must be a pattern, with a \"header\""
        end
        local _, _, err = ngx.re.find("", c.header_pattern, "jo")
        if err then
            return "\"canary\" \"header_pattern\" does not compile: " .. err
        end
    end
    -- The balancing of the canary's requests, in the form of a route's.
    local balance = {}
    local err = normalize_balance(c, balance)
    if err then
        return "\"canary\" " .. err
    end
    out.canary = { upstream = c.upstream, weight = c.weight, total = c.total, header = c.header,
        header_value = c.header_value, header_pattern = c.header_pattern, cookie = c.cookie, balance = balance.balance }
end

-- normalize_host checks one host entry and returns it in the form router.lua reads, or nil, why, and
-- the 1-based index of the route at fault (0: the entry itself).
local function normalize_host(host, entry)
    if type(entry) ~= "table" or type(entry.routes) ~= "table" then
        return nil, "host " .. host .. ": want an object with a \"routes\" list", 0
    end
    if entry.redirect ~= nil and type(entry.redirect) ~= "boolean" then
        return nil, "host " .. host .. ": \"redirect\" must be a boolean", 0
    end
    if entry.regex ~= nil and type(entry.regex) ~= "boolean" then
        return nil, "host " .. host .. ": \"regex\" must be a boolean", 0
    end
    for k in pairs(entry.routes) do
        if type(k) ~= "number" then
            return nil, "host " .. host .. ": \"routes\" must be a list", 0
        end
    end
    local auth_users, aerr = normalize_auth_users(entry.auth_users)
    if aerr then
        return nil, "host " .. host .. ": " .. aerr, 0
    end
    local client_ca, cerr = normalize_client_ca(entry.client_ca)
    if cerr then
        return nil, "host " .. host .. ": " .. cerr, 0
    end
    local routes = {}
    for i, r in ipairs(entry.routes) do
        local where = "host " .. (host == "" and "(catch-all)" or host) .. ", route " .. i
        if type(r) ~= "table" or type(r.path) ~= "string" or r.path:sub(1, 1) ~= "/"
            or r.path:find(entry.regex and "[%c\"]" or "[%c\"\\]") then
            return nil, where .. ": \"path\" must be a path starting with '/'", i
        end
        if #r.path > _M.limits.path_length then
            return nil, where .. ": the path is longer than " .. _M.limits.path_length .. " bytes", i
        end
        if r.upstream == nil then
            r.upstream = ""
        end
        if not valid_upstream(r.upstream) then
            return nil, where .. ": invalid upstream " .. tostring(r.upstream), i
        end
        for _, flag in ipairs({ "exact", "redirect" }) do
            if r[flag] ~= nil and type(r[flag]) ~= "boolean" then
                return nil, where .. ": \"" .. flag .. "\" must be a boolean", i
            end
        end
        local out = { path = r.path, exact = r.exact or nil, upstream = r.upstream, redirect = r.redirect or nil }
        for _, list in ipairs({ "deny", "allow" }) do
            local ranges = r[list]
            if ranges ~= nil then
                if type(ranges) ~= "table" then
                    return nil, where .. ": \"" .. list .. "\" must be a list", i
                end
                for _, p in ipairs(ranges) do
                    if not router.parse_prefix(p) then
                        return nil, where .. ": source range " .. tostring(p) .. " is not <hex address>/<bits>", i
                    end
                end
                if #ranges > 0 then
                    out[list] = ranges
                end
            end
        end
        local ferr = rewrite_fields(r, out, entry.regex) or normalize_redirects(r, out) or normalize_cors(r, out)
            or normalize_limit(r, out) or normalize_response_headers(r, out) or normalize_proxy(r, out)
            or normalize_auth(r, out, auth_users) or normalize_client_cert(r, out, client_ca)
            or normalize_satisfy(r, out) or normalize_canary(r, out) or normalize_balance(r, out)
        if ferr then
            return nil, where .. ": " .. ferr, i
        end
        routes[i] = out
    end
    local default_backend = entry.default_backend
    if default_backend ~= nil and (default_backend == "" or not valid_upstream(default_backend)) then
        return nil, "host " .. host .. ": invalid default_backend " .. tostring(default_backend), 0
    end
    -- The client certificate check of the Ingress whose default-backend the fallback is.
    local fallback = {}
    if entry.fallback_client_cert ~= nil then
        if not default_backend then
            return nil, "host " .. host .. ": \"fallback_client_cert\" without default_backend", 0
        end
        local ferr = normalize_client_cert({ client_cert = entry.fallback_client_cert }, fallback, client_ca)
        if ferr then
            return nil, "host " .. host .. ": fallback " .. ferr, 0
        end
    end
    if #routes == 0 then
        -- cjson would encode the empty list as an object.
        local head = entry.redirect and '{"redirect":true,' or "{"
        if default_backend then
            head = head .. '"default_backend":' .. cjson.encode(default_backend) .. ","
        end
        if fallback.client_cert then
            head = head .. '"fallback_client_cert":' .. cjson.encode(fallback.client_cert) .. ","
        end
        return head .. '"routes":[]}'
    end
    return cjson.encode({ redirect = entry.redirect or nil, regex = entry.regex or nil, default_backend = default_backend,
        auth_users = auth_users, client_ca = client_ca, fallback_client_cert = fallback.client_cert, routes = routes })
end

function _M.routes()
    local req = post_body(get_routes)
    if not req then
        return
    end
    local err
    if type(req.hosts) ~= "table" then
        return fail(400, "\"hosts\" must be an object of host to routes")
    end
    if req.default_upstream ~= nil and not valid_upstream(req.default_upstream) then
        return fail(400, "invalid default_upstream " .. tostring(req.default_upstream))
    end

    local updates, removals, refused = {}, {}, nil
    for host, entry in pairs(req.hosts) do
        if type(host) ~= "string" or (host ~= "" and not host:match("^[a-z0-9*][a-z0-9.-]*$")) or #host > 253 then
            return fail(400, "invalid host " .. tostring(host))
        end
        if entry == null then
            removals[#removals + 1] = host
        else
            local value, route
            value, err, route = normalize_host(host, entry)
            if value then
                updates[host] = value
            else
                -- Refused alone: the host keeps what it had, and the controller learns which route.
                ngx.log(ngx.ERR, "routes push: refused ", err)
                refused = refused or {}
                refused[host] = { route = route, error = err }
            end
        end
    end
    if req.full then
        for _, host in ipairs(keys_with_prefix(routes_dict, router.VERSION_PREFIX)) do
            if req.hosts[host] == nil then
                removals[#removals + 1] = host
            end
        end
    end

    if req.default_upstream ~= nil or req.full then
        local ok
        ok, err = routes_dict:safe_set(router.DEFAULT_KEY, req.default_upstream or "")
        if not ok then
            return fail(500, "storing the default backend: " .. tostring(err))
        end
    end
    remove_versioned(routes_dict, router.DATA_PREFIX, router.VERSION_PREFIX, removals)
    -- Fail closed: the previous routes of a changed host that does not fit may admit clients or paths
    -- that the new ones do not. The host answers 503 until its routes fit.
    local changed, unchanged, not_stored, total = store_versioned(routes_dict, router.DATA_PREFIX, router.VERSION_PREFIX, updates,
        function(host)
            if routes_dict:get(router.VERSION_PREFIX .. host)
                and not store(routes_dict, router.DATA_PREFIX .. host, router.VERSION_PREFIX .. host, router.UNAVAILABLE) then
                remove_versioned(routes_dict, router.DATA_PREFIX, router.VERSION_PREFIX, { host })
            end
        end)
    if req.full then
        mark_filled(routes_dict)
    end
    local body = { changed = changed, unchanged = unchanged, removed = #removals, refused = refused }
    if #not_stored > 0 then
        body.not_stored = not_stored
        return dict_full(routes_dict, "routes", "--routes-dict-size", { { "hosts", not_stored, total } }, body)
    end
    if refused then
        body.error = "some hosts' routes were refused and keep what they had; the rest is live"
        return respond(422, body)
    end
    return respond(200, body)
end

return _M
