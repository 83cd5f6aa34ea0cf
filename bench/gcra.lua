-- bench/gcra.lua: GCRA as a Redis script, the way a hand-rolled Redis
-- limiter does it, for bench/run to compare throttle batch against.
-- KEYS[1]: the key; ARGV[1]: the emission interval (period / limit) and
-- ARGV[2]: the period, both in microseconds.  Returns 1 allowed, 0 refused.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then
	tat = now
end
local new = tat + interval
if new - now > period then
	return 0
end
redis.call('SET', KEYS[1], new, 'PX', math.ceil((new - now) / 1000))
return 1
