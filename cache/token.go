package cache

import "math/rand/v2"

// newToken is a fill-lease token: 16 random bytes of [0-9A-Za-z], unique per filler. Two
// random words give 10 characters each (62^10 < 2^60).
func newToken() string {
	var b [tokenLen]byte
	fillToken(b[:])
	return string(b[:])
}

const tokenAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// fillToken fills b with random characters of tokenAlphabet.
func fillToken(b []byte) {
	var x uint64
	for i := range b {
		if i%10 == 0 {
			x = rand.Uint64()
		}
		b[i] = tokenAlphabet[x%62]
		x /= 62
	}
}

// ownLen is the length of a Cache's write-token prefix: 62^8 (about 2.2e14) prefixes, so two
// caches draw the same one about once in 10^14 pairs (and would then skip each other's
// drops, leaving the reconcile to catch them); the other 8 characters, 62^8 again, keep each
// write's token unique.
const ownLen = 8

// writeToken is the token of one write (cache_set, cache_invalidate, cache_flush): the
// cache's own prefix and 10 random characters.
func (c *Cache) writeToken() string {
	var b [tokenLen]byte
	copy(b[:], c.own)
	fillToken(b[ownLen:])
	return string(b[:])
}
