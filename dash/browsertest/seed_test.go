package browsertest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/echotest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/tables"
)

// seeded is what the seed left on the server.
type seeded struct {
	client  valkey.Client
	bus     *bus.Bus
	orders  string     // a queue with a backlog, a scheduled job and dead jobs
	emails  string     // a queue a worker drains under a steady load
	reports string     // a paused queue with periodic schedules
	tenants string     // a queue with lanes: acme (limits of its own) and beta, jobs waiting
	dead    keys.JobID // a dead task of orders, failed with failReason
	dead2   keys.JobID // another one
}

// failReason is why the dead jobs failed.
const failReason = "card declined: insufficient funds (gateway code 51)"

type charge struct {
	OrderID  string  `json:"order_id"`
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
	Customer struct {
		ID    string `json:"id"`
		Email string `json:"email"`
	} `json:"customer"`
}

type email struct {
	To       string `json:"to"`
	Template string `json:"template"`
}

// seed fills a fresh server: three queues (one drained by a live worker), a periodic
// schedule, and two cached tables read through real Caches that publish their stats.
func seed(t *testing.T, srv *echotest.Server) seeded {
	t.Helper()
	ctx := context.Background()
	client := srv.Client(t)
	b, err := bus.New(client, bus.Config{})
	require.NoError(t, err)
	s := seeded{client: client, bus: b, orders: "orders", emails: "emails", reports: "reports", tenants: "tenants"}

	for i := range 42 {
		var c charge
		c.OrderID, c.Amount, c.Currency = fmt.Sprintf("ord-%05d", 1000+i), 19.5+float64(i), "EUR"
		c.Customer.ID, c.Customer.Email = fmt.Sprintf("cus-%03d", i), fmt.Sprintf("buyer%d@example.com", i)
		_, err := bus.EnqueueTask(ctx, b, s.orders, "orders.charge", c, nil)
		require.NoError(t, err)
	}
	_, err = bus.EnqueueTask(ctx, b, s.orders, "orders.remind", map[string]string{"order_id": "ord-00999"},
		&bus.TaskOpts{EnqueueOpts: bus.EnqueueOpts{Delay: time.Hour}})
	require.NoError(t, err)
	// Two jobs fail for good: claimed, failed with the reason, attempts spent.
	jobs, err := b.Claim(ctx, s.orders, &bus.ClaimOpts{Count: 3})
	require.NoError(t, err)
	require.Len(t, jobs, 3)
	for i, j := range jobs[:2] {
		_, err := b.Fail(ctx, j, &bus.FailOpts{MaxAttempts: 1, Error: failReason})
		require.NoError(t, err)
		if i == 0 {
			s.dead = j.ID
		} else {
			s.dead2 = j.ID
		}
	}
	_ = jobs[2] // stays active, under its lease

	require.NoError(t, b.DeclarePeriodic(ctx, s.reports, bus.Periodic{Name: "nightly-revenue", Cron: "0 3 * * *", Kind: "reports.revenue", Args: map[string]int{"days": 1}}))
	require.NoError(t, b.DeclarePeriodic(ctx, s.reports, bus.Periodic{Name: "hourly-stock", Every: time.Hour, Kind: "reports.stock"}))
	_, err = bus.EnqueueTask(ctx, b, s.reports, "reports.revenue", map[string]int{"days": 7}, nil)
	require.NoError(t, err)
	require.NoError(t, b.Pause(ctx, s.reports))

	// tenants: lanes with limits and waiting jobs, no worker.
	require.NoError(t, b.SetQueueLimits(ctx, s.tenants, bus.QueueLimits{Lanes: bus.LaneLimits{Cap: 10}}))
	require.NoError(t, b.SetLaneLimits(ctx, s.tenants, "acme", bus.LaneLimits{Cap: 5, Rate: bus.Rate{Limit: 200, Per: time.Second, Burst: 20}, Weight: 2}))
	for i := range 6 {
		lane := []string{"acme", "beta"}[i%2]
		_, err := bus.EnqueueTask(ctx, b, s.tenants, "tenants.sync", map[string]int{"n": i}, &bus.TaskOpts{EnqueueOpts: bus.EnqueueOpts{Lane: lane}})
		require.NoError(t, err)
	}
	_, err = bus.EnqueueTask(ctx, b, s.tenants, "tenants.audit", map[string]int{"n": 0}, &bus.TaskOpts{EnqueueOpts: bus.EnqueueOpts{Priority: 2}})
	require.NoError(t, err)

	// emails: a worker drains a steady stream and publishes its stats often.
	w, err := bus.NewWorker(b, bus.WorkerConfig{Queue: s.emails, ID: "mailer-1", Concurrency: 4, StatsInterval: 100 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, bus.Handle(w, "emails.send", func(ctx context.Context, _ *bus.Task[email]) error { return nil }, nil))
	require.NoError(t, w.Start())
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			bus.EnqueueTask(ctx, b, s.emails, "emails.send", email{To: fmt.Sprintf("user%d@example.com", i), Template: "receipt"}, nil)
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		w.Close(ctx)
	})

	// Two tables read through two Caches, so the tiers, loads and invalidations are real.
	for _, id := range []string{"api-1", "api-2"} {
		c, err := cache.New(client, cache.Config{ID: id, StatsInterval: 100 * time.Millisecond})
		require.NoError(t, err)
		t.Cleanup(c.Close)
		users, err := cache.NewTable(c, tables.Spec{Name: "users", TTL: time.Minute}, func(_ context.Context, id int64) (string, error) {
			if id%17 == 0 {
				return "", cache.ErrNotFound
			}
			return fmt.Sprintf("user %d", id), nil
		}, nil)
		require.NoError(t, err)
		products, err := cache.NewTable(c, tables.Spec{Name: "products", TTL: time.Minute}, func(_ context.Context, id string) (string, error) {
			return "product " + id, nil
		}, nil)
		require.NoError(t, err)
		for i := range 300 {
			_, err := users.Get(ctx, int64(i%60))
			if !errors.Is(err, cache.ErrNotFound) {
				require.NoError(t, err)
			}
			_, err = products.Get(ctx, fmt.Sprintf("sku-%d", i%25))
			require.NoError(t, err)
		}
		require.NoError(t, users.Set(ctx, 1, "Ada Lovelace"))
		require.NoError(t, products.Invalidate(ctx, "sku-3"))
	}
	return s
}
