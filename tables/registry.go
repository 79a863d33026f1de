package tables

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/echocache/echocache/keys"
)

// ErrDuplicate is returned by [Registry.Declare] for a name that is already declared.
var ErrDuplicate = errors.New("tables: duplicate table name")

// Table is a declared table: its resolved [Spec] and its key builders.
type Table struct {
	Spec Spec
	// Keys is the table's key builder: its name, and its keys when it has one shard.
	Keys keys.Table
	// Shards are the key builders of its shards, Spec.Shards of them: Keys itself for a
	// table of one shard (the unsharded layout), else Keys.Shard(0) to Keys.Shard(n-1).
	Shards []keys.Table
}

// KeysFor is the key builder of the shard that holds id (in its row-key form).
func (t Table) KeysFor(id string) keys.Table {
	if len(t.Shards) <= 1 {
		return t.Keys
	}
	return t.Shards[keys.ShardOf(id, len(t.Shards))]
}

// ShardIndex is the index in Shards of the shard that holds id.
func (t Table) ShardIndex(id string) int { return keys.ShardOf(id, len(t.Shards)) }

// shardsOf builds the shard key builders of a table of n shards.
func shardsOf(k keys.Table, n int) ([]keys.Table, error) {
	if n <= 1 {
		return []keys.Table{k}, nil
	}
	out := make([]keys.Table, n)
	for i := range out {
		var err error
		if out[i], err = k.Shard(i); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Registry holds the tables declared on one cache object. There is no package-level
// registry: two cache objects in one process may each declare a table of the same name.
// The zero Registry is ready to use and safe for concurrent use.
type Registry struct {
	mu     sync.Mutex
	tables map[string]Table
}

// Declare validates spec (see [Spec.Resolve]), builds its keys and records it. A name that
// is already declared returns an error wrapping [ErrDuplicate].
func (r *Registry) Declare(spec Spec) (Table, error) {
	s, err := spec.Resolve()
	if err != nil {
		return Table{}, err
	}
	k, err := keys.NewTable(s.Name)
	if err != nil {
		return Table{}, fmt.Errorf("%w: %w", ErrInvalidSpec, err)
	}
	shards, err := shardsOf(k, s.Shards)
	if err != nil {
		return Table{}, fmt.Errorf("%w: %w", ErrInvalidSpec, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.tables[s.Name]; dup {
		return Table{}, fmt.Errorf("%w: %q is already declared on this cache", ErrDuplicate, s.Name)
	}
	if r.tables == nil {
		r.tables = make(map[string]Table)
	}
	t := Table{Spec: s, Keys: k, Shards: shards}
	r.tables[s.Name] = t
	return t, nil
}

// Forget removes a declaration, so its name may be declared again. The cache calls it when
// building a table fails after the name was declared.
func (r *Registry) Forget(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.tables, name)
}

// Lookup returns the declared table of that name.
func (r *Registry) Lookup(name string) (Table, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.tables[name]
	return t, ok
}

// All returns every declared table, sorted by name.
func (r *Registry) All() []Table {
	r.mu.Lock()
	out := make([]Table, 0, len(r.tables))
	for _, t := range r.tables {
		out = append(out, t)
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Spec.Name < out[j].Spec.Name })
	return out
}
