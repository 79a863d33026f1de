// Package tables declares EchoCache tables: a [Spec] names a table and sets its L2 TTL and
// jitter, its L1 TTL and size bound, its negative TTL, its loader timeout and its
// early-refresh knob, each with a default written beside the field and exported as a
// constant. A [Registry] validates each Spec once (the name through the keys package, so a
// table name can never break its hash tag) and refuses a second table of the same name.
//
// A Registry belongs to the object that owns the tables (the cache.Cache); there is no
// package-level registry. Most programs never touch one directly: cache.NewTable declares
// the Spec on the cache it is given. The flow, spelled out:
//
//	var reg tables.Registry
//	users, err := reg.Declare(tables.Spec{
//		Name:        "users",         // rows are ecc:{users}:<id>, all in one cluster slot
//		TTL:         10 * time.Minute, // each row lives 9 to 10 minutes (Jitter 0.1)
//		L1TTL:       30 * time.Second, // and at most 30 s in a process, never past its row
//		NegativeTTL: tables.Off,       // do not remember missing users
//	})
//	// users.Spec holds the resolved values: users.Spec.Jitter == tables.DefaultJitter,
//	// users.Spec.LeaseTTL() == tables.DefaultLoaderTimeout + tables.LeaseGrace.
//	row, err := users.Keys.Row("42")  // ecc:{users}:42
//	_, err = reg.Declare(tables.Spec{Name: "users"}) // errors.Is(err, tables.ErrDuplicate)
//	_, err = reg.Declare(tables.Spec{Name: "a{b"})   // errors.Is(err, tables.ErrInvalidSpec)
package tables
