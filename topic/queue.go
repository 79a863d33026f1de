package topic

import "sync"

// eventQueue hands events from valkey-go's goroutines to the handler goroutine. push never
// blocks: past limit queued messages it drops messages and records the drop as an Overflow
// event at that point of the stream. Control events are always queued; they are rare.
type eventQueue struct {
	mu       sync.Mutex
	events   []Event
	head     int
	messages int // Message events queued
	limit    int
	closed   bool
	wake     chan struct{} // capacity 1: "something was pushed or the queue closed"
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
	default:
		q.events = append(q.events, e)
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// pop waits for the next event; ok is false once the queue is closed.
func (q *eventQueue) pop() (Event, bool) {
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return Event{}, false
		}
		if q.head < len(q.events) {
			e := q.events[q.head]
			q.events[q.head] = Event{}
			q.head++
			if e.Kind == Message {
				q.messages--
			}
			if q.head == len(q.events) {
				q.events, q.head = q.events[:0], 0
			} else if q.head > 1024 && q.head > len(q.events)/2 {
				q.events, q.head = append(q.events[:0], q.events[q.head:]...), 0
			}
			q.mu.Unlock()
			return e, true
		}
		q.mu.Unlock()
		<-q.wake
	}
}

func (q *eventQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.events = nil
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}
