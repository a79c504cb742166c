-- wrk script for make bench's memory check: every GET route in turn (each
-- lesson by id, the lists, each level), so that whatever the module keeps
-- per route is filled.  After BENCH_REQUESTS responses (one thread) it
-- stops sending and creates the file BENCH_DONE: wrk itself runs for its
-- -d duration whatever a thread does, so bench.sh, seeing the file, ends
-- it with SIGINT (wrk then prints its report).
-- BENCH_TOKEN is the bearer token; BENCH_BASE the API's path.
local base  = os.getenv("BENCH_BASE") or "/api/lessons"
local ids   = tonumber(os.getenv("BENCH_IDS") or "102")
local limit = tonumber(os.getenv("BENCH_REQUESTS") or "200000")
local done_file = os.getenv("BENCH_DONE")

wrk.headers["Authorization"] = "Bearer " .. (os.getenv("BENCH_TOKEN") or "")

local paths = { base, base .. "/beginner", base .. "/advanced" }
for level = 1, 6 do paths[#paths + 1] = base .. "/level/" .. level end
for id = 1, ids do paths[#paths + 1] = base .. "/" .. id end

local i, done = 0, 0
request = function()
    i = i % #paths + 1
    return wrk.format(nil, paths[i])
end
response = function(status, headers, body)
    done = done + 1
    if done == limit then
        if done_file then
            local f = io.open(done_file, "w")
            if f then f:write(done, "\n"); f:close() end
        end
        wrk.thread:stop()
    end
end
