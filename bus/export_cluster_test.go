package bus

// Resent is how many scripts b sent again because the cluster refused them before they ran
// (MOVED, ASK, TRYAGAIN, CLUSTERDOWN).
func Resent(b *Bus) int64 { return b.resent.Load() }
