/* The Lua scripts of the redis-stream guard (guard_redis_stream.c): the
 * sale (alone and for a group), its undo, the seed, and the reads of the
 * release check and the audit's snapshot. Each comment gives its keys,
 * arguments and replies. */
#include "guards/redis_stream/stream_scripts.h"

#include "guards/core/redis_reconcile.h"

#define GUARD_NAME "redis-stream"

/* Lua: an order's memory (sorder:<order_id>) is "epoch\nsku\nqty\nremaining
 * \ninstance", and with replicas_ack "\n<entry id>" more: parse_order(o)
 * gives the six (entry "" without). waiting(unacked, entry): 1 while that
 * sale still waits for its replicas (its undo may still take it back), so
 * a repeat of it can be answered neither as sold nor as new. A cart's
 * memory (cart_script) parses as its first line's epoch and SKU with qty
 * "cart": a single sale under a cart's order_id is another sale (-4). */
#define STREAM_LUA_ORDER                                                          \
    "local function parse_order(o) "                                              \
    "  local cep, csku = string.match(o, '^cart\\n(.-)\\n(.-)\\n') "                \
    "  if cep then return cep, csku, 'cart', '', '', '' end "                     \
    "  local oep, osku, oqty, orem, oinst = "                                     \
    "    string.match(o, '^(.-)\\n(.-)\\n(.-)\\n(.-)\\n(.*)$') "                  \
    "  local oent = '' "                                                          \
    "  if oinst then "                                                            \
    "    local a, b = string.match(oinst, '^(.-)\\n(.*)$') "                      \
    "    if a then oinst, oent = a, b end "                                       \
    "  end "                                                                      \
    "  return oep, osku, oqty, orem, oinst, oent "                                \
    "end "                                                                        \
    "local function waiting(unacked, ent) "                                       \
    "  if ent == '' then return false end "                                       \
    "  local u = redis.call('ZSCORE', unacked, ent) "                             \
    "  if not u then return false end "                                           \
    "  local t = redis.call('TIME') "                                             \
    "  return tonumber(u) > tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) " \
    "end "

/* Lua: the SKU's purchase limit as the seed mirrored it (stream_limit.h;
 * slimit:{sku}, the sale's own hash slot): a limited SKU is refused by
 * `refuse` before anything is read or written. In the script the sale
 * runs anyway: no Redis round trip of its own. */
#define STREAM_LUA_LIMIT(refuse)                                                  \
    "local lim = redis.call('GET', 'slimit:{' .. ARGV[1] .. '}') "                 \
    "if lim and tonumber(lim) > 0 then " refuse " end "

/* KEYS[1] stock, [2] epoch, [3] order, [4] stream, [5] pending entries,
 * [6] pending units, [7] unacked entries; ARGV[1] sku, [2] order_id, [3]
 * qty, [4] instance, [5] order ttl ms, [6] ms the sale may wait for its
 * replicas (0: replicas_ack not asked; else flushers defer the entry that
 * long, until the sale confirms or takes it back). Returns {left, entry
 * id} sold; {-1, stock} not enough; {-2} the stock is missing (Redis
 * lost it, or it is of an older generation: dropped, see RREC_LUA_GEN);
 * {-3, remaining, instance} a repeat of the order's first sale; {-4,
 * sku, qty} the order_id names another sale; {-5} a repeat while the
 * first sale still waits for its replicas (it may yet be undone); {-6,
 * limit} the SKU has a purchase limit (STREAM_LUA_LIMIT).
 * A remembered order of an older epoch (its SKU was reseeded since, which
 * wiped its ledger) does not count, as in MySQL. */
struct rconn_script stream_sale_script = RCONN_SCRIPT(
    RREC_LUA_GEN
    STREAM_LUA_ORDER
    "local q = tonumber(ARGV[3]) "
    STREAM_LUA_LIMIT("return {-6, lim}")
    "local ep = redis.call('GET', KEYS[2]) or '' "
    "local o = redis.call('GET', KEYS[3]) "
    "if o then "
    "  local oep, osku, oqty, orem, oinst, oent = parse_order(o) "
    "  local cur = ep "
    "  if osku and osku ~= ARGV[1] then "
    "    cur = redis.call('GET', 'sstock:{' .. osku .. '}:epoch') or '' "
    "  end "
    "  if osku and oep == cur then "
    "    if osku ~= ARGV[1] or tonumber(oqty) ~= q then return {-4, osku, oqty} end "
    "    if waiting(KEYS[7], oent) then return {-5} end "
    "    return {-3, orem, oinst} "
    "  end "
    "end "
    "local v = redis.call('GET', KEYS[1]) "
    "if not v then return {-2} end "
    "if not in_gen(ep) then redis.call('DEL', KEYS[1]) return {-2} end "
    "if tonumber(v) < q then return {-1, v} end "
    "local left = redis.call('DECRBY', KEYS[1], q) "
    "local t = redis.call('TIME') "
    "local ms = string.format('%.0f', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)) "
    "local id = redis.call('XADD', KEYS[4], '*', 's', ARGV[1], 'o', ARGV[2], 'q', ARGV[3], "
    "  'r', left, 'i', ARGV[4], 'g', '" GUARD_NAME "', 't', ms) "
    "local ent = '' "
    "if tonumber(ARGV[6]) > 0 then ent = '\\n' .. id end "
    "redis.call('SET', KEYS[3], ep .. '\\n' .. ARGV[1] .. '\\n' .. ARGV[3] .. '\\n' .. left "
    "  .. '\\n' .. ARGV[4] .. ent, 'PX', ARGV[5]) "
    "redis.call('HINCRBY', KEYS[5], ARGV[1], 1) "
    "redis.call('HINCRBY', KEYS[6], ARGV[1], q) "
    "if tonumber(ARGV[6]) > 0 then "
    "  redis.call('ZADD', KEYS[7], tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) "
    "    + tonumber(ARGV[6]), id) "
    "end "
    "return {left, id}");

/* The sale script for a group of sales of one SKU (coalesce.h): the same
 * steps as sale_script for each sale in turn, so a group is exactly its
 * sales run back to back; what every sale would repeat (the epoch, the
 * stock read and the generation check with its INFO, TIME, the decrement,
 * the pending counts) is paid once: the stock is read once, followed in
 * the script, and decremented by the group's units at the end (nothing
 * else runs in between); the order keys are read with one MGET. Without
 * replicas_ack (no sale waits: every hold is 0) the group's sales travel
 * to the flushers as ONE stream entry ('s' sku, 'i' instance, 'g' guard,
 * 't' ms, then 'o' order_id, 'q' qty, 'r' remaining per sale, in order):
 * one XADD, and one XACK and XDEL in the flusher, per group. With
 * replicas_ack each sale has its own entry (its undo takes back exactly
 * that entry). KEYS[1] stock, [2] epoch, [3] stream, [4] pending entries
 * (counted in sales), [5] pending units, [6] unacked entries, [7..6+n] the
 * sales' order keys; ARGV[1] sku, [2] instance, [3] order ttl ms, then
 * (order_id, qty, ms the sale may wait for its replicas) per sale
 * (sale_script's ARGV[6]). Returns one reply per sale, each as
 * sale_script's (sales of one entry share its id; a limited SKU: {-6,
 * limit} for all, nothing written). */
struct rconn_script stream_group_script = RCONN_SCRIPT(
    RREC_LUA_GEN
    STREAM_LUA_ORDER
    "local n = (#ARGV - 3) / 3 "
    STREAM_LUA_LIMIT("local all = {} for i = 1, n do all[i] = {-6, lim} end return all")
    "local ep = redis.call('GET', KEYS[2]) or '' "
    "local st, cur = 0, 0 "
    "local t = redis.call('TIME') "
    "local ms = string.format('%.0f', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)) "
    "local out, np, nu = {}, 0, 0 "
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) "
    "local ords = redis.call('MGET', unpack(KEYS, 7, 6 + n)) "
    "local multi = true "
    "for i = 1, n do if tonumber(ARGV[3 * i + 3]) > 0 then multi = false end end "
    "local f, sold, mine = {}, {}, {} "
    "for i = 1, n do "
    "  local oid, qs, hold = ARGV[3 * i + 1], ARGV[3 * i + 2], tonumber(ARGV[3 * i + 3]) "
    "  local q = tonumber(qs) "
    "  local okey = KEYS[6 + i] "
    "  local res = nil "
    "  local o = ords[i] "
    "  if o then "
    "    local oep, osku, oqty, orem, oinst, oent = parse_order(o) "
    "    local oc = ep "
    "    if osku and osku ~= ARGV[1] then "
    "      oc = redis.call('GET', 'sstock:{' .. osku .. '}:epoch') or '' "
    "    end "
    "    if osku and oep == oc then "
    "      if osku ~= ARGV[1] or tonumber(oqty) ~= q then res = {-4, osku, oqty} "
    "      elseif waiting(KEYS[6], oent) then res = {-5} "
    "      else res = {-3, orem, oinst} end "
    "    end "
    "  end "
    /* a repeat inside this very group: its first sale is not in ords */
    "  if not res and sold[oid] then "
    "    local j = sold[oid] "
    "    if tonumber(ARGV[3 * j + 2]) ~= q then res = {-4, ARGV[1], ARGV[3 * j + 2]} "
    "    elseif tonumber(ARGV[3 * j + 3]) > 0 then res = {-5} "
    "    else res = {-3, string.format('%d', out[j][1]), ARGV[2]} end "
    "  end "
    "  if not res then "
    "    if st == 0 then "
    "      local v = redis.call('GET', KEYS[1]) "
    "      if not v then st = 2 "
    "      elseif not in_gen(ep) then redis.call('DEL', KEYS[1]) st = 2 "
    "      else st = 1 cur = tonumber(v) end "
    "    end "
    "    if st == 2 then res = {-2} "
    "    elseif cur < q then res = {-1, string.format('%d', cur)} "
    "    else "
    "      cur = cur - q "
    "      nu = nu + q "
    "      np = np + 1 "
    "      local rs = string.format('%d', cur) "
    "      local ent = '' "
    "      if multi then "
    "        f[#f + 1] = 'o' f[#f + 1] = oid f[#f + 1] = 'q' f[#f + 1] = qs "
    "        f[#f + 1] = 'r' f[#f + 1] = rs "
    "        res = {cur, ''} "
    "        mine[#mine + 1] = i "
    "      else "
    "        local id = redis.call('XADD', KEYS[3], '*', 's', ARGV[1], 'o', oid, 'q', qs, "
    "          'r', rs, 'i', ARGV[2], 'g', '" GUARD_NAME "', 't', ms) "
    "        if hold > 0 then redis.call('ZADD', KEYS[6], now + hold, id) ent = '\\n' .. id end "
    "        res = {cur, id} "
    "      end "
    "      sold[oid] = i "
    "      redis.call('SET', okey, ep .. '\\n' .. ARGV[1] .. '\\n' .. qs .. '\\n' .. rs "
    "        .. '\\n' .. ARGV[2] .. ent, 'PX', ARGV[3]) "
    "    end "
    "  end "
    "  out[i] = res "
    "end "
    "if np > 0 then "
    "  if multi then "
    "    local id = redis.call('XADD', KEYS[3], '*', 's', ARGV[1], 'i', ARGV[2], "
    "      'g', '" GUARD_NAME "', 't', ms, unpack(f)) "
    "    for _, i in ipairs(mine) do out[i][2] = id end "
    "  end "
    "  redis.call('DECRBY', KEYS[1], nu) "
    "  redis.call('HINCRBY', KEYS[4], ARGV[1], np) "
    "  redis.call('HINCRBY', KEYS[5], ARGV[1], nu) "
    "end "
    "return out");

/* A cart, every line decided at once. KEYS[1] order, [2] stream, [3]
 * pending entries, [4] pending units, then per SKU k (1..nt, the plan's
 * sorted order) [3 + 2k] its stock and [4 + 2k] its epoch; ARGV[1]
 * order_id, [2] instance, [3] order ttl ms, [4] nt, then per SKU (sku,
 * the sum of its lines) at [3 + 2k], [4 + 2k], then per line (its SKU's
 * k, qty) in the cart's order. Every SKU is checked before anything is
 * taken; then all are decremented or none. Replies: {0, entry id,
 * remaining per line} sold; {-1, (sku, requested, available) per short
 * SKU} refused; {-2, sku} that SKU's stock is missing (lost, or of an
 * older generation); {-3, instance, remaining per line} a repeat of the
 * order's first cart; {-4, lines} the order_id names another sale. One
 * stream entry carries every line ('o', 'k' sku, 'l' line, 'q', 'r' per
 * line), so a flusher writes them in one transaction; the order is
 * remembered once: "cart\n<first line's epoch>\n<its sku>\n<instance>\n"
 * then "sku\nqty\nremaining" per line. The pending counts go up per SKU
 * by that SKU's lines: the audit of each SKU counts only its own. */
struct rconn_script stream_cart_script = RCONN_SCRIPT(
    RREC_LUA_GEN
    "local oid, inst, ttl, nt = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]) "
    "local nl = (#ARGV - 4 - 2 * nt) / 2 "
    "local lk, lq = {}, {} "
    "for i = 1, nl do lk[i] = tonumber(ARGV[3 + 2 * nt + 2 * i]) lq[i] = ARGV[4 + 2 * nt + 2 * i] end "
    "local o = redis.call('GET', KEYS[1]) "
    "if o then "
    "  local cep, csku, cinst, body = string.match(o, '^cart\\n(.-)\\n(.-)\\n(.-)\\n(.*)$') "
    "  if cep then "
    "    if cep == (redis.call('GET', 'sstock:{' .. csku .. '}:epoch') or '') then "
    "      local f = {} "
    "      for x in string.gmatch(body, '[^\\n]+') do f[#f + 1] = x end "
    "      local same = #f == 3 * nl "
    "      for i = 1, nl do "
    "        if same and (f[3 * i - 2] ~= ARGV[3 + 2 * lk[i]] or f[3 * i - 1] ~= lq[i]) then "
    "          same = false end "
    "      end "
    "      if not same then return {-4, math.floor(#f / 3)} end "
    "      local out = {-3, cinst} "
    "      for i = 1, nl do out[#out + 1] = f[3 * i] end "
    "      return out "
    "    end "
    "  else "
    "    local oep, osku = string.match(o, '^(.-)\\n(.-)\\n') "
    "    if osku and oep == (redis.call('GET', 'sstock:{' .. osku .. '}:epoch') or '') then "
    "      return {-4, 1} end "
    "  end "
    "end "
    "local gen, ep, cur = lab_gen(), {}, {} "
    "for k = 1, nt do "
    "  ep[k] = redis.call('GET', KEYS[4 + 2 * k]) or '' "
    "  local v = redis.call('GET', KEYS[3 + 2 * k]) "
    "  if not v then return {-2, ARGV[3 + 2 * k]} end "
    "  if (string.match(ep[k], '@(%w*)$') or '') ~= gen then "
    "    redis.call('DEL', KEYS[3 + 2 * k]) return {-2, ARGV[3 + 2 * k]} end "
    "  cur[k] = tonumber(v) "
    "end "
    "local short = {-1} "
    "for k = 1, nt do "
    "  if cur[k] < tonumber(ARGV[4 + 2 * k]) then "
    "    short[#short + 1] = ARGV[3 + 2 * k] short[#short + 1] = ARGV[4 + 2 * k] "
    "    short[#short + 1] = string.format('%d', cur[k]) "
    "  end "
    "end "
    "if #short > 1 then return short end "
    "local t = redis.call('TIME') "
    "local ms = string.format('%.0f', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)) "
    "local f, mem, rem = {}, {}, {} "
    "for i = 1, nl do "
    "  local k = lk[i] "
    "  local sku = ARGV[3 + 2 * k] "
    "  cur[k] = cur[k] - tonumber(lq[i]) "
    "  rem[i] = string.format('%d', cur[k]) "
    "  f[#f + 1] = 'o' f[#f + 1] = oid f[#f + 1] = 'k' f[#f + 1] = sku "
    "  f[#f + 1] = 'l' f[#f + 1] = tostring(i - 1) "
    "  f[#f + 1] = 'q' f[#f + 1] = lq[i] f[#f + 1] = 'r' f[#f + 1] = rem[i] "
    "  mem[#mem + 1] = sku .. '\\n' .. lq[i] .. '\\n' .. rem[i] "
    "  redis.call('HINCRBY', KEYS[3], sku, 1) "
    "  redis.call('HINCRBY', KEYS[4], sku, lq[i]) "
    "end "
    "for k = 1, nt do redis.call('DECRBY', KEYS[3 + 2 * k], ARGV[4 + 2 * k]) end "
    "local id = redis.call('XADD', KEYS[2], '*', 's', ARGV[3 + 2 * lk[1]], 'i', inst, "
    "  'g', '" GUARD_NAME "', 't', ms, unpack(f)) "
    "redis.call('SET', KEYS[1], 'cart\\n' .. ep[lk[1]] .. '\\n' .. ARGV[3 + 2 * lk[1]] .. '\\n' "
    "  .. inst .. '\\n' .. table.concat(mem, '\\n'), 'PX', ttl) "
    "local out = {0, id} "
    "for i = 1, nl do out[#out + 1] = rem[i] end "
    "return out");

/* KEYS[1] stock, [2] order, [3] stream, [4] pending entries, [5] pending
 * units, [6] unacked entries, [7] cancelled entries; ARGV[1] entry id, [2]
 * sku, [3] qty, [4] group. Takes a sale back (replicas_ack not met): 1
 * undone; 0 it stands (confirmed, or its wait had run out: flushers may
 * have written it). While its wait runs no flusher commits it
 * (stream_flusher.c mark_script defers it, atomically with this): read by
 * no flusher yet, it is deleted; read by one, listed as cancelled, and
 * that flusher drops it. Once the wait ran out (Redis TIME, the clock the
 * mark reads too) a flusher may have marked it for its COMMIT: then it is
 * never taken back, however late the undo comes. */
struct rconn_script stream_undo_script = RCONN_SCRIPT(
    "local u = redis.call('ZSCORE', KEYS[6], ARGV[1]) "
    "if not u then return 0 end "
    "local t = redis.call('TIME') "
    "if tonumber(u) <= tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) then "
    "  return 0 end "
    "redis.call('ZREM', KEYS[6], ARGV[1]) "
    "if #redis.call('XRANGE', KEYS[3], ARGV[1], ARGV[1]) == 0 then return 0 end "
    "local ok, p = pcall(redis.call, 'XPENDING', KEYS[3], ARGV[4], ARGV[1], ARGV[1], 1) "
    "if ok and #p > 0 then "
    "  redis.call('SADD', KEYS[7], ARGV[1]) "
    "else "
    "  redis.call('XDEL', KEYS[3], ARGV[1]) "
    "end "
    "if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('INCRBY', KEYS[1], ARGV[3]) end "
    "if redis.call('HINCRBY', KEYS[4], ARGV[2], -1) <= 0 then "
    "  redis.call('HDEL', KEYS[4], ARGV[2]) end "
    "if redis.call('HINCRBY', KEYS[5], ARGV[2], -tonumber(ARGV[3])) <= 0 then "
    "  redis.call('HDEL', KEYS[5], ARGV[2]) end "
    "redis.call('DEL', KEYS[2]) "
    "return 1");

/* KEYS[1] stock, [2] epoch, [3] marker, [4] pending entries; ARGV[1] sku,
 * [2] stock, [3] a random token. Refuses (returns the count) while sales of
 * the SKU wait for MySQL: a reseed wipes the SKU's ledger, and a sale
 * flushed after it would land in the new stock. */
struct rconn_script stream_seed_script = RCONN_SCRIPT(
    RREC_LUA_GEN
    "local p = tonumber(redis.call('HGET', KEYS[4], ARGV[1]) or '0') "
    "if p > 0 then return p end "
    "local t = redis.call('TIME') "
    "redis.call('SET', KEYS[1], ARGV[2]) "
    "redis.call('SET', KEYS[2], 's' .. t[1] .. string.format('%06d', tonumber(t[2])) "
    "  .. '-' .. ARGV[3] .. '@' .. lab_gen()) "
    "redis.call('DEL', KEYS[3]) "
    "return 0");

/* KEYS[1] order, [2] pending entries; 1 when the order is a sale of its
 * SKU's current epoch and that SKU still has sales queued (a cart: any of
 * its lines' SKUs), else 0. (Which
 * entry is the order's would need a scan of the stream; while any sale of
 * the SKU is queued a release waits, which also covers it.) */
struct rconn_script stream_queued_script = RCONN_SCRIPT(
    "local o = redis.call('GET', KEYS[1]) "
    "if not o then return 0 end "
    "local cep, csku, body = string.match(o, '^cart\\n(.-)\\n(.-)\\n.-\\n(.*)$') "
    "if cep then "
    "  if (redis.call('GET', 'sstock:{' .. csku .. '}:epoch') or '') ~= cep then return 0 end "
    "  local f = {} "
    "  for x in string.gmatch(body, '[^\\n]+') do f[#f + 1] = x end "
    "  for i = 1, #f, 3 do "
    "    if tonumber(redis.call('HGET', KEYS[2], f[i]) or '0') > 0 then return 1 end "
    "  end "
    "  return 0 "
    "end "
    "local oep, osku = string.match(o, '^(.-)\\n(.-)\\n') "
    "if not osku then return 0 end "
    "if (redis.call('GET', 'sstock:{' .. osku .. '}:epoch') or '') ~= oep then return 0 end "
    "if tonumber(redis.call('HGET', KEYS[2], osku) or '0') > 0 then return 1 end "
    "return 0");

/* KEYS[1] stock, [2] pending entries, [3] pending units, [4] flushing
 * marks, [5] flush counter, [6] units held (stream_holds.h), [7] the SKU's
 * holds by deadline; ARGV[1] sku. {has stock, stock, entries, units,
 * flush counter, flushers marked now, held, held past the deadline (the
 * first 1000 due holds' units)}: one consistent read. */
struct rconn_script stream_side_script = RCONN_SCRIPT(
    "local v = redis.call('GET', KEYS[1]) "
    "local t = redis.call('TIME') "
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) "
    "local marks = redis.call('HGETALL', KEYS[4]) "
    "local busy = 0 "
    "for i = 1, #marks, 2 do "
    "  if tonumber(marks[i + 1]) > now then busy = busy + 1 end "
    "end "
    "local due = 0 "
    "for _, oid in ipairs(redis.call('ZRANGEBYSCORE', KEYS[7], '-inf', now, 'LIMIT', 0, 1000)) do "
    "  due = due + tonumber(redis.call('HGET', 'shold:' .. oid, 'q') or '0') "
    "end "
    "return {v and 1 or 0, tonumber(v or '0'), "
    "  tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0'), "
    "  tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or '0'), "
    "  tonumber(redis.call('GET', KEYS[5]) or '0'), busy, "
    "  tonumber(redis.call('GET', KEYS[6]) or '0'), due}");

/* KEYS[1] flushing marks, [2] the hold; ARGV[1] token, [2] ms. Sets the
 * hold (1) unless a flusher is marked right now (0): once set, no flusher
 * marks, so none commits, until it goes. */
struct rconn_script stream_hold_script = RCONN_SCRIPT(
    "local t = redis.call('TIME') "
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) "
    "local marks = redis.call('HGETALL', KEYS[1]) "
    "for i = 1, #marks, 2 do "
    "  if tonumber(marks[i + 1]) > now then return 0 end "
    "end "
    "redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2]) "
    "return 1");

/* KEYS[1] the hold; ARGV[1] token: deleted only when still ours. */
struct rconn_script stream_unhold_script = RCONN_SCRIPT(
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end "
    "return 0");
