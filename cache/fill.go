package cache

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/echocache/echocache/internal/panics"
)

// fill is the part of a miss that may call the loader. Inside the process it is single-flight
// per id among the callers whose reads began in one generation (flightKey: a caller that read
// after an invalidation of the id does not join a fill begun before it); across processes a
// fill lease in the row does the same. rd is the read of the row the miss made: the flight's
// leader acts on it instead of reading the row again (a joiner's read is not needed). ctx
// bounds only this caller's wait: the fill runs detached from it, so one caller giving up does
// not spoil the fill for the others.
func (t *Table[K, V]) fill(ctx context.Context, id K, idStr, key string, rd fillRead) (V, error) {
	var zero V
	t.st.misses.Add(1)
	if rd.leased != "" {
		// A lease this read took and no fill loaded under (this caller joined a flight that
		// ended without meeting it) is released, so no process waits it out.
		defer t.unoffer(ctx, idStr, key, rd.leased)
	}
	if ctx.Done() == nil && t.hookJoined == nil {
		// A caller that cannot give up runs (or joins) the fill on its own goroutine, as
		// groupcache does: no goroutine to start and switch to on a cold miss.
		v, err, _ := t.sf.Do(flightKey(idStr, rd.g), func() (any, error) { return t.fillFlight(ctx, id, idStr, key, rd) })
		if err != nil {
			return zero, err
		}
		return *v.(*V), nil
	}
	ch := t.sf.DoChan(flightKey(idStr, rd.g), func() (any, error) { return t.fillFlight(ctx, id, idStr, key, rd) })
	if t.hookJoined != nil {
		t.hookJoined(idStr)
	}
	select {
	case r := <-ch:
		if r.Err != nil {
			return zero, r.Err
		}
		return *r.Val.(*V), nil
	case <-ctx.Done():
		// The fill goes on for the others; this caller's error says what it waited for.
		return zero, fmt.Errorf("cache: table %s: waiting for the fill of %q: %w", t.spec.Name, idStr, ctx.Err())
	}
}

// flightKey is the single-flight key of a fill of idStr whose read began at generation g. A
// caller joins only a flight of its own generation: a flight begun before an invalidation may
// have loaded the value the invalidation replaced, and a caller that read after it (the
// writer's own next Get among them) must not be handed that value. Callers of one generation
// share one load, as before.
func flightKey(idStr string, g gen) string {
	b := make([]byte, 0, len(idStr)+24)
	b = append(b, idStr...)
	b = append(b, 0)
	b = strconv.AppendUint(b, g.epoch, 36)
	b = append(b, '.')
	b = strconv.AppendUint(b, g.n, 36)
	return string(b)
}

// fillRead is a read of the row that a fill acts on: the reply, the id's generation read
// before the request (an invalidation after it refuses the install) and the clock before
// the request (the base of the L1 deadline).
type fillRead struct {
	rowRead
	g      gen
	readAt int64
	leased string // the lease token the read took (readOrLease), "" if it took none
}

// fillFlight is one fill of id, starting from the read rd: a value or not-found ends it;
// another filler's lease is waited on (with backoff, up to the lease's expiry, after which it
// is taken over) and the row read again; no row, or one that cannot be read, is leased by
// this filler (SET NX PX, or cache_reclaim), loaded, and written with cache_fill. A lease
// that another filler won meanwhile is answered by the row it left, which is acted on like a
// fresh read. It returns a *V.
func (t *Table[K, V]) fillFlight(callerCtx context.Context, id K, idStr, key string, rd fillRead) (res any, err error) {
	if !t.c.enter() {
		return nil, ErrClosed
	}
	defer t.c.leave()
	defer func() {
		// A panic here (a codec, a bug) must not reach singleflight's DoChan, which would
		// re-panic it in a fresh goroutine and take the process down.
		if p := recover(); p != nil {
			err = panics.New("cache: fill of table "+t.spec.Name, p)
		}
	}()
	// Long enough to wait out one lease and then load.
	ctx, cancel := t.c.detach(callerCtx, 2*t.spec.LeaseTTL()+t.spec.LoaderTimeout)
	defer cancel()
	stripe := stripeOf(id, t.ops)
	waited := false
	var b backoff
	for {
		if t.hookAfterRead != nil {
			t.hookAfterRead(idStr)
		}
		if rd.leased != "" && t.take(idStr, rd.leased) {
			return t.loadAndWrite(ctx, id, idStr, key, rd.leased, rd.g)
		}
		r := row{kind: rowAbsent}
		if rd.exists {
			r = parseRow(rd.val)
		}
		if v, err, done := t.fromRow(ctx, id, key, rd.g, r, rd.ttl, rd.readAt); done {
			if err != nil {
				return nil, err
			}
			return &v, nil
		}
		token := newToken()
		var acquired bool
		var cur string
		leaseSent := t.clk.precise()
		switch r.kind {
		case rowLease:
			if t.take(idStr, r.token) {
				// A read of this process took this lease and joined this flight: load under it.
				return t.loadAndWrite(ctx, id, idStr, key, r.token, rd.g)
			}
			if !waited {
				waited = true
				t.st.leaseWaits.Add(1)
			}
			if err := b.wait(ctx, rd.ttl); err != nil {
				return nil, t.fillErr(ctx, idStr, "waiting for another filler", err)
			}
			if rd, err = t.readForFill(ctx, key, stripe); err != nil {
				return nil, t.fillErr(ctx, idStr, "reading the row", err)
			}
			continue
		case rowAbsent:
			acquired, cur, err = t.tryLease(ctx, key, token, t.spec.LeaseTTL())
		default: // unreadable: another version, corrupt bytes, a payload that does not decode
			t.st.corrupt.Add(1)
			acquired, err = t.reclaim(ctx, key, rd.val, token, t.spec.LeaseTTL())
		}
		if err != nil {
			if unreachable(err) {
				// The lease may have landed before its reply was lost (see get).
				t.releaseLater(token, key)
			}
			return nil, t.fillErr(ctx, idStr, "taking the fill lease", err)
		}
		if acquired {
			if waited {
				t.st.leaseTakeovers.Add(1)
			}
			return t.loadAndWrite(ctx, id, idStr, key, token, rd.g)
		}
		if r.kind == rowAbsent {
			// Another filler got there first: SET NX GET answered the row it left.
			rd, err = t.blockedBy(ctx, key, rd.g, leaseSent, cur)
		} else {
			// The unreadable row changed before cache_reclaim ran: read what replaced it.
			rd, err = t.readForFill(ctx, key, stripe)
		}
		if err != nil {
			return nil, t.fillErr(ctx, idStr, "reading the row", err)
		}
	}
}

// readForFill reads the row with its PTTL (a lease's TTL paces the wait on it), after the
// id's generation.
func (t *Table[K, V]) readForFill(ctx context.Context, key string, stripe uint32) (fillRead, error) {
	g := t.gens.read(stripe) // before the read: an invalidation after this refuses the install
	sent := t.clk.precise()
	val, exists, ttl, err := t.readRow(ctx, key, true)
	return fillRead{rowRead: rowRead{val: val, exists: exists, ttl: ttl}, g: g, readAt: sent}, err
}

// blockedBy makes a read of cur, the row that kept this filler's SET NX from landing: the row
// another filler just wrote, its lease, or bytes to reclaim. The reply carries no PTTL, so a
// value or a not-found that L1 may copy gets its PTTL read alone: L1 must not outlive the
// row, and the row's expiry hint is the writer's wall clock, never a deadline (see row.go; a
// not-found row has none). sent, the clock before the SET, is the base of the L1 deadline;
// g, read before the read that found no row, is older than the reply, so an invalidation
// since then still refuses the install.
func (t *Table[K, V]) blockedBy(ctx context.Context, key string, g gen, sent int64, cur string) (fillRead, error) {
	rd := fillRead{rowRead: rowRead{val: cur, exists: true, ttl: pttlUnread}, g: g, readAt: sent}
	if k := parseRow(cur).kind; t.needTTL() && (k == rowValue || k == rowNotFound) {
		n, err := t.readPTTL(ctx, key)
		if err != nil {
			return rd, err
		}
		rd.ttl = n
	}
	return rd, nil
}

// fillErr names the table, the id and the step of a failed fill.
func (t *Table[K, V]) fillErr(ctx context.Context, idStr, step string, err error) error {
	if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		err = fmt.Errorf("%w (%w)", err, ctx.Err())
	}
	return fmt.Errorf("cache: table %s: fill of %q: %s: %w", t.spec.Name, idStr, step, err)
}

// loadAndWrite runs the loader for id under the lease token and writes the outcome with
// cache_fill: a value row, a not-found row, or (on failure) the lease released so waiters
// elsewhere need not wait for it to expire. L1 gets the outcome only if the write landed and
// the id's generation is still g. It returns a *V, or ErrNotFound, or the load error.
func (t *Table[K, V]) loadAndWrite(ctx context.Context, id K, idStr, key, token string, g gen) (any, error) {
	v, delta, err := t.callLoader(ctx, id, idStr)
	switch {
	case err == nil:
		px := t.jitter(t.spec.TTL)
		vrow, err := t.valueRowOf(v, idStr, token, delta, px)
		if err != nil {
			// A codec (or Version) that fails, or panics, must not leave the lease for every
			// process to wait out.
			t.release(ctx, key, token)
			return nil, err
		}
		sent := t.clk.precise()
		written, err := t.finishFill(ctx, key, token, vrow, px)
		switch {
		case err != nil:
			// The value is good; only L2 did not take it. The caller gets it, L1 does not.
			t.c.log.Warn("cache: writing a filled row failed", "table", t.spec.Name, "id", idStr, "err", err)
			t.giveBack(ctx, key, token, err)
		case !written && !t.supersede(ctx, id, idStr, key, vrow, px):
			t.st.fillsRefused.Add(1)
		case !written: // written over an older version, as Set writes: L1 learns it from L2
		default:
			t.install(id, g, t.newEntry(v, false, sent, pttl(pxMillis(px)), delta, token))
		}
		return &v, nil
	case errors.Is(err, ErrNotFound):
		if !t.spec.NegativeEnabled() {
			t.release(ctx, key, token)
			return nil, ErrNotFound
		}
		px := t.jitter(t.spec.NegativeTTL)
		sent := t.clk.precise()
		written, err := t.finishFill(ctx, key, token, notFoundRow(delta), px)
		switch {
		case err != nil:
			t.c.log.Warn("cache: writing a not-found row failed", "table", t.spec.Name, "id", idStr, "err", err)
			t.giveBack(ctx, key, token, err)
		case !written:
			t.st.fillsRefused.Add(1)
		default:
			var zero V
			t.install(id, g, t.newEntry(zero, true, sent, pttl(pxMillis(px)), delta, ""))
		}
		return nil, ErrNotFound
	default:
		t.release(ctx, key, token)
		return nil, err
	}
}

// encode runs the table's codec on v, turning a panic into an error, so a fill that holds a
// lease always gets to release it.
// valueRowOf encodes v as the value row of token (the writer's), to live px: a versioned row
// carrying t.version(v) when the table reads versions ([TableOpts].Version). A codec or a
// Version function that fails or panics is an error.
func (t *Table[K, V]) valueRowOf(v V, idStr, token string, delta, px time.Duration) (string, error) {
	payload, err := t.encode(v, idStr)
	if err != nil {
		return "", err
	}
	if t.version == nil {
		return valueRow(token, delta, wallExpiry(px), payload), nil
	}
	vv, err := protect("Version of table "+t.spec.Name, func() (uint64, error) { return t.version(v), nil })
	if err != nil {
		return "", fmt.Errorf("cache: table %s: reading the version of %q: %w", t.spec.Name, idStr, err)
	}
	return versionedRow(token, vv, delta, wallExpiry(px), payload), nil
}

func (t *Table[K, V]) encode(v V, idStr string) ([]byte, error) {
	payload, err := protect("codec of table "+t.spec.Name, func() ([]byte, error) { return t.codec.Marshal(v) })
	if err != nil {
		return nil, fmt.Errorf("cache: table %s: encoding %q: %w", t.spec.Name, idStr, err)
	}
	return payload, nil
}

// wallExpiry is when a row written now with px expires, in unix ms by this host's clock: the
// hint readers without the row's PTTL use (see row.go).
func wallExpiry(px time.Duration) int64 { return time.Now().UnixMilli() + pxMillis(px) }

// release gives a lease (or refresh claim) back, best effort: if it fails, the lease expires.
// giveBack releases the lease a fill's write of its row failed to replace (err): at once when
// Valkey answered (it refused the write, e.g. out of memory, and may still take a release),
// once it answers again when the write's reply was lost. Either way no process waits out the
// lease's lifetime; cache_fill releases only a lease the row still holds.
func (t *Table[K, V]) giveBack(ctx context.Context, key, token string, err error) {
	if unreachable(err) {
		t.releaseLater(token, key)
		return
	}
	t.release(ctx, key, token)
}

func (t *Table[K, V]) release(ctx context.Context, key, token string) {
	if _, err := t.finishFill(ctx, key, token, "", 0); err != nil {
		t.c.log.Warn("cache: releasing a fill lease failed", "table", t.spec.Name, "key", key, "err", err)
	}
}

// callLoader runs the loader under the table's LoaderTimeout, turning a panic into an error.
// A failure comes back as a *LoadError; ErrNotFound comes back as it is.
func (t *Table[K, V]) callLoader(ctx context.Context, id K, idStr string) (V, time.Duration, error) {
	lctx, cancel := context.WithTimeout(ctx, t.spec.LoaderTimeout)
	defer cancel()
	start := t.clk.precise()
	v, err := protect("loader of table "+t.spec.Name, func() (V, error) { return t.load(lctx, id) })
	delta := time.Duration(t.clk.precise() - start)
	t.countLoad(delta, err)
	if err != nil && !errors.Is(err, ErrNotFound) {
		err = &LoadError{Table: t.spec.Name, ID: idStr, Batch: 1,
			Timeout: errors.Is(lctx.Err(), context.DeadlineExceeded), Err: err}
	}
	return v, delta, err
}

func (t *Table[K, V]) countLoad(delta time.Duration, err error) {
	t.st.loads.Add(1)
	t.st.loadNanos.Add(int64(delta))
	if err != nil && !errors.Is(err, ErrNotFound) {
		t.st.loadErrors.Add(1)
	}
}

// protect calls f, turning a panic into a *PanicError with the panicking goroutine's stack;
// where names what f is.
func protect[T any](where string, f func() (T, error)) (v T, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = panics.New(where, p)
		}
	}()
	return f()
}

// jitter cuts a random fraction, up to the table's Jitter, from ttl.
func (t *Table[K, V]) jitter(ttl time.Duration) time.Duration {
	if t.spec.Jitter <= 0 {
		return ttl
	}
	return ttl - time.Duration(rand.Float64()*t.spec.Jitter*float64(ttl))
}
