package topic

import "time"

// Queued reports what a subscription holds for its handler: queued messages, and the drops
// recorded by an Overflow event still queued. Tests use it to wait for a state instead of
// sleeping.
func (s *Subscription) Queued() (messages, dropped int) {
	q := s.queue
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, e := range q.events[q.head:] {
		if e.Kind == Overflow {
			dropped += e.Dropped
		}
	}
	return q.messages, dropped
}

// StableAfter returns c with the time a connection must stay subscribed before its drop is
// retried at once set to d (resubscribeStable by default), so a test of the backoff does not
// depend on how soon its handler runs.
func StableAfter(c Config, d time.Duration) Config {
	c.stable = d
	return c
}

// BeforeSubscribe returns c with f run in each connection attempt of its subscriptions, after
// the attempt checked that Drain has not begun and before it subscribes.
func BeforeSubscribe(c Config, f func()) Config {
	c.beforeSubscribe = f
	return c
}
