-- wrk script for t/api/rss.t: every kind of request the module answers,
-- in turn, so that whatever it keeps per kind is exercised.  From the
-- environment: RSS_TOKEN (a good token), RSS_KID_TOKEN (a good signature
-- but a kid the key set lacks: each makes the module ask the keys URL
-- again, at most once per LessonsJWTKeysMinRefresh), RSS_ID (a lesson
-- read and revalidated), RSS_TAG (its ETag), RSS_WID (a lesson written).
-- done() prints "5xx N" and "kinds N": the answers 500 and above.
local base  = "/api/lessons"
local token = "Bearer " .. (os.getenv("RSS_TOKEN") or "")
local kid   = "Bearer " .. (os.getenv("RSS_KID_TOKEN") or "")
local id    = os.getenv("RSS_ID") or "1"
local tag   = os.getenv("RSS_TAG") or '"none"'
local wid   = os.getenv("RSS_WID") or "2"
local origin = "https://app.example.org"
local json  = "application/json"

local kinds = {
    { "GET", base, { Authorization = token } },
    { "GET", base .. "/" .. id, { Authorization = token } },
    { "GET", base .. "/level/3", { Authorization = token } },
    { "GET", base .. "/beginner", { Authorization = token, Origin = origin } },
    { "GET", base .. "/" .. id, { Authorization = token, ["If-None-Match"] = tag } },
    { "PUT", base .. "/" .. wid, { Authorization = token, ["Content-Type"] = json,
        ["If-Match"] = '"L' .. wid .. '.1.0000"' }, '{"title":"Veraltet"}' },
    { "PUT", base .. "/" .. wid, { Authorization = token, ["Content-Type"] = json },
        '{"title":"Gespeichert"}' },
    { "GET", base .. "/advanced", {} },
    { "GET", base, { Authorization = "Bearer a.b.c" } },
    { "OPTIONS", base, { Origin = origin, ["Access-Control-Request-Method"] = "POST",
        ["Access-Control-Request-Headers"] = "authorization, content-type" } },
    { "GET", base .. "/" .. id, { Authorization = kid } },
    { "POST", base, { Authorization = token, ["Content-Type"] = json }, '{"title":' },
    { "DELETE", base .. "/999999999", { Authorization = token } },
}

local threads = {}
setup = function(thread) table.insert(threads, thread) end

local i, errors = 0, 0
request = function()
    i = i % #kinds + 1
    local k = kinds[i]
    return wrk.format(k[1], k[2], k[3], k[4])
end
response = function(status, headers, body)
    if status >= 500 then errors = errors + 1 end
end
done = function(summary, latency, requests)
    local n = 0
    for _, t in ipairs(threads) do n = n + (t:get("errors") or 0) end
    io.write(string.format("5xx %d\nkinds %d\n", n, #kinds))
end
