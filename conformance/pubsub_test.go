package conformance_test

import (
	"context"
	"sync"
	"time"

	"github.com/valkey-io/valkey-go"
)

// subscription collects a shard channel's messages.
type subscription struct {
	mu     sync.Mutex
	msgs   []string
	cancel context.CancelFunc
	done   chan struct{}
}

func (r *run) subscribe(ch string) {
	ctx, cancel := context.WithCancel(r.ctx)
	s := &subscription{cancel: cancel, done: make(chan struct{})}
	ready := make(chan struct{})
	var once sync.Once
	ctx = valkey.WithOnSubscriptionHook(ctx, func(valkey.PubSubSubscription) { once.Do(func() { close(ready) }) })
	go func() {
		defer close(s.done)
		_ = r.tg.client.Receive(ctx, r.tg.client.B().Ssubscribe().Channel(ch).Build(), func(m valkey.PubSubMessage) {
			s.mu.Lock()
			s.msgs = append(s.msgs, m.Message)
			s.mu.Unlock()
		})
	}()
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		r.fail("SSUBSCRIBE %s: not subscribed within 5 s", ch)
	}
	r.subs[ch] = s
}

func (r *run) messages(st *step) {
	ch := r.expand(st.Messages)
	s := r.subs[ch]
	if s == nil {
		r.fail("no subscription to %s", ch)
		return
	}
	var got []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		s.mu.Lock()
		got = append(got[:0], s.msgs...)
		s.mu.Unlock()
		if len(got) >= len(st.Are) || time.Now().After(deadline) {
			break
		}
	}
	if len(got) != len(st.Are) {
		r.fail("%s: %d messages %q, want %d", ch, len(got), got, len(st.Are))
		return
	}
	for i := range got {
		if msg := r.match(st.Are[i], got[i]); msg != "" {
			r.fail("%s: message %d %q: %s", ch, i+1, got[i], msg)
		}
	}
}
