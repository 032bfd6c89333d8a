-- wrk script: every request gets a unique order_id (and user_id), as loadgen's
-- {seq}/{uuid} placeholders do, so the inventory ledger records one row per
-- request and the audit can compare sold units with successful responses.
--
--   wrk -t2 -c32 -d10s -s loadtest/wrk/unique_orders.lua http://127.0.0.1:8001 -- deduct
--   wrk -t2 -c32 -d10s -s loadtest/wrk/unique_orders.lua http://127.0.0.1:8000 -- orders
--
-- Script arguments (after --): mode (deduct | orders, default deduct),
-- sku (default SKU-1), guard (default: the instance's own), hold_ms (default 0).
-- Environment: WRK_RUN_ID prefixes the ids (default: start time + random) so
-- two runs against one seeded SKU never collide.
--
-- At the end it prints responses by status and by the JSON "error" code
-- (counted per thread, summed in done()).

local threads = {}
local counter = 0

-- setup() runs once per thread in the main Lua state: give each its number.
function setup(thread)
   thread:set("tid", counter)
   counter = counter + 1
   table.insert(threads, thread)
end

local mode, sku, guard, hold_ms
local prefix
local seq = 0
by_status = {}
by_error = {}

function init(args)
   mode = args[1] or "deduct"
   sku = args[2] or "SKU-1"
   guard = args[3]
   hold_ms = tonumber(args[4] or "0")
   if mode ~= "deduct" and mode ~= "orders" then
      error("mode must be deduct or orders, not " .. mode)
   end
   local run = os.getenv("WRK_RUN_ID")
   if not run then
      math.randomseed(os.time() + tid * 7919)
      run = string.format("%x%04x", os.time(), math.random(0, 0xffff))
   end
   prefix = string.format("wrk-%s-t%d-", run, tid)
   wrk.method = "POST"
   wrk.headers["Content-Type"] = "application/json"
end

function request()
   seq = seq + 1
   local id = prefix .. seq
   local body, path
   if mode == "deduct" then
      path = "/inventory/deduct"
      body = string.format('{"sku":"%s","qty":1,"order_id":"o-%s","hold_ms":%d%s}',
                           sku, id, hold_ms, guard and (',"guard":"' .. guard .. '"') or "")
   else
      path = "/orders"
      body = string.format('{"sku":"%s","qty":1,"user_id":"u-%s"%s}',
                           sku, id, guard and (',"guard":"' .. guard .. '"') or "")
   end
   return wrk.format(nil, path, nil, body)
end

function response(status, headers, body)
   by_status[status] = (by_status[status] or 0) + 1
   local code = body and body:match('"error"%s*:%s*"([%w_%.%-]+)"')
   if code then
      by_error[code] = (by_error[code] or 0) + 1
   end
end

function done(summary, latency, requests)
   local st, er = {}, {}
   for _, t in ipairs(threads) do
      for k, v in pairs(t:get("by_status")) do st[k] = (st[k] or 0) + v end
      for k, v in pairs(t:get("by_error")) do er[k] = (er[k] or 0) + v end
   end
   io.write("by status:")
   for k, v in pairs(st) do io.write(string.format(" %s: %d", k, v)) end
   io.write("\nby error:")
   for k, v in pairs(er) do io.write(string.format(" %s: %d", k, v)) end
   io.write(string.format("\nlatency ms p50 %.3f p90 %.3f p99 %.3f p99.9 %.3f max %.3f\n",
                          latency:percentile(50) / 1000, latency:percentile(90) / 1000,
                          latency:percentile(99) / 1000, latency:percentile(99.9) / 1000,
                          latency.max / 1000))
end
