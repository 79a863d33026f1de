package topic

import "sync"

// eventQueue hands events from valkey-go's goroutines to the handler goroutine. push never
// blocks: past limit queued messages it drops messages and records the drop as an Overflow
// event at that point of the stream.
//
// Control events are bounded too: a connection's queued control events are at most its
// latest two (a Disconnected and a Subscribed, in either order). A push of a kind that is
// already queued for the connection supersedes every control event queued for it: they are
// removed and the new one is appended, so the handler still sees Disconnected and Subscribed
// alternate per connection, a resubscribe (with the latest Count and Err) after every message
// queued before it, and never a resubscribe earlier than it happened. Overflow events that a
// removal leaves side by side are merged. So a queue holds at most limit messages, two
// control events per connection and one Overflow between any two of those.
type eventQueue struct {
	mu       sync.Mutex
	events   []Event
	head     int
	messages int // Message events queued
	controls int // Subscribed and Disconnected events queued
	limit    int
	closed   bool
	wake     chan struct{} // capacity 1: "something was pushed, the handler is free, or the queue closed"
	// busy: the handler is running, on the delivery goroutine or (with direct delivery) on a
	// connection's receiving goroutine that took the handler by takeIdle; no other event is
	// handed out meanwhile.
	busy   bool
	direct sync.WaitGroup // handlers running directly, for close to wait for
	// ending: nothing more comes (Subscription.Drain): pop hands out what is queued, then
	// reports the queue closed.
	ending bool
}

func newEventQueue(limit int) *eventQueue {
	return &eventQueue{limit: limit, wake: make(chan struct{}, 1)}
}

func (q *eventQueue) push(e Event) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	switch {
	case e.Kind == Message && q.messages >= q.limit:
		if n := len(q.events); n > q.head && q.events[n-1].Kind == Overflow {
			q.events[n-1].Dropped++
		} else {
			q.events = append(q.events, Event{Kind: Overflow, Dropped: 1})
		}
	case e.Kind == Message:
		q.messages++
		q.events = append(q.events, e)
	case e.Kind == Subscribed || e.Kind == Disconnected:
		q.supersede(e)
		q.controls++
		q.events = append(q.events, e)
	default:
		q.events = append(q.events, e)
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// connOf names the connection a control event is about: its first channel (the connections
// of one subscription hold disjoint channels).
func connOf(e Event) string {
	if len(e.Channels) == 0 {
		return ""
	}
	return e.Channels[0]
}

// supersede removes the control events queued for e's connection when one of them is of e's
// kind (e, appended next, supersedes them), merging the Overflow events the removal joins.
// q.mu is held.
func (q *eventQueue) supersede(e Event) {
	if q.controls == 0 {
		return
	}
	conn := connOf(e)
	found := false
	for _, x := range q.events[q.head:] {
		if x.Kind == e.Kind && connOf(x) == conn {
			found = true
			break
		}
	}
	if !found {
		return
	}
	w := q.head
	for _, x := range q.events[q.head:] {
		switch {
		case (x.Kind == Subscribed || x.Kind == Disconnected) && connOf(x) == conn:
			q.controls--
			continue
		case x.Kind == Overflow && w > q.head && q.events[w-1].Kind == Overflow:
			q.events[w-1].Dropped += x.Dropped
			continue
		}
		q.events[w] = x
		w++
	}
	clear(q.events[w:])
	q.events = q.events[:w]
}

// takeIdle reports whether the caller may run the handler at once, on its own goroutine, on
// the event it holds: the queue is open and empty and the handler free, so every event before
// it was handled. The caller then holds the handler until doneDirect.
func (q *eventQueue) takeIdle() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.busy || q.head < len(q.events) {
		return false
	}
	q.busy = true
	q.direct.Add(1)
	return true
}

// doneDirect ends a handler run that takeIdle allowed: the delivery goroutine may hand out
// what was queued meanwhile.
func (q *eventQueue) doneDirect() {
	q.done()
	q.direct.Done()
}

// done frees the handler after an event.
func (q *eventQueue) done() {
	q.mu.Lock()
	q.busy = false
	queued := q.head < len(q.events)
	q.mu.Unlock()
	if queued {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

// pop waits for the next event and the handler to be free, and holds the handler until
// done; ok is false once the queue is closed.
func (q *eventQueue) pop() (Event, bool) {
	for {
		q.mu.Lock()
		if q.closed || q.ending && q.head == len(q.events) && !q.busy {
			q.mu.Unlock()
			return Event{}, false
		}
		if q.head < len(q.events) && !q.busy {
			q.busy = true
			e := q.events[q.head]
			q.events[q.head] = Event{}
			q.head++
			switch e.Kind {
			case Message:
				q.messages--
			case Subscribed, Disconnected:
				q.controls--
			}
			if q.head == len(q.events) {
				q.events, q.head = q.events[:0], 0
			} else if q.head > 1024 && q.head > len(q.events)/2 {
				n := copy(q.events, q.events[q.head:])
				clear(q.events[n:]) // the moved events' old slots must not keep their payloads
				q.events, q.head = q.events[:n], 0
			}
			q.mu.Unlock()
			return e, true
		}
		q.mu.Unlock()
		<-q.wake
	}
}

// end marks that nothing more is pushed: the delivery goroutine hands out what is queued,
// then ends.
func (q *eventQueue) end() {
	q.mu.Lock()
	q.ending = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// close discards what is queued and returns once no handler runs directly.
func (q *eventQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.events = nil
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	q.direct.Wait()
}
