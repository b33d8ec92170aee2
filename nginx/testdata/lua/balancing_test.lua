-- Unit tests of ingress_reactor.balancing, run by TestBalancingLua in a content_by_lua handler (the
-- module needs ngx.md5_bin, ngx.crc32_long and ngx.hmac_sha1). Each failed check prints a line that
-- starts with "FAIL"; the test passes when the answer is "ok".
local balancing = require("ingress_reactor.balancing")

local failures = {}
local function check(cond, ...)
    if not cond then
        failures[#failures + 1] = table.concat({ "FAIL", ... }, " ")
    end
end

local function ids_of(n, first)
    local ids = {}
    for i = 1, n do
        ids[i] = "10.0.0." .. (i + (first or 0)) .. ":8080"
    end
    return ids
end

-- owners maps each of the keys to the id of its endpoint on a ring of ids.
local KEYS = 10000
local function owners(ids)
    local r = balancing.ring(ids)
    local out = {}
    for k = 1, KEYS do
        out[k] = ids[balancing.find(r, balancing.hash("key-" .. k))]
    end
    return out
end

-- Balance: each of 10 endpoints gets a tenth of the keys, give or take half.
local ten = ids_of(10)
local before = owners(ten)
local share = {}
for _, id in ipairs(before) do
    share[id] = (share[id] or 0) + 1
end
for _, id in ipairs(ten) do
    check(share[id] and share[id] > 500 and share[id] < 1500, "share of", id, tostring(share[id]), "of", KEYS)
end

-- Removing 1 of 10 endpoints moves only its own keys (about a tenth).
local nine = {}
for _, id in ipairs(ten) do
    if id ~= ten[4] then
        nine[#nine + 1] = id
    end
end
local after = owners(nine)
local moved, stray = 0, 0
for k = 1, KEYS do
    if before[k] ~= after[k] then
        moved = moved + 1
        if before[k] ~= ten[4] then
            stray = stray + 1
        end
    end
end
check(stray == 0, "removing one endpoint moved", tostring(stray), "keys of other endpoints")
check(moved == share[ten[4]], "removing one endpoint moved", tostring(moved), "keys; it had", tostring(share[ten[4]]))
check(moved > 500 and moved < 1500, "removing 1 of 10 endpoints moved", tostring(moved), "of", KEYS, "keys")

-- Adding an 11th moves keys only to it, about an eleventh.
local eleven = ids_of(11)
local added = owners(eleven)
moved, stray = 0, 0
for k = 1, KEYS do
    if before[k] ~= added[k] then
        moved = moved + 1
        if added[k] ~= eleven[11] then
            stray = stray + 1
        end
    end
end
check(stray == 0, "adding one endpoint moved", tostring(stray), "keys between old endpoints")
check(moved > 450 and moved < 1400, "adding an 11th endpoint moved", tostring(moved), "of", KEYS, "keys")

-- The ring does not depend on the order of the list (workers and replicas see other orders).
local reversed = {}
for i = #ten, 1, -1 do
    reversed[#reversed + 1] = ten[i]
end
local again = owners(reversed)
local differ = 0
for k = 1, KEYS do
    if again[k] ~= before[k] then
        differ = differ + 1
    end
end
check(differ == 0, "the ring of the reversed list maps", tostring(differ), "keys elsewhere")

-- walk: k distinct endpoints after a key, none of those skipped.
local r = balancing.ring(ten)
local set = balancing.walk(r, balancing.hash("x"), 3)
check(#set == 3 and set[1] ~= set[2] and set[2] ~= set[3] and set[1] ~= set[3], "walk of 3:", table.concat(set, ","))
check(set[1] == balancing.find(r, balancing.hash("x")), "walk starts at the key's endpoint")
local skip = { [set[1]] = true }
check(balancing.find(r, balancing.hash("x"), skip) == set[2], "find skipping the key's endpoint gives the next one")
local all = {}
for i = 1, 10 do
    all[i] = true
end
check(balancing.find(r, 1, all) == nil, "find with every endpoint skipped gives nil")
check(#balancing.walk(r, 0, 20) == 10, "walk of more than there are gives each endpoint once")
ngx.update_time()
local started = ngx.now()
local big = balancing.ring(ids_of(1000))
ngx.update_time()
ngx.log(ngx.NOTICE, "a ring of 1000 endpoints took ", ngx.now() - started, " s")
check(#big.hashes == 1000 * 40, "a ring of 1000 endpoints has", tostring(#big.hashes), "points, want 40 each")

-- EWMA: the faster endpoint wins every pair it is in.
local now = 1000
local stats = {}
local two = { "fast:1", "slow:1" }
for i = 1, 5 do
    balancing.observe(stats, "fast:1", 0.002, now + i)
    balancing.observe(stats, "slow:1", 0.050, now + i)
end
local wins = 0
for _ = 1, 1000 do
    if balancing.pick_ewma(two, stats, nil, now + 6) == 1 then
        wins = wins + 1
    end
end
check(wins == 1000, "ewma of two: the faster endpoint got", tostring(wins), "of 1000")
local three = { "fast:1", "slow:1", "slow:2" }
stats["slow:2"] = { ewma = 0.050, at = now + 5 }
wins = 0
for _ = 1, 3000 do
    if balancing.pick_ewma(three, stats, nil, now + 6) == 1 then
        wins = wins + 1
    end
end
check(wins > 1700 and wins < 2300, "ewma of three: the faster endpoint got", tostring(wins), "of 3000, want about two thirds")
check(balancing.pick_ewma(two, stats, { true }, now + 6) == 2, "ewma skips the endpoints tried")
check(balancing.score(stats["slow:1"], now + 60) < balancing.score(stats["slow:1"], now + 6) / 100,
    "an idle endpoint's score decays")
balancing.sync(stats, { "fast:1", "new:1" }, now + 6)
check(stats["slow:1"] == nil and stats["new:1"] ~= nil, "sync drops gone endpoints and adds new ones")
check(stats["new:1"] and math.abs(stats["new:1"].ewma - balancing.score(stats["fast:1"], now + 6)) < 1e-9,
    "a new endpoint starts at the mean score")

-- Expressions.
for _, ok in ipairs({ "$request_uri", "$remote_addr", "${arg_x}-v1", "$http_x_user$cookie_session", "a:$host/b.c_d-e",
    "$ARG_Upper" }) do
    local parts, err = balancing.parse_expression(ok)
    check(parts ~= nil, "expression", ok, "refused:", tostring(err))
end
for _, bad in ipairs({ "", "text", "$request_body", "$ingress_reactor_token", "$arg_", "$arg_x;", "$arg_x ", "${arg_x",
    "$", "${}", "$arg_x\"", "$http_x\n", string.rep("$uri", 100) }) do
    local parts = balancing.parse_expression(bad)
    check(parts == nil, "expression", string.format("%q", bad), "accepted")
end
local parts = balancing.parse_expression("${arg_x}-$HOST")
check(balancing.evaluate(parts, { arg_x = "1", host = "h" }) == "1-h", "evaluate ${arg_x}-$HOST")
check(balancing.evaluate(parts, {}) == "-", "evaluate without the variables")

-- Cookies: tokens are keyed hashes, not addresses.
local t1 = balancing.token(string.rep("ab", 16), "10.0.0.1:8080")
check(#t1 == 24 and t1:match("^%x+$") ~= nil, "token", t1)
check(t1 == balancing.token(string.rep("ab", 16), "10.0.0.1:8080"), "a token is the same each time")
check(t1 ~= balancing.token(string.rep("cd", 16), "10.0.0.1:8080"), "another key gives another token")
check(t1 ~= balancing.token(string.rep("ab", 16), "10.0.0.2:8080"), "another endpoint gives another token")
local k = balancing.new_key()
check(balancing.valid_key(k) and k ~= balancing.new_key(), "new_key", k)
check(not balancing.valid_key("10.0.0.1:8080xxx") and not balancing.valid_key("0123456789ABCDEF"), "valid_key")
-- The affinity cookie by its exact name: NGINX's $cookie_<name> would take "route" for "ROUTE".
local function values(header, name)
    return table.concat(balancing.cookie_values(header, name), ",")
end
check(values("route=app; ROUTE=k1", "ROUTE") == "k1", "cookie_values skips a name in another case")
check(values("ROUTE=k1;ROUTE=k2", "ROUTE") == "k1,k2", "cookie_values keeps every cookie of the name, in order")
check(values("  a=1 ;  ROUTE = k3 ", "ROUTE") == "k3", "cookie_values around spaces")
check(values("XROUTE=1; ROUTEX=2; ROUTE=", "ROUTE") == "", "cookie_values of a name no cookie has")
check(values(nil, "ROUTE") == "", "cookie_values without a Cookie header")
-- Upstream tags of affinity cookies ("<key>|<tag>").
local tag = balancing.upstream_tag("default-web-80")
check(#tag == 8 and tag:match("^%x+$") ~= nil and tag == balancing.upstream_tag("default-web-80"), "upstream_tag", tag)
check(tag ~= balancing.upstream_tag("default-web-v2-80"), "another upstream gives another tag")
local key, got = balancing.split_cookie("0123456789abcdef|" .. tag)
check(key == "0123456789abcdef" and got == tag, "split_cookie", tostring(key), tostring(got))
key, got = balancing.split_cookie("0123456789abcdef")
check(key == "0123456789abcdef" and got == nil, "split_cookie of a value without a tag")
key, got = balancing.split_cookie("k|not-hex!")
check(key == "k|not-hex!" and got == nil, "split_cookie of a value whose tag is not one")
check(balancing.cookie_has_tag("S=untagged; S=k|" .. tag .. "; S=k|00000000", "S", tag), "cookie_has_tag: a tagged cookie of the name")
check(balancing.cookie_has_tag("S=k|00000000; S=k|" .. tag, "S", tag), "cookie_has_tag: behind another host's tagged cookie of the name")
check(not balancing.cookie_has_tag("s=k|" .. tag, "S", tag) and not balancing.cookie_has_tag(nil, "S", tag)
    and not balancing.cookie_has_tag("S=k|00000000", "S", tag), "cookie_has_tag without one")

local c = { name = "S", path = "/app", domain = ".example.com", max_age = 60, samesite = "None", samesite_none_conditional = true }
check(balancing.cookie_header(c, "v", true, "curl/8", 0) == "S=v; Path=/app; Domain=.example.com; Max-Age=60; Secure; HttpOnly; SameSite=None",
    "cookie over HTTPS:", balancing.cookie_header(c, "v", true, "curl/8", 0))
local old_chrome = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/59.0.3071.115 Safari/537.36"
check(balancing.cookie_header(c, "v", false, old_chrome, 0) == "S=v; Path=/app; Domain=.example.com; Max-Age=60; HttpOnly",
    "cookie for Chrome 59:", balancing.cookie_header(c, "v", false, old_chrome, 0))
c = { name = "S", path = "/", expires = 3600 }
check(balancing.cookie_header(c, "v", false, nil, 0) == "S=v; Path=/; Expires=Thu, 01-Jan-70 01:00:00 GMT; HttpOnly",
    "cookie with expires over plain HTTP:", balancing.cookie_header(c, "v", false, nil, 0))
c.secure = true
check(balancing.cookie_header(c, "v", false, nil, 0) == "S=v; Path=/; Expires=Thu, 01-Jan-70 01:00:00 GMT; Secure; HttpOnly",
    "secure cookie over plain HTTP:", balancing.cookie_header(c, "v", false, nil, 0))
check(not balancing.samesite_none_ok("Mozilla/5.0 (iPhone; CPU iPhone OS 12_0 like Mac OS X) Safari/604.1"), "iOS 12")
check(balancing.samesite_none_ok("Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0 Safari/537.36"), "Chrome 120")
check(not balancing.samesite_none_ok("Mozilla/5.0 (Windows NT 6.1) AppleWebKit/537.36 Chrome/49.0.2623.112 Safari/537.36"), "Chrome 49")

if #failures > 0 then
    ngx.status = 500
    ngx.say(table.concat(failures, "\n"))
    return ngx.exit(500)
end
ngx.say("ok")
