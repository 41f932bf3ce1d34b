-- wrk script: POST the file named by $BODY as application/json.
-- Used by bench/run.sh for the saturation runs (wrk -s bench/post.lua), and
-- by bench/ab.lua, which adds the check of every answer.
local path = os.getenv("BODY")
if not path then
  error("bench/post.lua: set BODY to the request body file")
end
local f = assert(io.open(path, "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, */*"
