package cache

import (
	"context"
	"time"
)

// The read path's L2 operations, each under the table's own L2Timeout (tables.Spec): a
// Valkey that stops answering costs a read at most that much per operation, whatever the
// caller's deadline, and valkey-go, which retries reads on a broken connection until the
// context ends, is bounded by it too. Errors go through l2outcome, so a caller's own
// cancellation is reported as the caller's, never as an L2 failure.

// l2ctx derives the context of one L2 operation from ctx. A caller's deadline no later than
// the timeout bounds the operation already, so ctx then serves as it is: no context and no
// timer of the operation's own (the errors are the same; see l2outcome).
func (t *Table[K, V]) l2ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= t.spec.L2Timeout {
		return ctx, noCancel
	}
	return context.WithTimeout(ctx, t.spec.L2Timeout)
}

// noCancel is the CancelFunc of an operation that runs under its caller's context.
var noCancel context.CancelFunc = func() {}

// l2done classifies err, the result of one L2 operation run under bctx = l2ctx(ctx).
func (t *Table[K, V]) l2done(ctx, bctx context.Context, err error) error {
	err = l2outcome(ctx, bctx, t.spec.L2Timeout, err)
	t.c.brk.observe(err)
	return err
}

func (t *Table[K, V]) readRow(ctx context.Context, key string, withTTL bool) (string, bool, pttl, error) {
	bctx, cancel := t.l2ctx(ctx)
	defer cancel()
	val, exists, ttl, err := t.c.readRow(bctx, key, withTTL)
	return val, exists, ttl, t.l2done(ctx, bctx, err)
}

func (t *Table[K, V]) readOrLease(ctx context.Context, key, token string, withTTL bool) (string, bool, bool, pttl, error) {
	bctx, cancel := t.l2ctx(ctx)
	defer cancel()
	val, exists, acquired, ttl, err := t.c.readOrLease(bctx, key, leaseRow(token), t.spec.LeaseTTL(), withTTL)
	return val, exists, acquired, ttl, t.l2done(ctx, bctx, err)
}

func (t *Table[K, V]) readPTTL(ctx context.Context, key string) (pttl, error) {
	bctx, cancel := t.l2ctx(ctx)
	defer cancel()
	n, err := t.c.readPTTL(bctx, key)
	return n, t.l2done(ctx, bctx, err)
}

func (t *Table[K, V]) readRows(ctx context.Context, keys []string, groups [][]int, withTTL bool) ([]rowRead, error) {
	bctx, cancel := t.l2ctx(ctx)
	defer cancel()
	rows, err := t.c.readRows(bctx, keys, groups, withTTL)
	return rows, t.l2done(ctx, bctx, err)
}

func (t *Table[K, V]) tryLease(ctx context.Context, key, token string, ttl time.Duration) (bool, string, error) {
	bctx, cancel := t.l2ctx(ctx)
	defer cancel()
	acquired, cur, err := t.c.tryLease(bctx, key, token, ttl)
	return acquired, cur, t.l2done(ctx, bctx, err)
}

func (t *Table[K, V]) reclaim(ctx context.Context, key, cur, token string, ttl time.Duration) (bool, error) {
	bctx, cancel := t.l2ctx(ctx)
	defer cancel()
	ok, err := t.c.reclaim(bctx, key, cur, token, ttl)
	return ok, t.l2done(ctx, bctx, err)
}

func (t *Table[K, V]) claimRefresh(ctx context.Context, key, token, version string) (bool, error) {
	bctx, cancel := t.l2ctx(ctx)
	defer cancel()
	ok, err := t.c.claimRefresh(bctx, key, token, version)
	return ok, t.l2done(ctx, bctx, err)
}

func (t *Table[K, V]) finishFill(ctx context.Context, key, token, row string, px time.Duration) (bool, error) {
	bctx, cancel := t.l2ctx(ctx)
	defer cancel()
	written, err := t.c.finishFill(bctx, key, token, row, px)
	return written, t.l2done(ctx, bctx, err)
}

func (t *Table[K, V]) leaseMany(ctx context.Context, keys []string, token string, ttl time.Duration) ([]bool, error) {
	bctx, cancel := t.l2ctx(ctx)
	defer cancel()
	acquired, err := t.c.leaseMany(bctx, keys, token, ttl)
	return acquired, t.l2done(ctx, bctx, err)
}

func (t *Table[K, V]) finishMany(ctx context.Context, keys []string, token string, rows []string, pxs []time.Duration) ([]bool, []error) {
	bctx, cancel := t.l2ctx(ctx)
	defer cancel()
	written, errs := t.c.finishMany(bctx, keys, token, rows, pxs)
	// One round trip, one outcome for the breaker, as leaseMany's and readRows' pipelines
	// count: a pipeline that timed out is one L2 failure, not one per key (a write of 1,000
	// rows that outlasted L2Timeout opened the breaker at once, for every table of the
	// cache). Its first failure the breaker counts decides, else its first error (an error
	// reply, a caller's cancellation: counted as nothing), else its success.
	var outcome error
	for i := range errs {
		errs[i] = l2outcome(ctx, bctx, t.spec.L2Timeout, errs[i])
		if errs[i] != nil && (outcome == nil || !counts(outcome) && counts(errs[i])) {
			outcome = errs[i]
		}
	}
	t.c.brk.observe(outcome)
	return written, errs
}
