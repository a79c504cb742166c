-- wrk script for make bench's writes.
--   BENCH_WRITE=create  POST /api/lessons with a new lesson
--   BENCH_WRITE=update  PUT /api/lessons/ID, ID cycling over the dataset's
--                       1..BENCH_IDS, the description alternating so that
--                       every update changes the row
-- BENCH_TOKEN is the bearer token; BENCH_BASE the API's path.
local mode  = os.getenv("BENCH_WRITE") or "create"
local base  = os.getenv("BENCH_BASE") or "/api/lessons"
local ids   = tonumber(os.getenv("BENCH_IDS") or "102")

wrk.headers["Authorization"] = "Bearer " .. (os.getenv("BENCH_TOKEN") or "")
wrk.headers["Content-Type"]  = "application/json"

local create_body = '{"levelId":3,"title":"Ein Tag in Hamburg – A day in Hamburg",'
    .. '"order":18,"topic":"Travel","description":"Planning a day in the city '
    .. 'with the Präteritum and time expressions. Example: „Zuerst fuhren wir '
    .. 'mit der Fähre über die Elbe, danach aßen wir Fischbrötchen am Hafen.“",'
    .. '"isActive":true}'
local update_bodies = {
    '{"description":"Reviewed: the Präteritum in written narratives. Example: „Es war einmal ein König, der hatte drei Töchter.“"}',
    '{"description":"Reviewed again: the Präteritum in written narratives. Example: „Eines Tages ging die jüngste in den Wald.“"}',
}

local n = 0
if mode == "create" then
    wrk.method = "POST"
    wrk.body   = create_body
    wrk.path   = base
else
    request = function()
        n = n + 1
        local id = (n % ids) + 1
        return wrk.format("PUT", base .. "/" .. id, nil,
                          update_bodies[(math.floor(n / ids) % 2) + 1])
    end
end
