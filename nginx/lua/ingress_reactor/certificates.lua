-- Serves certificates per SNI name from the shared dict that configuration.lua fills
-- (ssl_certificate_by_lua at http level). A name without an entry keeps the default certificate
-- of the ssl_certificate directives, so a missing or broken Secret degrades to the default
-- certificate instead of failing the handshake. Rotation is a push: no reload, open connections stay.
local ssl = require("ngx.ssl")
local ocsp = require("ngx.ocsp")
local cjson = require("cjson.safe")
local filled = require("ingress_reactor.filled")
local router = require("ingress_reactor.router")

local ngx = ngx
local ngx_log = ngx.log
local ERR = ngx.ERR
local string_lower = string.lower

local dict = ngx.shared.ingress_reactor_certificates

local _M = {}

-- Shared-dict keys; configuration.lua writes them.
_M.HOST_PREFIX = "h:"    -- "h:<host>" -> certificate id
_M.VERSION_PREFIX = "cv:" -- "cv:<id>" -> version
_M.DATA_PREFIX = "c:"     -- "c:<id>" -> pack(cert PEM, key PEM)
_M.OCSP_PREFIX = "o:"     -- "o:<id>" -> "<certificate version>\n<DER OCSP response>" to staple (enable-ocsp), expiring with it

-- The dict keeps certificates as DER, not as the PEM they are pushed in: base64, line breaks and
-- JSON escapes make PEM about 40% larger, and the dict hands out room for values over 2 KB in whole
-- 4 KB pages. An RSA-2048 key with a two-certificate chain takes one page as DER and two as PEM,
-- so the same dict holds twice as many certificates.
--
-- pack returns "\1" followed by one record per PEM block, in order: "c" (part of the certificate
-- chain) or "k" (part of the key), the block's label, "\n", the DER's length, "\n", the DER. It
-- returns nil for PEM it cannot keep exactly (headers inside a block, a missing END line); the
-- caller then stores JSON {"cert": PEM, "key": PEM}, which unpack reads as well.
local PACKED = "\1"

local function pack_blocks(out, kind, pem)
    local blocks = 0
    for label, body in pem:gmatch("%-%-%-%-%-BEGIN ([%w ]+)%-%-%-%-%-(.-)%-%-%-%-%-END %1%-%-%-%-%-") do
        if body:find(":", 1, true) then
            return nil
        end
        local der = ngx.decode_base64((body:gsub("%s", "")))
        if not der or der == "" then
            return nil
        end
        out[#out + 1] = kind .. label .. "\n" .. #der .. "\n" .. der
        blocks = blocks + 1
    end
    local _, begins = pem:gsub("%-%-%-%-%-BEGIN ", "")
    return blocks > 0 and blocks == begins
end

function _M.pack(cert_pem, key_pem)
    local out = { PACKED }
    if not pack_blocks(out, "c", cert_pem) or not pack_blocks(out, "k", key_pem) then
        return nil
    end
    return table.concat(out)
end

local function pem_block(label, der)
    local b64 = ngx.encode_base64(der)
    local lines = {}
    for i = 1, #b64, 64 do
        lines[#lines + 1] = b64:sub(i, i + 63)
    end
    return "-----BEGIN " .. label .. "-----\n" .. table.concat(lines, "\n") .. "\n-----END " .. label .. "-----\n"
end

-- unpack returns the certificate chain and key PEM of a value that pack or the JSON fallback made.
function _M.unpack(value)
    if value:sub(1, 1) ~= PACKED then
        local pair = cjson.decode(value)
        if type(pair) ~= "table" or type(pair.cert) ~= "string" or type(pair.key) ~= "string" then
            return nil
        end
        return pair.cert, pair.key
    end
    local parts = { c = {}, k = {} }
    local pos = 2
    while pos <= #value do
        local label_end = value:find("\n", pos, true)
        local length_end = label_end and value:find("\n", label_end + 1, true)
        local length = length_end and tonumber(value:sub(label_end + 1, length_end - 1))
        if not length then
            return nil
        end
        local kind = parts[value:sub(pos, pos)]
        if not kind then
            return nil
        end
        kind[#kind + 1] = pem_block(value:sub(pos + 1, label_end - 1), value:sub(length_end + 1, length_end + length))
        pos = length_end + length + 1
    end
    return table.concat(parts.c), table.concat(parts.k)
end

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
    local raw = dict:get(_M.DATA_PREFIX .. id)
    if not raw then
        return nil, "no data"
    end
    local cert_pem, key_pem = _M.unpack(raw)
    if not cert_pem then
        return nil, "unreadable data"
    end
    local cert, err = ssl.parse_pem_cert(cert_pem)
    if not cert then
        return nil, "certificate: " .. tostring(err)
    end
    local key
    key, err = ssl.parse_pem_priv_key(key_pem)
    if not key then
        return nil, "private key: " .. tostring(err)
    end
    entry = { version = version, cert = cert, key = key }
    cache[id] = entry
    return entry
end

-- verify_client asks the client for a certificate when the routes entry that serves name verifies
-- client certificates (auth-tls-secret), and has OpenSSL verify it with the entry's CA. The handshake
-- goes on whatever the client sends; router.lua checks the verdict ($ssl_client_verify) per route.
local function verify_client(name)
    local ca = router.client_ca(name)
    if not ca then
        return
    end
    local ok, err = ssl.verify_client(ca.cert, ca.depth)
    if not ok then
        ngx_log(ERR, "asking for a client certificate for ", name, ": ", err)
        return ngx.exit(ngx.ERROR)
    end
end

-- Whether handshakes without SNI or for names no Ingress serves are refused (set_reject_handshake).
local reject_handshake = false

-- set_reject_handshake sets the ConfigMap's ssl-reject-handshake; init_by_lua calls it.
function _M.set_reject_handshake(on)
    reject_handshake = on == true
end

function _M.serve()
    -- Right after a start the dict is empty until the first full push: wait for it rather than present
    -- the default certificate, which a keep-alive connection would keep for all its requests.
    if not filled.wait(dict, "certificates") then
        ngx_log(ERR, "no certificates pushed since NGINX started ", filled.WAIT, " s ago at least; serving the default certificate")
    end
    local name = ssl.server_name()
    if reject_handshake and not (name and router.serves(string_lower(name))) then
        -- ssl-reject-handshake: no default certificate for scanners.
        return ngx.exit(ngx.ERROR)
    end
    if name then
        verify_client(string_lower(name))
    end
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
    -- The controller pushes a response only for this certificate, checked, and the dict drops it when
    -- it expires. Stapling is best effort: the handshake goes on without it.
    -- The value is "<certificate version>\n<DER>": a response is stapled only to the very version of the
    -- certificate it was pushed with, which entry holds.
    local tagged = dict:get(_M.OCSP_PREFIX .. id)
    local staple
    if tagged then
        local nl = string.find(tagged, "\n", 1, true)
        if nl and tonumber(string.sub(tagged, 1, nl - 1)) == entry.version then
            staple = string.sub(tagged, nl + 1)
        end
    end
    if staple then
        ok, err = ocsp.set_ocsp_status_resp(staple)
        if not ok then
            ngx_log(ERR, "stapling the OCSP response of certificate ", id, ": ", err)
        end
    end
end

return _M
