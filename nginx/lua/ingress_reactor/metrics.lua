-- Request metrics (--enable-metrics): ingress-nginx's per-request histograms and counter, aggregated
-- in NGINX rather than sent to the controller one message per request.
--
-- The router (route) puts the request's route labels into $ingress_reactor_metrics: namespace, ingress,
-- service, the Ingress path, the host label and the canary label, tab-separated (Ingress names and paths
-- hold no tab: the controller validated them). In the log phase, log() adds the request to a table of
-- this worker keyed by those labels, the status and the bounded method: plain Lua table arithmetic, no
-- shared memory and no lock on the request path. Every second (and when the worker exits, on a reload
-- or a stop) flush() adds the worker's sums to the shared dict with incr, one key per non-zero slot:
--   "<slot>\t<labels>\t<status>\t<method>" -> count or sum
-- Slots (layout, the Go side computes the same): 0 requests; then per histogram in the order of HISTOGRAMS
-- its sum, followed by one slot per bucket and one for +Inf (counts of the bucket a value fell into, not
-- cumulative). The dict survives reloads; "generation", set once per NGINX start, tells the controller
-- that a restart emptied it (the controller keeps the counters growing across restarts).
-- dump() answers the status server's GET /metrics/requests with every key and value, one a line, after
-- a first line "generation\t<id>".

local ngx = ngx
local ngx_var = ngx.var
local tonumber = tonumber
local match = string.match
local now = ngx.now
local start_time = ngx.req.start_time

local dict = ngx.shared.ingress_reactor_metrics

local _M = {}

-- HISTOGRAMS: the bucket list of each histogram, in slot order, with the NGINX variable it observes
-- (log() reads them: the request time from the request's start, the rest from
-- $ingress_reactor_metrics_values). bytes_sent feeds two histograms: response_size with the length
-- buckets, bytes_sent with the size buckets.
local HISTOGRAMS = {
    { buckets = "time" }, -- request_time
    { buckets = "time" }, -- upstream_response_time
    { buckets = "time" }, -- upstream_header_time
    { buckets = "time" }, -- upstream_connect_time
    { buckets = "length" }, -- request_length
    { buckets = "length" }, -- bytes_sent
    { buckets = "size" }, -- bytes_sent
}

-- METHODS bound the method label: any other method counts as "other".
local METHODS = { GET = "GET", HEAD = "HEAD", POST = "POST", PUT = "PUT", DELETE = "DELETE", PATCH = "PATCH",
    OPTIONS = "OPTIONS", CONNECT = "CONNECT", TRACE = "TRACE" }

local enabled = false
local per_host = true
local per_undefined_host = false
-- layout: per histogram {buckets = {...}, base = slot of its sum}
local layout = {}
local slots = 1
-- acc: this worker's sums since its last flush, by label key: an array of slots (index slot + 1).
local acc = {}
local FLUSH_EVERY = 1
-- generation: the dict's, as configure found or made it (workers inherit it from the master).
local generation
-- exiting: the worker's flush timer ran its last time (a reload or a stop); requests that end later
-- flush themselves.
local exiting = false

-- configure runs in init_by_lua (the master): the buckets of --time-buckets, --length-buckets and
-- --size-buckets, and the host label flags. It also sets the dict's generation once per NGINX start
-- (a reload runs it again and keeps it: the dict survives).
function _M.configure(c)
    enabled = true
    per_host = c.per_host == true
    per_undefined_host = c.per_undefined_host == true
    layout = {}
    local slot = 1
    for i, h in ipairs(HISTOGRAMS) do
        layout[i] = { buckets = c[h.buckets], base = slot }
        slot = slot + 1 + #c[h.buckets] + 1
    end
    slots = slot
    if not dict then
        return
    end
    generation = dict:get("generation")
    if not generation then
        -- Values without their generation (a full dict pushed it out, then a reload): the controller
        -- would take them for a new start's and count them again. They go; it has read most of them.
        if #dict:get_keys(1) > 0 then
            dict:flush_all()
        end
        -- Unique per start: the time and the address of a fresh table (ASLR).
        generation = os.time() .. "-" .. tostring({}):sub(8)
        dict:add("generation", generation)
    end
end

function _M.enabled()
    return enabled
end

function _M.per_undefined_host()
    return per_host and per_undefined_host
end

-- labels returns the value of $ingress_reactor_metrics for a request: the route's labels (namespace,
-- ingress, service and path, tab-separated; nil for no route), the name of the routes entry that served
-- the host ("" for the catch-all), the request's host and the canary's upstream name (or "").
function _M.labels(route_labels, entry, host, canary)
    local h = ""
    if per_host then
        if entry ~= "" then
            h = entry
        elseif per_undefined_host then
            h = host
        end
    end
    return (route_labels or "\t\t\t") .. "\t" .. h .. "\t" .. (canary or "")
end

-- number reads a time or length variable; with several upstream tries ("0.001, 0.002" or "0.1 : 0.2")
-- the last one, the try that answered. nil for "-" or empty.
local function number(v)
    if not v then
        return nil
    end
    local n = tonumber(v)
    if n then
        return n
    end
    return tonumber(match(v, "([%d.]+)%s*$"))
end

-- observe adds value v (nil: none) to histogram h of series s.
local function observe(s, h, v)
    if not v then
        return
    end
    local b = h.buckets
    local i = 1
    local n = #b
    while i <= n and v > b[i] do
        i = i + 1
    end
    local base = h.base
    s[base + 1] = s[base + 1] + v
    s[base + 1 + i] = s[base + 1 + i] + 1
end

local flush -- below

-- log runs in the log phase of every request: requests that did not pass the router (the status
-- server, requests NGINX refused before any location) have no labels and are not counted. Each NGINX
-- variable is read once; the upstream ones only when the request reached an upstream.
function _M.log()
    if not enabled then
        return
    end
    local labels = ngx_var.ingress_reactor_metrics
    if not labels or labels == "" then
        return
    end
    local key = labels .. "\t" .. (ngx_var.status or "000") .. "\t" .. (METHODS[ngx_var.request_method] or "other")
    local s = acc[key]
    if not s then
        s = {}
        for i = 1, slots do
            s[i] = 0
        end
        acc[key] = s
    end
    s[1] = s[1] + 1
    local l = layout
    -- $request_time from the request's start (the same clock and resolution), without a variable read.
    observe(s, l[1], now() - start_time())
    local rl, bs, rt, ht, ct = match(ngx_var.ingress_reactor_metrics_values, "^(%d*)|(%d*)|([^|]*)|([^|]*)|([^|]*)$")
    observe(s, l[5], tonumber(rl))
    local sent = tonumber(bs)
    observe(s, l[6], sent)
    observe(s, l[7], sent)
    if rt and rt ~= "" and rt ~= "-" then -- the request reached an upstream
        observe(s, l[2], number(rt))
        observe(s, l[3], number(ht))
        observe(s, l[4], number(ct))
    end
    if exiting then
        flush()
    end
end

-- What a full dict cost since the last log line, and when that was (FULL_LOG_EVERY seconds apart).
local FULL_LOG_EVERY = 60
local full_unlogged, full_logged_at = 0, 0

flush = function()
    local a = acc
    acc = {}
    local full = 0
    for key, s in pairs(a) do
        for i = 1, slots do
            local v = s[i]
            if v ~= 0 then
                local _, err, forcible = dict:incr((i - 1) .. "\t" .. key, v, 0)
                if err or forcible then -- not stored, or stored in place of the least recently used
                    full = full + 1
                end
            end
        end
    end
    -- The generation is read last: the most recently used key, never the one a full dict pushes out.
    if not dict:get("generation") then
        dict:add("generation", generation)
    end
    if full > 0 then
        dict:incr("dropped", full, 0)
        full_unlogged = full_unlogged + full
    end
    -- At most one line a minute per worker: a full dict stays full, and the count is in the dropped metric.
    local now = ngx.now()
    if full_unlogged > 0 and now - full_logged_at >= FULL_LOG_EVERY then
        ngx.log(ngx.ERR, "request metrics: ", full_unlogged, " values did not fit into the metrics dict, or pushed older ones out, since this worker last said so (raise --metrics-dict-size, or leave histograms out with --exclude-socket-metrics)")
        full_unlogged, full_logged_at = 0, now
    end
end

-- tick runs every FLUSH_EVERY seconds, and once more with premature set when the worker exits (a reload
-- or a stop): its last sums go into the dict all the same.
local function tick(premature)
    if premature then
        exiting = true
    end
    flush()
end

function _M.init_worker()
    if not enabled then
        return
    end
    local ok, err = ngx.timer.every(FLUSH_EVERY, tick)
    if not ok then
        ngx.log(ngx.ERR, "request metrics: cannot start the flush timer: ", err)
    end
end

-- forget answers POST /metrics/requests/forget on the status server: its body lists Ingresses, one
-- "namespace\tname" a line, whose values are deleted (the controller stopped serving them). Answers the
-- number of values deleted.
function _M.forget()
    if not dict then
        ngx.status = 404
        return ngx.print("request metrics are off")
    end
    ngx.req.read_body()
    local body = ngx.req.get_body_data() or ""
    local gone = {}
    for line in body:gmatch("[^\n]+") do
        gone[line] = true
    end
    local n = 0
    for _, k in ipairs(dict:get_keys(0)) do
        local ns, ing = match(k, "^%d+\t([^\t]*)\t([^\t]*)\t")
        if ns and gone[ns .. "\t" .. ing] then
            dict:delete(k)
            n = n + 1
        end
    end
    ngx.print(n)
end

-- dump answers GET /metrics/requests on the status server.
function _M.dump()
    if not dict then
        ngx.status = 404
        return ngx.print("request metrics are off")
    end
    local keys = dict:get_keys(0)
    if not dict:get("generation") then
        dict:add("generation", generation)
    end
    local out = { "generation\t", dict:get("generation") or "", "\n" }
    local n = #out
    for _, k in ipairs(keys) do
        if k ~= "generation" then
            local v = dict:get(k)
            if v then
                out[n + 1] = k
                out[n + 2] = "\t"
                out[n + 3] = tostring(v)
                out[n + 4] = "\n"
                n = n + 4
            end
        end
    end
    ngx.header["Content-Type"] = "text/plain"
    ngx.print(out)
end

return _M
