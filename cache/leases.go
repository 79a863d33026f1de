package cache

import (
	"context"
	"math/rand/v2"
	"slices"
	"time"
)

// Leases taken by reads. A miss's read takes the fill lease where no row is (readOrLease),
// then joins the id's flight. The flight loads under that lease: at once when it is the
// flight this read started, or when it meets the lease (its token offered here) while it
// waits, if the read joined a flight already under way. No flight of this process ever
// waits on a lease this process took and offered: every token a read took stays offered
// until a fill takes it or the read withdraws it, however many reads of the id took one
// (two can: another process's invalidation may delete the first lease before the second
// read's SET NX, and their replies may be handled in either order).

// offer makes the lease token, taken by a read of idStr, available to the id's flight.
func (t *Table[K, V]) offer(idStr, token string) {
	t.leaseMu.Lock()
	t.leases[idStr] = append(t.leases[idStr], token)
	t.leaseMu.Unlock()
}

// take claims the offered lease token of idStr for a fill; false if it is not offered.
func (t *Table[K, V]) take(idStr, token string) bool {
	t.leaseMu.Lock()
	defer t.leaseMu.Unlock()
	toks := t.leases[idStr]
	i := slices.Index(toks, token)
	if i < 0 {
		return false
	}
	if len(toks) == 1 {
		delete(t.leases, idStr)
	} else {
		t.leases[idStr] = slices.Delete(toks, i, i+1)
	}
	return true
}

// unoffer withdraws an offered lease no fill took, and releases it in L2.
func (t *Table[K, V]) unoffer(ctx context.Context, idStr, key, token string) {
	if !t.take(idStr, token) {
		return
	}
	rctx, cancel := t.c.detach(ctx, t.spec.L2Timeout)
	defer cancel()
	t.release(rctx, key, token)
}

// releaseLater gives back, in the background, the leases (of token, on keys) a read may have
// taken before its reply was lost (a timeout, a broken connection): cache_fill releases each
// only if its row still holds it. It tries for one LeaseTTL, every L2Timeout while the breaker
// lets reads through, then leaves the leases to expire.
//
// A release that finds no lease does not prove that none will land: valkey-go spreads a
// client's commands over several connections, and a server that was stopped may run the
// release, sent later on a connection it serves first, before the lost write. So a key is
// let go once a release freed its lease, or once a second release, sent after the first was
// answered (the lost write waits on the server by then), finds none either.
func (t *Table[K, V]) releaseLater(token string, keys ...string) {
	if len(keys) == 0 || !t.c.enter() {
		return
	}
	go func() {
		defer t.c.leave()
		ctx, cancel := t.c.detach(context.Background(), t.spec.LeaseTTL())
		defer cancel()
		tick := time.NewTicker(t.spec.L2Timeout)
		defer tick.Stop()
		missed := make(map[string]bool, len(keys)) // a release of the key was answered: no lease
		for {
			if t.c.brk.allow() { // while the breaker is open, Valkey is not asked
				left := keys[:0]
				for _, key := range keys {
					bctx, bcancel := t.l2ctx(ctx)
					released, err := t.c.finishFill(bctx, key, token, "", 1)
					bcancel()
					switch {
					case err != nil:
						if unreachable(err) {
							left = append(left, key)
						}
					case !released && !missed[key]:
						missed[key] = true
						left = append(left, key)
					}
				}
				if keys = left; len(keys) == 0 {
					return
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// backoff paces a waiter polling another filler's lease: 1 ms, growing by half up to 50 ms,
// with jitter, and never past the lease's expiry (so a dead holder is taken over promptly).
type backoff struct{ d time.Duration }

const (
	backoffMin = time.Millisecond
	backoffMax = 50 * time.Millisecond
)

func (b *backoff) wait(ctx context.Context, lease pttl) error {
	b.d = min(max(b.d*3/2, backoffMin), backoffMax)
	d := b.d/2 + rand.N(b.d/2+1) + b.d/4 // within [0.75, 1.25] of b.d
	if lease >= 0 {
		d = min(d, time.Duration(lease+1)*time.Millisecond)
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
