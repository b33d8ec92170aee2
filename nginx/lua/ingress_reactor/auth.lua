-- Basic authentication (auth-type basic; nginx/ann_basicauth.go): the router calls check() with a
-- route's user list (user -> hash, from the routes push) and the request's Authorization header. No
-- password file exists on disk; a change of users is a push.
--
-- Hash formats, as NGINX's auth_basic reads them: "{PLAIN}", "{SHA}" (base64 SHA-1), "{SSHA}" (base64 of
-- SHA-1(password .. salt) .. salt) and "$apr1$" (Apache's MD5-crypt) are verified here; every other
-- format goes to crypt(3) of the system's libcrypt through the FFI (Debian's libxcrypt: $1$, $5$, $6$,
-- bcrypt $2a$/$2b$/$2y$, yescrypt $y$, $gy$, DES).
--
-- Cost: bcrypt and yescrypt take tens of milliseconds per check and block the worker meanwhile (as
-- NGINX's auth_basic does). Successful checks are cached per worker (LRU, CACHE_SIZE entries), keyed by
-- a hash of a per-worker random key, the stored hash and the password, so that a logged-in client pays
-- the cost once; failures are not cached. Passwords never reach a log.
local ffi = require("ffi")
local bit = require("bit")
local lrucache = require("resty.lrucache")

local ngx = ngx
local byte = string.byte
local sub = string.sub
local find = string.find
local md5_bin = ngx.md5_bin
local sha1_bin = ngx.sha1_bin
local encode_base64 = ngx.encode_base64
local decode_base64 = ngx.decode_base64
local band, bor, bxor, rshift, lshift = bit.band, bit.bor, bit.bxor, bit.rshift, bit.lshift

local _M = {}

local CACHE_SIZE = 1024
local cache
local cache_key_salt

-- equal compares two strings in time that depends only on their lengths.
local function equal(a, b)
    if #a ~= #b then
        return false
    end
    local d = 0
    for i = 1, #a do
        d = bor(d, bxor(byte(a, i), byte(b, i)))
    end
    return d == 0
end
_M.equal = equal

local ITOA64 = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

local function to64(v, n, out)
    for _ = 1, n do
        local i = band(v, 0x3f) + 1
        out[#out + 1] = sub(ITOA64, i, i)
        v = rshift(v, 6)
    end
end

-- md5crypt computes the MD5-crypt hash (magic "$apr1$" or "$1$") of password with salt (up to 8
-- characters), 1000 rounds.
local function md5crypt(password, salt, magic)
    local final = md5_bin(password .. salt .. password)
    local ctx = { password, magic, salt }
    local n = #password
    while n > 0 do
        ctx[#ctx + 1] = sub(final, 1, n > 16 and 16 or n)
        n = n - 16
    end
    n = #password
    while n > 0 do
        ctx[#ctx + 1] = band(n, 1) == 1 and "\0" or sub(password, 1, 1)
        n = rshift(n, 1)
    end
    final = md5_bin(table.concat(ctx))
    for i = 0, 999 do
        local odd = band(i, 1) == 1
        final = md5_bin((odd and password or final) .. (i % 3 ~= 0 and salt or "") .. (i % 7 ~= 0 and password or "")
            .. (odd and final or password))
    end
    local out = { magic, salt, "$" }
    local f = { byte(final, 1, 16) }
    for _, t in ipairs({ { 1, 7, 13 }, { 2, 8, 14 }, { 3, 9, 15 }, { 4, 10, 16 }, { 5, 11, 6 } }) do
        to64(bor(lshift(f[t[1]], 16), lshift(f[t[2]], 8), f[t[3]]), 4, out)
    end
    to64(f[12], 2, out)
    return table.concat(out)
end
_M.md5crypt = md5crypt

local libcrypt
do
    local ok = pcall(ffi.cdef, "char *crypt(const char *phrase, const char *setting);")
    if ok then
        for _, name in ipairs({ "libcrypt.so.1", "crypt" }) do
            local loaded, lib = pcall(ffi.load, name)
            if loaded then
                libcrypt = lib
                break
            end
        end
    end
end

local function system_crypt(password, hash)
    if not libcrypt then
        ngx.log(ngx.ERR, "basic authentication: libcrypt cannot be loaded, so crypt(3) hashes never match")
        return false
    end
    if find(password, "\0", 1, true) then
        return false -- crypt() would stop at the NUL and check a shorter password
    end
    local res = libcrypt.crypt(password, hash)
    if res == nil then
        return false
    end
    return equal(ffi.string(res), hash)
end

-- verify reports whether password matches hash (one of the formats above).
local function verify(hash, password)
    if sub(hash, 1, 7) == "{PLAIN}" then
        return equal(sub(hash, 8), password)
    elseif sub(hash, 1, 5) == "{SHA}" then
        return equal(sub(hash, 6), encode_base64(sha1_bin(password)))
    elseif sub(hash, 1, 6) == "{SSHA}" then
        local raw = decode_base64(sub(hash, 7))
        if not raw or #raw <= 20 then
            return false
        end
        return equal(sub(raw, 1, 20), sha1_bin(password .. sub(raw, 21)))
    elseif sub(hash, 1, 6) == "$apr1$" then
        local salt = hash:match("^%$apr1%$([^$]*)%$")
        if not salt then
            return false
        end
        return equal(md5crypt(password, sub(salt, 1, 8), "$apr1$"), hash)
    end
    return system_crypt(password, hash)
end
_M.verify = verify

local function cached(hash, password)
    if not cache then
        cache = lrucache.new(CACHE_SIZE)
        local random = ""
        local f = io.open("/dev/urandom", "rb")
        if f then
            random = f:read(32) or ""
            f:close()
        end
        cache_key_salt = random .. tostring(ngx.now()) .. tostring(ngx.worker.pid())
    end
    return sha1_bin(cache_key_salt .. hash .. "\0" .. password)
end

-- check reports whether authorization (the Authorization header, or nil) names a user of users (user ->
-- hash) with its password.
function _M.check(users, authorization)
    if type(authorization) ~= "string" then
        return false
    end
    local scheme, credentials = authorization:match("^%s*(%a+)%s+([%w+/=]+)%s*$")
    if not scheme or scheme:lower() ~= "basic" then
        return false
    end
    local decoded = decode_base64(credentials)
    if not decoded then
        return false
    end
    local colon = find(decoded, ":", 1, true)
    if not colon then
        return false
    end
    local hash = users[sub(decoded, 1, colon - 1)]
    if not hash then
        return false
    end
    local password = sub(decoded, colon + 1)
    local key = cached(hash, password)
    if cache:get(key) then
        return true
    end
    if verify(hash, password) then
        cache:set(key, true)
        return true
    end
    return false
end

-- parse_users turns the wire form of a user list ("user:hash\n" lines) into user -> hash; the first
-- hash of a user wins, as in NGINX.
function _M.parse_users(lines)
    local users = {}
    for line in lines:gmatch("[^\n]+") do
        local colon = find(line, ":", 1, true)
        if colon and colon > 1 then
            local user = sub(line, 1, colon - 1)
            if users[user] == nil then
                users[user] = sub(line, colon + 1)
            end
        end
    end
    return users
end

return _M
