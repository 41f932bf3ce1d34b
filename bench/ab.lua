-- wrk script of bench/ab.sh: POST the file named by $BODY as application/json
-- (as bench/post.lua does) and check every answer: HTTP 200 whose body holds
-- $EXPECT (default "allowed":true).  done() prints two lines for ab.sh:
--   ab-checked N    answers seen by response()
--   ab-bad N FIRST  answers that failed the check, and the first of them
-- Checking costs wrk a little CPU per answer, the same for both servers.
-- The request itself: bench/post.lua, next to this file.
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "post.lua")

local expect = os.getenv("EXPECT") or '"allowed":true'

-- Each wrk thread has its own Lua state: these globals are per thread and
-- done() (in the main state) reads them through the thread objects.
checked = 0
bad = 0
first_bad = ""

function response(status, headers, body)
  checked = checked + 1
  if status ~= 200 or not string.find(body, expect, 1, true) then
    bad = bad + 1
    if bad == 1 then
      first_bad = "HTTP " .. status .. " " .. string.sub(body, 1, 200):gsub("%s", " ")
    end
  end
end

local threads = {}
function setup(thread)
  table.insert(threads, thread)
end

function done(summary, latency, requests)
  local c, b, first = 0, 0, ""
  for _, t in ipairs(threads) do
    c = c + t:get("checked")
    b = b + t:get("bad")
    if first == "" then first = t:get("first_bad") end
  end
  io.write(string.format("ab-checked %d\nab-bad %d %s\n", c, b, first))
end
