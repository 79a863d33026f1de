package bus

import "time"

// SetHeartbeatInterval sets w's heartbeat interval past the validation of NewWorker and of
// the registrations; call it before Start. The drills use an interval longer than the lease
// to get a worker that renews nothing.
func SetHeartbeatInterval(w *Worker, d time.Duration) { w.cfg.HeartbeatInterval = d }

// SetRelistEvery sets how long b trusts that a queue it listed is still in the registry.
func SetRelistEvery(b *Bus, d time.Duration) { b.reg.every = d }
