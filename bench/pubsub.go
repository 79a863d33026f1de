package bench

import (
	"context"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"
)

// invalPayload has the size and shape of an invalidation message (epoch,
// sequence, one id), so a raw round trip carries what ours will.
const invalPayload = "1:123456:42"

// pubSubWait bounds a wait for one message, so a lost message fails the
// benchmark instead of hanging the run.
const pubSubWait = 30 * time.Second

// PubSubRoundTrip returns the raw propagation baseline as a [LatencySide]
// named "pubsub": each op SPUBLISHes an invalidation-sized message on channel
// with pub and returns the time until sub's valkey-go Receive callback has
// it (sharded pub/sub, as table invalidations use). The subscription is
// live when it returns, and ends on b.Cleanup. pub and sub must be
// different clients: sub's connection is taken by the subscription.
func PubSubRoundTrip(b *testing.B, pub, sub valkey.Client, channel string) LatencySide {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- sub.Receive(ctx, sub.B().Ssubscribe().Channel(channel).Build(), func(valkey.PubSubMessage) {
			select {
			case got <- struct{}{}:
			default: // one message in flight at a time: cannot happen
			}
		})
	}()
	b.Cleanup(func() {
		cancel()
		<-done
	})

	// Publish probes until one reaches the subscriber (the SSUBSCRIBE has
	// taken effect), and consume that probe's signal: a probe that found no
	// receiver was delivered to nobody, so nothing else is in flight.
	deadline := time.Now().Add(pubSubWait)
	for {
		n, err := pub.Do(ctx, pub.B().Spublish().Channel(channel).Message("probe").Build()).AsInt64()
		if err != nil {
			b.Fatalf("SPUBLISH probe: %v", err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("no subscriber on %s after %v", channel, pubSubWait)
		}
		time.Sleep(time.Millisecond) // the subscribe is in flight; only its effect can be awaited
	}
	timer := time.NewTimer(pubSubWait)
	defer timer.Stop()
	select {
	case <-got:
	case <-timer.C:
		b.Fatal("probe not received")
	}

	wait := time.NewTimer(pubSubWait)
	wait.Stop()
	return LatencySide{Name: "pubsub", Op: func(b *testing.B) time.Duration {
		start := time.Now()
		n, err := pub.Do(ctx, pub.B().Spublish().Channel(channel).Message(invalPayload).Build()).AsInt64()
		if err != nil || n != 1 {
			b.Fatalf("SPUBLISH: %d receivers, %v", n, err)
		}
		wait.Reset(pubSubWait)
		select {
		case <-got:
		case <-wait.C:
			b.Fatal("message not received")
		}
		d := time.Since(start)
		wait.Stop()
		return d
	}}
}
