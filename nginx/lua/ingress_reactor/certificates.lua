-- Serves certificates per SNI name from the shared dict that configuration.lua fills
-- (ssl_certificate_by_lua at http level). A name without an entry keeps the default certificate
-- of the ssl_certificate directives, so a missing or broken Secret degrades to the default
-- certificate instead of failing the handshake. Rotation is a push: no reload, open connections stay.
local ssl = require("ngx.ssl")
local cjson = require("cjson.safe")

local ngx = ngx
local ngx_log = ngx.log
local ERR = ngx.ERR
local string_lower = string.lower

local dict = ngx.shared.ingress_reactor_certificates

local _M = {}

-- Shared-dict keys; configuration.lua writes them.
_M.HOST_PREFIX = "h:"    -- "h:<host>" -> certificate id
_M.VERSION_PREFIX = "cv:" -- "cv:<id>" -> version
_M.DATA_PREFIX = "c:"     -- "c:<id>" -> {"cert": PEM, "key": PEM}

-- id -> { version = number, cert = cdata, key = cdata }: parsed once per worker and version.
local cache = {}

-- certificate_id finds the id for an SNI name: the exact host, then the "*." wildcard one label up (an
-- Ingress wildcard covers exactly one label), then the default certificate pushed as host "*".
local function certificate_id(name)
    local id = dict:get(_M.HOST_PREFIX .. name)
    if id then
        return id
    end
    local dot = name:find(".", 1, true)
    if dot then
        id = dict:get(_M.HOST_PREFIX .. "*." .. name:sub(dot + 1))
        if id then
            return id
        end
    end
    -- "*" alone is the --default-ssl-certificate Secret (or the generated one), when the controller pushed one.
    return dict:get(_M.HOST_PREFIX .. "*")
end

local function load(id)
    local version = dict:get(_M.VERSION_PREFIX .. id)
    if not version then
        cache[id] = nil
        return nil
    end
    local entry = cache[id]
    if entry and entry.version == version then
        return entry
    end
    local pair = cjson.decode(dict:get(_M.DATA_PREFIX .. id) or "null")
    if type(pair) ~= "table" then
        return nil, "no data"
    end
    local cert, err = ssl.parse_pem_cert(pair.cert)
    if not cert then
        return nil, "certificate: " .. tostring(err)
    end
    local key
    key, err = ssl.parse_pem_priv_key(pair.key)
    if not key then
        return nil, "private key: " .. tostring(err)
    end
    entry = { version = version, cert = cert, key = key }
    cache[id] = entry
    return entry
end

function _M.serve()
    local name = ssl.server_name()
    local id
    if name then
        id = certificate_id(string_lower(name))
    else
        id = dict:get(_M.HOST_PREFIX .. "*") -- no SNI: the default certificate
    end
    if not id then
        return
    end
    local entry, err = load(id)
    if not entry then
        if err then
            ngx_log(ERR, "certificate ", id, " for ", name, " is unusable, serving the default: ", err)
        end
        return
    end
    local ok
    ok, err = ssl.clear_certs()
    if ok then
        ok, err = ssl.set_cert(entry.cert)
    end
    if ok then
        ok, err = ssl.set_priv_key(entry.key)
    end
    if not ok then
        ngx_log(ERR, "setting certificate ", id, " for ", name, ": ", err)
        return ngx.exit(ngx.ERROR)
    end
end

return _M
