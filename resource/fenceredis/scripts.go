package fenceredis

import "github.com/redis/go-redis/v9"

// The scripts are constant text: user data reaches them only as KEYS and
// ARGV, never spliced into the Lua. Tokens travel as canonical decimal
// text (no leading zeros) and are compared as text (length first), since
// Lua's numbers are doubles and cannot hold every 64-bit token.
//
// A Redis script is atomic (nothing else runs meanwhile) but not
// transactional: a command that fails in the middle leaves the earlier
// ones applied. Redis checks a script's commands against the user's ACL
// only when the script reaches them, so a user allowed EVAL but not RPUSH
// would see the writes before an RPUSH land and the RPUSH fail. So every
// script checks everything that could make a write fail (the fence's
// format, the types of the keys written and, on Redis 7, each write's
// ACL rights with redis.acl_check_cmd) before it writes anything, and
// the Go side refuses what the checks do not cover (argument counts,
// TTLs, the number of arguments Lua can unpack). Out of memory refuses
// the first write only (a script that has written is let finish). Its
// first write is the token: should a write after it fail all the same
// (Redis 6 has no acl_check_cmd; a failure nobody foresaw), every write
// that landed is covered by the new token, so a holder of an older one
// is still refused, and the script stops there and says how many landed
// (Do returns a *PartialError, matching fence.ErrUncertain). Hence an
// error reply of a script always means nothing was applied.
const tokenLua = `
local function less(a, b)
	if #a ~= #b then return #a < #b end
	return a < b
end
local function token(v) -- 1 to 2^63-1 (fence.MaxToken), canonical
	return type(v) == 'string' and string.match(v, '^[1-9][0-9]*$') ~= nil and not less('9223372036854775807', v)
end
`

// doScript: KEYS[1] the fence key, KEYS[2..n+1] the keys of the n writes;
// ARGV[1] the token, ARGV[2] n, then per write its command, its argument
// count and its arguments. It answers {1, previous token or ""} when it
// applied the writes and the token, {0, highest} when the token is stale,
// {2, previous token or "", m, error} when the token and the first m
// writes landed and write m+1 failed (it stops there).
var doScript = redis.NewScript(tokenLua + `
local t = redis.call('TYPE', KEYS[1]).ok
if t ~= 'none' and t ~= 'string' then
	return redis.error_reply('ERR fenceredis: not a fence: the fence key holds a ' .. t)
end
local high = redis.call('GET', KEYS[1])
if high and not token(high) then
	return redis.error_reply('ERR fenceredis: not a fence: the fence key holds no token')
end
if high and less(ARGV[1], high) then
	return {0, high}
end
local kinds = {SET = '', DEL = '', HSET = 'hash', HDEL = 'hash', RPUSH = 'list', SADD = 'set', SREM = 'set'}
local n, i, plan = tonumber(ARGV[2]), 3, {}
for w = 1, n do
	local cmd, argc, key = ARGV[i], tonumber(ARGV[i + 1]), KEYS[w + 1]
	local want = kinds[cmd]
	if want == nil or argc == nil or key == nil or key == KEYS[1] then
		return redis.error_reply('ERR fenceredis: bad write ' .. w)
	end
	if (cmd == 'SET' and argc ~= 1 and not (argc == 3 and ARGV[i + 3] == 'PX')) or (cmd == 'DEL' and argc ~= 0) then
		return redis.error_reply('ERR fenceredis: bad write ' .. w)
	end
	if want ~= '' then
		local kt = redis.call('TYPE', key).ok
		if kt ~= 'none' and kt ~= want then
			return redis.error_reply('WRONGTYPE fenceredis: write ' .. w .. ' is a ' .. cmd .. ' of a key holding a ' .. kt)
		end
	end
	plan[w] = {cmd, key, i + 2, i + 1 + argc}
	i = i + 2 + argc
end
if i - 1 ~= #ARGV or n + 1 ~= #KEYS then
	return redis.error_reply('ERR fenceredis: bad arguments')
end
if redis.acl_check_cmd then
	if not redis.acl_check_cmd('SET', KEYS[1], ARGV[1]) then
		return redis.error_reply('NOPERM fenceredis: SET of the fence key')
	end
	for w = 1, n do
		local p = plan[w]
		if not redis.acl_check_cmd(p[1], p[2], unpack(ARGV, p[3], p[4])) then
			return redis.error_reply('NOPERM fenceredis: write ' .. (w - 1) .. ', ' .. p[1])
		end
	end
end
redis.call('SET', KEYS[1], ARGV[1])
for w = 1, n do
	local p = plan[w]
	local r = redis.pcall(p[1], p[2], unpack(ARGV, p[3], p[4]))
	if type(r) == 'table' and r.err then
		return {2, high or '', w - 1, r.err}
	end
end
return {1, high or ''}
`)

// floorScript: KEYS[1] the fence key, ARGV[1] the floor. It answers the
// token in effect afterwards.
var floorScript = redis.NewScript(tokenLua + `
local t = redis.call('TYPE', KEYS[1]).ok
if t ~= 'none' and t ~= 'string' then
	return redis.error_reply('ERR fenceredis: not a fence: the fence key holds a ' .. t)
end
local high = redis.call('GET', KEYS[1])
if high and not token(high) then
	return redis.error_reply('ERR fenceredis: not a fence: the fence key holds no token')
end
if high and not less(high, ARGV[1]) then
	return high
end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
`)

// registerScript: KEYS[1] the register (a hash: token, value, version);
// ARGV[1] the token, ARGV[2] the value, or nothing for a floor (the value
// is kept, and a token that is not higher changes nothing). It answers
// {1, previous token or "", previous value, previous version} when it
// wrote, {0, token, value, version} otherwise.
var registerScript = redis.NewScript(tokenLua + `
local t = redis.call('TYPE', KEYS[1]).ok
if t ~= 'none' and t ~= 'hash' then
	return redis.error_reply('ERR fenceredis: not a fence: the register key holds a ' .. t)
end
local cur = redis.call('HMGET', KEYS[1], 'token', 'value', 'version')
local high, val, ver = cur[1], cur[2] or '', cur[3] or '0'
if t == 'hash' and (not token(high) or not string.match(ver, '^[0-9]+$')) then
	return redis.error_reply('ERR fenceredis: not a fence: the register key is another hash')
end
local floor = #ARGV == 1
if high and (less(ARGV[1], high) or (floor and ARGV[1] == high)) then
	return {0, high, val, ver}
end
local value = ARGV[2]
if floor then value = val end
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'value', value, 'version', tostring(tonumber(ver) + 1))
return {1, high or '', val, ver}
`)
