package cache

import (
	"context"
	"sync"

	"github.com/echocache/echocache/topic"
)

// The cache's subscription to its tables' channels, and taking over from it. Declaring a
// table subscribes every channel anew, on a subscription confirmed before the old one ends;
// until it ends, both deliver the channels the old one covers, on goroutines of their own.
// Handled as they come, the new subscription's message N+1 could be applied before the old
// one's N (a gap, then N taken for a rollback and the table invalidated whole). So while the old subscription lives, the new one's messages on its
// channels are held, and when it has ended they are handled in order, but for those at or
// below where their table then is: the old subscription delivered them. What the old one had
// received and not yet handled when it ended is still lost to it (a gap, an L1 flush of that
// table): declaring a table while others are written may cost them a flush. (Draining the old
// subscription instead, topic's Subscription.Drain, removed those gaps while the handler kept
// up, but a handler slower than the writes then held every declaration up to its bound and
// still lost messages, so it is not used here.)

// syncTables subscribes every tracked table and reads the record of those not yet synced.
func (co *coherence) syncTables(ctx context.Context) {
	co.subMu.Lock()
	defer co.subMu.Unlock()
	select {
	case <-co.stop:
		return // closed: no new subscription
	default:
	}
	co.mu.Lock()
	channels := make([]string, 0, len(co.byChannel))
	var unsynced []*tableState
	for ch, ts := range co.byChannel {
		channels = append(channels, ch)
		if !ts.synced.Load() {
			unsynced = append(unsynced, ts)
		}
	}
	co.mu.Unlock()
	if len(unsynced) == 0 {
		return
	}
	if co.sub == nil || len(co.subChans) != len(channels) {
		gen := co.beginSwap(co.subChans)
		sub, err := co.topics.SubscribeChannels(ctx, channels, co.subscriber(gen))
		if err != nil {
			co.endSwap()
			co.c.log.Warn("cache: subscribing to invalidations failed; L1 stays off until it succeeds", "err", err)
			return
		}
		// The new subscription is confirmed before the old one ends: no message falls between;
		// the old one's channels are the old one's until it ended (above).
		if co.sub != nil {
			co.sub.Close()
		}
		co.endSwap()
		co.sub, co.subChans = sub, channels
	}
	recs, err := co.readRecords(ctx, unsynced)
	if err != nil {
		co.c.log.Warn("cache: reading coherence records failed", "err", err)
		return
	}
	for i, ts := range unsynced {
		ts.mu.Lock()
		r := recs[i]
		ts.epoch, ts.seq, ts.last = r.epoch, r.seq, r.last
		if ts.preEpoch != "" && ts.preEpoch == r.epoch && ts.preSeq > r.seq {
			ts.seq, ts.last = ts.preSeq, ts.preLast
		}
		ts.applied(ts.seq, ts.last)
		ts.mu.Unlock()
		// Whatever L1 took before the subscription was confirmed may have missed a message.
		ts.core.flushL1()
		ts.synced.Store(true)
	}
}

// swap is the state of a takeover, and of the subscriptions' handlers.
type swap struct {
	// mu orders the messages of the old and new subscriptions and the held ones' replay.
	mu      sync.Mutex
	gen     uint64          // the newest subscription's generation
	covered map[string]bool // during a takeover: the channels the old subscription delivers
	held    []topic.Event   // the new subscription's messages on those, until endSwap
}

// subscriber is the handler of the subscription of generation gen.
func (co *coherence) subscriber(gen uint64) func(topic.Event) {
	return func(ev topic.Event) {
		if ev.Kind == topic.Message {
			co.swap.mu.Lock()
			defer co.swap.mu.Unlock()
			if gen == co.swap.gen && co.swap.covered[ev.Channel] {
				co.swap.held = append(co.swap.held, ev)
				return
			}
		}
		co.handle(ev)
	}
}

// beginSwap starts a takeover from the subscription covering channels (none for the first
// subscription), and returns the new subscription's generation.
func (co *coherence) beginSwap(channels []string) uint64 {
	co.swap.mu.Lock()
	defer co.swap.mu.Unlock()
	co.swap.gen++
	co.swap.covered = make(map[string]bool, len(channels))
	for _, ch := range channels {
		co.swap.covered[ch] = true
	}
	return co.swap.gen
}

// endSwap ends a takeover once the old subscription has ended (or the new one failed): the
// held messages are handled in order, those the old subscription delivered skipped.
func (co *coherence) endSwap() {
	co.swap.mu.Lock()
	defer co.swap.mu.Unlock()
	held := co.swap.held
	co.swap.held, co.swap.covered = nil, nil
	for _, ev := range held {
		if !co.delivered(ev) {
			co.handle(ev)
		}
	}
}

// delivered reports whether a held message is at or below where its table is in its epoch:
// one the old subscription delivered, whose ids it dropped.
func (co *coherence) delivered(ev topic.Event) bool {
	m, ok := parseInval(ev.Payload)
	return ok && co.reached(ev.Channel, m)
}

// reached reports whether the table of channel ch is at m's seq or past it, in m's epoch.
func (co *coherence) reached(ch string, m inval) bool {
	co.mu.Lock()
	ts := co.byChannel[ch]
	co.mu.Unlock()
	if ts == nil {
		return false
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.synced.Load() && m.epoch == ts.epoch && m.seq <= ts.seq
}
