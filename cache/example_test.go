package cache_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// account is the value type of the examples' tables.
type account struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// accountDB stands in for the source of truth; it counts the loads that reach it.
type accountDB struct {
	mu    sync.Mutex
	rows  map[int64]string
	loads int
}

func (db *accountDB) load(_ context.Context, id int64) (account, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.loads++
	name, ok := db.rows[id]
	if !ok {
		return account{}, cache.ErrNotFound // remembered for the table's NegativeTTL
	}
	return account{ID: id, Name: name}, nil
}

func (db *accountDB) loadMany(_ context.Context, ids []int64) (map[int64]account, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.loads++
	out := make(map[int64]account, len(ids))
	for _, id := range ids {
		if name, ok := db.rows[id]; ok {
			out[id] = account{ID: id, Name: name}
		}
	}
	return out, nil // ids missing from the map do not exist
}

func (db *accountDB) set(id int64, name string) {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.rows[id] = name
}

func (db *accountDB) calls() int {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.loads
}

// Example declares a table with a loader and follows one id through the tiers: the loader
// fills it once, L1 answers the next reads, and once this process forgets it L2 answers
// without the loader.
func Example() {
	// A program makes its client with valkey.NewClient(valkey.ClientOption{InitAddress:
	// []string{addr}, DisableCache: true}); the examples use the test server.
	client, done := exampleClient()
	defer done()
	ctx := context.Background()

	c, err := cache.New(client, cache.Config{})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	db := &accountDB{rows: map[int64]string{42: "Ada"}}
	accounts, err := cache.NewTable(c, tables.Spec{Name: exampleName("accounts"), TTL: 10 * time.Minute}, db.load, nil)
	if err != nil {
		panic(err)
	}

	a, err := accounts.Get(ctx, 42) // the loader, then the L2 row and the L1 entry
	fmt.Println(a.Name, err, "loads:", db.calls())
	a, tier, err := accounts.Lookup(ctx, 42) // Lookup is Get that names the tier
	fmt.Println(a.Name, tier, err)
	accounts.Forget(42) // drop this process's L1 entry only
	a, tier, _ = accounts.Lookup(ctx, 42)
	fmt.Println(a.Name, tier, "loads:", db.calls())
	_, tier, err = accounts.Lookup(ctx, 7)
	fmt.Println(tier, err)

	st := accounts.Stats()
	fmt.Println("L1 hits:", st.L1Hits, "L2 hits:", st.L2Hits, "loads:", st.Loads)
	// Output:
	// Ada <nil> loads: 1
	// Ada l1 <nil>
	// Ada l2 loads: 1
	// loader cache: not found
	// L1 hits: 1 L2 hits: 1 loads: 2
}

// ExampleTable_Set writes a value through to L2: every process's L1 drops the id, and this
// process's next read sees the new value (read-your-own-writes), from L2, without the loader.
func ExampleTable_Set() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()
	c, err := cache.New(client, cache.Config{})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	db := &accountDB{rows: map[int64]string{42: "Ada"}}
	accounts := cache.MustTable(c, tables.Spec{Name: exampleName("accounts")}, db.load, nil)

	a, _ := accounts.Get(ctx, 42)
	fmt.Println(a.Name)
	db.set(42, "Ada Lovelace") // the source of truth changes; the cache is told with Set
	if err := accounts.Set(ctx, 42, account{ID: 42, Name: "Ada Lovelace"}); err != nil {
		panic(err)
	}
	a, tier, _ := accounts.Lookup(ctx, 42)
	fmt.Println(a.Name, tier, "loads:", db.calls())
	// Output:
	// Ada
	// Ada Lovelace l2 loads: 1
}

// ExampleTable_Invalidate deletes rows: every process's L1 drops the ids, and the next read
// loads the source's current value.
func ExampleTable_Invalidate() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()
	c, err := cache.New(client, cache.Config{})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	db := &accountDB{rows: map[int64]string{42: "Ada"}}
	accounts := cache.MustTable(c, tables.Spec{Name: exampleName("accounts")}, db.load, nil)

	a, _ := accounts.Get(ctx, 42)
	fmt.Println(a.Name)
	db.set(42, "Grace") // the source changes; Invalidate makes the cache forget the old value
	if err := accounts.Invalidate(ctx, 42); err != nil {
		panic(err)
	}
	a, tier, _ := accounts.Lookup(ctx, 42)
	fmt.Println(a.Name, tier, "loads:", db.calls())
	// Output:
	// Ada
	// Grace loader loads: 2
}

// ExampleTable_GetMany serves many ids with one batch-loader call for those neither L1 nor
// L2 holds; ids the source lacks are absent from the result.
func ExampleTable_GetMany() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()
	c, err := cache.New(client, cache.Config{})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	db := &accountDB{rows: map[int64]string{1: "Ada", 2: "Grace", 42: "Barbara"}}
	accounts := cache.MustTable(c, tables.Spec{Name: exampleName("accounts")}, db.load,
		&cache.TableOpts[int64, account]{BatchLoad: db.loadMany})

	got, err := accounts.GetMany(ctx, []int64{1, 2, 7, 42})
	for _, id := range slices.Sorted(maps.Keys(got)) {
		fmt.Println(id, got[id].Name)
	}
	fmt.Println(err, "loads:", db.calls())
	again, _ := accounts.GetMany(ctx, []int64{1, 2, 7, 42}) // all from L1, 7's absence included
	fmt.Println(len(again), "loads:", db.calls(), "L1 hits:", accounts.Stats().L1Hits)
	// Output:
	// 1 Ada
	// 2 Grace
	// 42 Barbara
	// <nil> loads: 1
	// 3 loads: 1 L1 hits: 4
}

// exampleClient is a client for the tests' shared server, and the function that closes it.
func exampleClient() (valkey.Client, func()) {
	tb := &exampleTB{}
	return valkeytest.Shared(tb).Client(tb), tb.done
}

// exampleName is a table name unique to this run: the server is shared with the tests, and
// with other runs of the examples (-count).
func exampleName(base string) string {
	return fmt.Sprintf("%s.%s.x%d", base, runID, nameSeq.Add(1))
}

// exampleTB is the part of testing.TB that valkeytest uses, for examples, which get none: a
// failure panics, and cleanups run when done is called.
type exampleTB struct {
	testing.TB // nil: only the methods below are called
	cleanups   []func()
}

func (tb *exampleTB) Helper()                           {}
func (tb *exampleTB) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (tb *exampleTB) Cleanup(f func())                  { tb.cleanups = append(tb.cleanups, f) }

func (tb *exampleTB) done() {
	for _, f := range slices.Backward(tb.cleanups) {
		f()
	}
}
