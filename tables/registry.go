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

// Table is a declared table: its resolved [Spec] and its key builder.
type Table struct {
	Spec Spec
	Keys keys.Table
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
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.tables[s.Name]; dup {
		return Table{}, fmt.Errorf("%w: %q is already declared on this cache", ErrDuplicate, s.Name)
	}
	if r.tables == nil {
		r.tables = make(map[string]Table)
	}
	t := Table{Spec: s, Keys: k}
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
