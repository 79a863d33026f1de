package cache

// SetInflateBound sets the bound on a compressed table's inflated payloads (see
// MaxInflatedPayload), for tests that plant payloads past it without inflating 64 MiB. Set it
// before the table's first read.
func SetInflateBound[K ID, V any](t *Table[K, V], n int) {
	c := t.codec.(compressed[V])
	c.limit = n
	t.codec = c
}
