// Command quickstart shows EchoCache's three tiers on one table: a first read runs the
// loader over a slow source, the next one is an L1 hit, and after the L1 entry is forgotten
// the read is served by the L2 row in Valkey without calling the loader again.
//
//	VALKEY_ADDR=127.0.0.1:6379 go run ./examples/quickstart
//
// VALKEY_ADDR defaults to 127.0.0.1:6379. The program writes rows under ecc:{quickstart.users}
// that expire within a minute, and exits by itself.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/tables"
)

// User is the value the table caches.
type User struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// slowSource stands in for a database: every lookup takes a while.
type slowSource struct {
	delay time.Duration
	users map[int64]string
}

func (s slowSource) user(ctx context.Context, id int64) (User, error) {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return User{}, ctx.Err()
	}
	name, ok := s.users[id]
	if !ok {
		return User{}, cache.ErrNotFound // remembered for the table's NegativeTTL
	}
	return User{ID: id, Name: name}, nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := os.Getenv("VALKEY_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	client, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", addr, err)
	}
	defer client.Close()

	c, err := cache.New(client, cache.Config{})
	if err != nil {
		return err
	}
	defer c.Close()

	db := slowSource{delay: 50 * time.Millisecond, users: map[int64]string{42: "Ada Lovelace"}}
	users, err := cache.NewTable(c, tables.Spec{
		Name:        "quickstart.users",
		TTL:         time.Minute,      // the L2 row lives 54 to 60 s (10% jitter)
		L1TTL:       10 * time.Second, // and at most 10 s in this process
		NegativeTTL: 10 * time.Second, // "no such user" is remembered for 10 s
	}, db.user, nil)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	read := func(n int, id int64) error {
		before := users.Stats()
		start := time.Now()
		u, err := users.Get(ctx, id)
		took := time.Since(start)
		if err != nil && err != cache.ErrNotFound {
			return err
		}
		what := fmt.Sprintf("%+v", u)
		if err != nil {
			what = err.Error()
		}
		fmt.Printf("read %d: user %-3d %-36s from %-6s in %v\n", n, id, what, tier(before, users.Stats()), took.Round(time.Microsecond))
		return nil
	}

	if err := read(1, 42); err != nil { // miss everywhere: the loader runs, L2 and L1 are filled
		return err
	}
	if err := read(2, 42); err != nil { // L1: no network, no decoding
		return err
	}
	users.Forget(42)
	fmt.Println("Forget(42): the L1 entry is dropped; the L2 row stays")
	if err := read(3, 42); err != nil { // L2: one round trip, no loader call
		return err
	}
	if err := read(4, 7); err != nil { // no such user: the loader says so, and it is remembered
		return err
	}
	if err := read(5, 7); err != nil {
		return err
	}
	st := users.Stats()
	fmt.Printf("stats: L1 hits %d, L2 hits %d, loads %d (%v in the loader)\n", st.L1Hits, st.L2Hits, st.Loads, st.LoadTime.Round(time.Millisecond))
	return nil
}

// tier names the tier that answered, from the stats before and after one read.
func tier(before, after cache.Stats) string {
	switch {
	case after.L1Hits > before.L1Hits:
		return "L1"
	case after.L2Hits > before.L2Hits:
		return "L2"
	case after.Loads > before.Loads:
		return "loader"
	}
	return "?"
}
