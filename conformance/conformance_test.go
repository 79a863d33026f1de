package conformance_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/lua"
)

func TestMain(m *testing.M) { valkeytest.Main(m) }

// setup loads the script files and the vectors, and checks that the files are the bundle
// compiled into package lua, byte for byte, as manifest.sha1 pins it.
func setup(t *testing.T) (bundle, []*vector) {
	t.Helper()
	b, err := loadBundle()
	require.NoError(t, err)
	vs, err := loadVectors()
	require.NoError(t, err)
	require.NotEmpty(t, vs)
	require.Len(t, b, len(lua.All()))
	for _, s := range lua.All() {
		require.NotNil(t, b[s.Name], s.Name)
		require.Equal(t, s.SHA1, b[s.Name].sha, "%s.lua is the compiled script", s.Name)
	}
	manifest, err := os.ReadFile(filepath.Join("..", "lua", "manifest.sha1"))
	require.NoError(t, err)
	for _, line := range strings.Split(strings.TrimSpace(string(manifest)), "\n") {
		sha, file, _ := strings.Cut(line, "  ")
		require.Equal(t, sha, b[strings.TrimSuffix(file, ".lua")].sha, file)
	}
	return b, vs
}

func targets(t *testing.T) []*target {
	return []*target{
		{name: "standalone", client: valkeytest.Shared(t).Client(t)},
		{name: "cluster", client: valkeytest.SharedCluster(t).Client(t), cluster: true},
	}
}

// replayAll replays every vector on tg, in parallel, and merges what they saw.
func replayAll(ctx context.Context, tg *target, b bundle, vs []*vector) (map[string]*result, error) {
	if err := tg.load(ctx, b); err != nil {
		return nil, err
	}
	out := map[string]*result{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, v := range vs {
		wg.Go(func() {
			res := replay(ctx, tg, b, v)
			mu.Lock()
			out[v.file] = res
			mu.Unlock()
		})
	}
	wg.Wait()
	return out, nil
}

// TestVectors replays every vector on a standalone server and on the loopback cluster, through
// raw EVALSHA only; then every script must have been called with success and must have
// answered every error code its header declares.
func TestVectors(t *testing.T) {
	t.Parallel()
	b, vs := setup(t)
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			results, err := replayAll(context.Background(), tg, b, vs)
			require.NoError(t, err)
			files := make([]string, 0, len(results))
			for f := range results {
				files = append(files, f)
			}
			sort.Strings(files)
			codes, called := map[string]map[string]bool{}, map[string]bool{}
			derived := 0
			for _, f := range files {
				derived += results[f].derived
				for _, msg := range results[f].fails {
					t.Error(msg)
				}
				for s, cs := range results[f].codes {
					if codes[s] == nil {
						codes[s] = map[string]bool{}
					}
					for c := range cs {
						codes[s][c] = true
					}
				}
				for s := range results[f].called {
					called[s] = true
				}
			}
			t.Logf("%d vectors, %d refusals derived from their successful calls", len(files), derived)
			for _, s := range lua.All() {
				if !called[s.Name] {
					t.Errorf("no vector calls %s with success: add its vectors", s.Name)
				}
				for _, e := range s.Header.Errors {
					if !codes[s.Name][e.Name] {
						t.Errorf("no vector makes %s answer %s", s.Name, e.Name)
					}
				}
			}
		})
	}
}

// TestBadInputs replays the vector of bad inputs and prints its table: the class of input,
// the script, the reply, and the keys under the tag before and after (SCAN; every value is
// compared too).
func TestBadInputs(t *testing.T) {
	t.Parallel()
	b, vs := setup(t)
	var v *vector
	for _, x := range vs {
		if x.file == "bad_inputs.json" {
			v = x
		}
	}
	require.NotNil(t, v)
	tg := targets(t)[0]
	require.NoError(t, tg.load(context.Background(), b))
	res := replay(context.Background(), tg, b, v)
	for _, msg := range res.fails {
		t.Error(msg)
	}
	require.NotEmpty(t, res.refused)
	var table strings.Builder
	fmt.Fprintf(&table, "\n| bad input | script | reply | keys before -> after | unchanged |\n|---|---|---|---|---|\n")
	for _, r := range res.refused {
		require.True(t, r.same, r.class)
		require.Regexp(t, `^(EMQ|ECC)(KEYS|ARGS|ARG) `, r.reply, r.class) // refused by a KEYS or an ARGS check
		fmt.Fprintf(&table, "| %s | %s | `%s` | %d -> %d | %v |\n", r.class, r.call, strings.ReplaceAll(r.reply, "|", "\\|"), r.before, r.after, r.same)
	}
	t.Log(table.String())
}

// TestMutatedScriptsFail proves the vectors can fail: each mutation removes one check from one
// script, the mutated copy is loaded under its own SHA1, and replaying the vectors that call
// that script against it must report at least one failure. A vector that never calls the
// script replays exactly as it does in TestVectors, so it is not replayed again.
func TestMutatedScriptsFail(t *testing.T) {
	t.Parallel()
	b, vs := setup(t)
	tg := targets(t)[0]
	for _, m := range []struct{ name, script, old, new string }{
		{"complete without its token check", "complete",
			"if row[2] ~= token then return redis.error_reply('EMQSTALE token mismatch') end\n", ""},
		{"cache_fill without its key check", "cache_fill",
			"if #KEYS ~= 1 or not tag or #name > 64 or shard ~= '' and not (shard == '#0' or string.match(shard, '^#[1-9]%d?%d?$') and tonumber(string.sub(shard, 2)) < 256) or #id > 512 or string.find(id, '[%z\\1-\\31\\127]') then",
			"if #KEYS ~= 1 then"},
		{"cache_set reading px with tonumber", "cache_set",
			"if #px > 15 or not string.match(px, '^[0-9]+$') or tonumber(px) < 1 then",
			"if not tonumber(px) then"},
		{"cache_set without its token charset", "cache_set",
			"if #token ~= 16 or string.find(token, '[^0-9A-Za-z]') then", "if #token ~= 16 then"},
		{"cache_flush resuming another server's cursor", "cache_flush",
			"if from and from ~= server then cursor = '0' end", ""},
		{"cache_invalidate writing a ring field without its seq", "cache_invalidate",
			"  redis.call('HSET', KEYS[1], 'last', token, 'r' .. (seq % 64), sseq .. ':' .. token)",
			"  redis.call('HSET', KEYS[1], 'last', token, 'r' .. (seq % 64), token)"},
		{"enqueue without the marker of an earlier schedule head", "enqueue",
			"local marker = (woke and '1') or (scheduled and earlier and 's')", "local marker = woke and '1'"},
		{"periodic_fire without its fence", "periodic_fire",
			"if row[3] == '1' or tick <= last then return 0 end", "if row[3] == '1' then return 0 end"},
		{"workers_read counting expired snapshots", "workers_read",
			"if exp and exp >= now then", "if exp then"},
		{"cache_stats_report pruning nothing", "cache_stats_report",
			"if sample[i] ~= id and (not exp or exp < now) then", "if false then"},
		{"claim leasing from the caller's clock", "claim",
			"local deadline = now + lease", "local deadline = lease"},
		{"completeclaim without its token check", "completeclaim",
			"    elseif row[2] ~= token then\n      reason = 'EMQSTALE token mismatch'\n", ""},
		{"completeclaim claiming on a paused queue", "completeclaim",
			"if paused then return {#ok, refused, 1, {}} end", ""},
		{"complete leaving the failure history behind", "complete",
			"if token ~= '1' then redis.pcall('DEL', base .. 'errors:' .. id) end\n", ""},
		{"fail recording the caller's text for a cancelled job", "fail",
			"if cancelled then text = 'cancelled' end\n", ""},
		{"extend renewing a cancelled job", "extend",
			"if row[1] ~= 'active' and row[1] ~= 'cancelling' then", "if row[1] ~= 'active' and row[1] ~= 'cancelling' and false then"},
		{"browse listing the cursor's own job again", "browse",
			"if before(m, after) or (past and m == after) then", "if before(m, after) then"},
		{"browse taking a cursor score past 2^53 - 1", "browse",
			"uint(ARGV[4], 9007199254740991, 16)", "uint(ARGV[4], math.huge, 16)"},
		{"reap forgetting the lease that expired", "reap",
			"if type(pushed) == 'number' then redis.call('LTRIM', ek, -10, -1) end", "redis.pcall('DEL', ek)"},
		{"completeclaim leaving the failure histories behind", "completeclaim",
			"  redis.pcall('DEL', base .. 'errors:' .. id)\n", ""},
		{"completeclaim refusing a cancelled job", "completeclaim",
			"elseif row[1] ~= 'active' and row[1] ~= 'cancelling' then", "elseif row[1] ~= 'active' then"},
		{"laneenqueue taking a flow waiting it cannot move", "laneenqueue",
			"if fv[1] and not (#fv[1] <= 18 and string.match(fv[1], '^%-?[0-9]+$')) or fv[2] and (not vt or vt ~= vt) then", "if false then"},
		{"cache_set taking a seq it cannot bump", "cache_set",
			"if rec[3] and not (rec[3] == '0' or #rec[3] <= 18 and string.match(rec[3], '^%-?[1-9][0-9]*$')) then", "if false then"},
		{"completemany without its token check", "completemany",
			"    elseif row[2] ~= token then\n      reason = 'EMQSTALE token mismatch'\n", ""},
		{"extend without its token check", "extend",
			"  elseif row[2] ~= token then\n    reason = 'EMQSTALE token mismatch'\n", ""},
		{"fail without its token check", "fail",
			"if row[2] ~= token then return redis.error_reply('EMQSTALE token mismatch') end\n", ""},
		{"snooze without its token check", "snooze",
			"if row[2] ~= token then return redis.error_reply('EMQSTALE token mismatch') end\n", ""},
		{"ratelimited without its token check", "ratelimited",
			"if row[2] ~= token then return redis.error_reply('EMQSTALE token mismatch') end\n", ""},
		{"laneclaim retiring a finished job without its token check", "laneclaim",
			"    elseif row[2] ~= token then\n      reason = 'EMQSTALE token mismatch'\n", ""},
		{"laneclaim taking urgent jobs of a lane at its cap", "laneclaim",
			"not (s.cap and s.active + s.taken >= s.cap) and can(s.log)", "can(s.log)"},
		{"laneclaim giving a lane's turn past its cap", "laneclaim",
			"  if s.cap then room = math.min(room, s.cap - s.active - s.taken) end\n", ""},
		{"drop resuming another server's cursor", "drop",
			"if from and from ~= server then cursor = '0' end", ""},
		{"drop without its busy check", "drop",
			"  if claimed > 0 and tonumber(force) == 0 then", "  if false then"},
		{"fail trimming the job it sent to dead", "fail",
			"    if not skip[id] then\n", "    if true then\n"},
		{"reap leaving the trimmed jobs' histories", "reap",
			"  for _, id in ipairs(gone) do redis.pcall('DEL', base .. 'errors:' .. id) end\n", ""},
		{"fail keeping dead_max plus one", "fail",
			"local over = math.min(redis.call('ZCARD', dead) - tonumber(deadmax), #sent + 100)", "local over = math.min(redis.call('ZCARD', dead) - tonumber(deadmax) - 1, #sent + 100)"},
		{"reap taking leases that have not expired", "reap",
			"ZRANGEBYSCORE', KEYS[1], '-inf', now,", "ZRANGEBYSCORE', KEYS[1], '-inf', '+inf',"},
		{"promote moving jobs before their run-at", "promote",
			"ZRANGEBYSCORE', KEYS[1], '-inf', now,", "ZRANGEBYSCORE', KEYS[1], '-inf', '+inf',"},
		{"laneclaim letting urgent jobs it cannot give use up the round robin", "laneclaim",
			"for _, id in ipairs(uids) do\n  if got >= count then break end\n",
			"for _, id in ipairs(uids) do\n  if got >= count or visits >= BOUND then break end\n  visits = visits + 1\n"},
		{"laneclaim not waiting for an urgent job's rate", "laneclaim",
			"  if uwait and (wait < 0 or uwait - now < wait) then wait = math.max(uwait - now, 0) end\n", ""},
		{"lanepause resuming urgent jobs without a wake", "lanepause",
			"    wake = type(u) == 'number' and u > 0\n", "    wake = false\n"},
		{"complete freeing an urgent-only lane's slot without a wake", "complete",
			"      elseif urgentWaits() then\n        wake = true\n", ""},
		{"laneset keeping the hold of a lane whose rate changed", "laneset",
			"  if redis.call('ZREM', lw, lane) == 1 and redis.call('ZCARD', lp) > 0 then", "  if false then"},
		{"flowset keeping the holds of the lanes on a changed default rate", "flowset",
			"  for _, lane in ipairs(held) do\n", "  for _, lane in ipairs({}) do\n"},
		{"laneclaim counting a lane's log from before the default rate changed", "laneclaim",
			"local lanesince = ", "local lanesince = nil and "},
		{"flowset not marking when the default rate changed", "flowset",
			"    redis.call('HSET', KEYS[1], 'lanesince', t[1] * 1000 + math.floor(t[2] / 1000))\n", ""},
	} {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			src := b[m.script].src
			require.Contains(t, src, m.old)
			mutated, err := b.with(m.script, strings.Replace(src, m.old, m.new, 1))
			require.NoError(t, err)
			calling := vectorsCalling(vs, m.script)
			require.NotEmpty(t, calling, "no vector calls %s", m.script)
			results, err := replayAll(context.Background(), tg, mutated, calling)
			require.NoError(t, err)
			var fails []string
			for _, r := range results {
				fails = append(fails, r.fails...)
			}
			require.NotEmpty(t, fails, "the vectors must catch %s", m.name)
			sort.Strings(fails)
			t.Logf("%d failures, the first: %s", len(fails), fails[0])
		})
	}
}

// vectorsCalling is the vectors with a step that calls script.
func vectorsCalling(vs []*vector, script string) []*vector {
	var out []*vector
	for _, v := range vs {
		if slices.ContainsFunc(v.Steps, func(s step) bool { return s.Call == script }) {
			out = append(out, v)
		}
	}
	return out
}
