package cache

import (
	"context"
	"math"
	"math/rand/v2"
	"runtime/debug"
	"time"
)

// Early refresh is XFetch (Vattani, Chierichetti and Lowenstein, "Optimal Probabilistic
// Cache Stampede Prevention", 2015): a read of a row with `left` to live refreshes it when
// delta*beta*(-ln u) >= left for a uniform u, that is with probability exp(-left/(delta*beta)),
// where delta is how long the row's last load took. Hot rows are refreshed by one reader
// shortly before they expire; everyone else keeps reading the current value meanwhile.
//
// xfetchSpan is where the window opens: with more than xfetchSpan*delta*beta left, the
// probability is below exp(-xfetchSpan) = 1e-4 per read and the hit path skips the test.
const xfetchSpan = 9.21034 // ln(1e4)

// refreshMemo bounds the ids remembered as "refresh already started" per table.
const refreshMemo = 4096

// xfetch is XFetch's test for a row with left nanoseconds to live.
func xfetch(left int64, deltaBeta, u float64) bool {
	switch {
	case deltaBeta <= 0:
		return false
	case left <= 0:
		return true
	}
	return -math.Log(u)*deltaBeta >= float64(left)
}

func randFloat() float64 { return rand.Float64() }

// clockSkew is how far another host's clock may be off ours for the row's expiry hint:
// rows whose hint says they have less than their early-refresh window plus this left are
// asked for their PTTL. A larger skew only makes a refresh start later.
const clockSkew = time.Second

// maybeRefreshFromRow runs XFetch's test on a value row just read from key at sent, with ttl
// left (pttlUnread: not asked; then the row's expiry hint decides whether to ask), and
// starts a refresh if it says so and no process has claimed one.
func (t *Table[K, V]) maybeRefreshFromRow(ctx context.Context, id K, key string, r row, ttl pttl, sent int64) {
	if !t.spec.EarlyRefreshEnabled() || r.token != "" || r.delta <= 0 {
		return
	}
	deltaBeta := t.spec.EarlyRefreshBeta * float64(r.delta)
	if ttl == pttlUnread {
		hint := time.Duration(r.expires-time.Now().UnixMilli()) * time.Millisecond
		if hint > time.Duration(deltaBeta*xfetchSpan)+clockSkew {
			return // far from the window, whatever the clocks say
		}
		sent = t.clk.precise()
		n, err := t.readPTTL(ctx, key)
		if err != nil {
			return // the value was served; the refresh just does not start
		}
		ttl = n
	}
	if ttl < 0 {
		return
	}
	left := int64(time.Duration(ttl) * time.Millisecond)
	if xfetch(left, deltaBeta, randFloat()) {
		t.startRefresh(id, sent+left, r.version)
	}
}

// startRefresh starts one background refresh of the row version of id, unless this process
// started one for the same row already (rowExpires is that row's expiry).
func (t *Table[K, V]) startRefresh(id K, rowExpires int64, version string) {
	idStr := t.ops.format(id)
	now := t.clk.precise()
	t.refreshMu.Lock()
	if until, ok := t.refreshing[idStr]; ok && now < until {
		t.refreshMu.Unlock()
		return
	}
	if len(t.refreshing) >= refreshMemo {
		for k, until := range t.refreshing {
			if until <= now {
				delete(t.refreshing, k)
			}
		}
		if len(t.refreshing) >= refreshMemo {
			t.refreshMu.Unlock()
			return // too many refreshes under way; rows will be filled at expiry instead
		}
	}
	t.refreshing[idStr] = rowExpires
	t.refreshMu.Unlock()
	if !t.c.enter() {
		return
	}
	go func() {
		defer t.c.leave()
		t.refresh(id, idStr, version)
	}()
}

// refresh claims the row for an early refresh (cache_refresh), loads, and writes the new row
// over the claim with cache_fill. If the row is no longer that version, or another process
// claimed it first, it does nothing.
func (t *Table[K, V]) refresh(id K, idStr, version string) {
	defer func() {
		if p := recover(); p != nil {
			t.c.log.Error("cache: early refresh panicked", "table", t.spec.Name, "id", idStr, "panic", p, "stack", string(debug.Stack()))
		}
	}()
	key, err := t.decl.KeysFor(idStr).Row(idStr)
	if err != nil {
		return
	}
	ctx, cancel := t.c.detach(context.Background(), t.spec.LeaseTTL())
	defer cancel()
	g := t.gens.read(stripeOf(id, t.ops))
	token := newToken()
	claimed, err := t.claimRefresh(ctx, key, token, version)
	if err != nil {
		t.c.log.Warn("cache: claiming an early refresh failed", "table", t.spec.Name, "id", idStr, "err", err)
		return
	}
	if !claimed {
		return
	}
	t.st.earlyRefreshes.Add(1)
	if _, err := t.loadAndWrite(ctx, id, idStr, key, token, g); err != nil && err != ErrNotFound {
		t.c.log.Warn("cache: early refresh failed", "table", t.spec.Name, "id", idStr, "err", err)
	}
}
