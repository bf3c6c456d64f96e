-- wrk script for bench/webhook.py: POSTs lakeFS post-commit/post-merge payloads to /webhooks/lakefs.
--
-- wrk ... -s bench/webhook.lua URL -- SECRET REPOSITORY TAG BASE_EPOCH BRANCHES
--
-- Request i of thread t writes branch "TAG-t<t>-<i mod BRANCHES>" at event_time BASE_EPOCH + i seconds with
-- commit "c-TAG-t<t>-<i>", so every branch's event_time moves forward on each write and the receiver's Redis update
-- is a real one ("recorded"; "stale" only if a request is overtaken by a later write of its branch on another
-- connection), and every commit GC counts is a new one. bench/webhook.py picks BASE_EPOCH so that the times stay
-- inside the window the receiver accepts (not in the future).
-- Each thread counts responses by HTTP status class and by the body's "status" field, and done() prints one
-- line "BENCH_JSON {...}" with those counts, wrk's own summary and latency percentiles (us).

local threads = {}

function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

function init(args)
  secret = args[1]
  repo = args[2]
  tag = args[3]
  base = tonumber(args[4])
  nbranches = tonumber(args[5])
  counter = 0
  responses = 0
  non2xx = 0
  outcomes = {}
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["X-Lakefs-Janitor-Secret"] = secret
end

local template = '{"event_type":"%s","event_time":"%s","action_name":"lakefs-janitor","hook_id":"janitor",'
  .. '"repository_id":"%s","branch_id":"%s-t%d-%d","source_ref":"%s-t%d-%d","commit_id":"c-%s-t%d-%08d",'
  .. '"commit_message":"bench","committer":"bench","commit_metadata":{"k":"v"}}'

function request()
  counter = counter + 1
  local b = counter % nbranches
  local event_type = "post-commit"
  if counter % 4 == 0 then event_type = "post-merge" end
  local event_time = os.date("!%Y-%m-%dT%H:%M:%SZ", base + counter)
  local body = string.format(template, event_type, event_time, repo, tag, tid, b, tag, tid, b, tag, tid, counter)
  return wrk.format(nil, nil, nil, body)
end

function response(status, headers, body)
  responses = responses + 1
  if status < 200 or status > 299 then non2xx = non2xx + 1 end
  local outcome = body and string.match(body, '"status":%s*"([%w_-]+)"') or "none"
  outcomes[outcome] = (outcomes[outcome] or 0) + 1
end

local function json_counts(map)
  local parts = {}
  for k, v in pairs(map) do table.insert(parts, string.format('"%s":%d', k, v)) end
  return "{" .. table.concat(parts, ",") .. "}"
end

function done(summary, latency, requests)
  local total_responses, total_non2xx, total_sent, all_outcomes, per_thread = 0, 0, 0, {}, {}
  for _, t in ipairs(threads) do
    local n, bad, sent = t:get("responses"), t:get("non2xx"), t:get("counter")
    total_responses = total_responses + n
    total_non2xx = total_non2xx + bad
    total_sent = total_sent + sent
    for k, v in pairs(t:get("outcomes")) do all_outcomes[k] = (all_outcomes[k] or 0) + v end
    table.insert(per_thread, string.format('{"tid":%d,"generated":%d,"responses":%d}', t:get("tid"), sent, n))
  end
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"duration_us":%d,"requests":%d,"bytes":%d,'
    .. '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},'
    .. '"responses":%d,"non2xx":%d,"generated":%d,"outcomes":%s,"threads":[%s],'
    .. '"latency_us":{"min":%d,"mean":%.1f,"stdev":%.1f,"max":%d,"p50":%d,"p75":%d,"p90":%d,"p99":%d,"p999":%d}}\n',
    summary.duration, summary.requests, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    total_responses, total_non2xx, total_sent, json_counts(all_outcomes), table.concat(per_thread, ","),
    latency.min, latency.mean, latency.stdev, latency.max,
    latency:percentile(50), latency:percentile(75), latency:percentile(90), latency:percentile(99),
    latency:percentile(99.9)))
end
