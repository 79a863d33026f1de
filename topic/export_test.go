package topic

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
