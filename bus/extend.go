package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// ExtendOpts are the options of [Bus.Extend] and [Bus.ExtendMany]; nil means defaults.
type ExtendOpts struct {
	// Lease is the new lease, from the server's clock at the call. Default Config.Lease.
	Lease time.Duration
	// Ack is the durability the call waits for. Default Primary.
	Ack Ack
}

// Extend renews the lease of a claimed job and returns its new deadline (server clock). It
// answers a *[StaleError] and changes nothing when j.Token no longer holds the job, or when
// the job was cancelled ([Bus.Cancel]; Reason [Cancelled], matching [ErrCancelled]): the
// holder should then stop and fail it.
func (b *Bus) Extend(ctx context.Context, j Job, opts *ExtendOpts) (time.Time, error) {
	deadline, lost, err := b.ExtendMany(ctx, []Job{j}, opts)
	if len(lost) > 0 { // nothing was written: a shortfall of the Ack says nothing more
		return time.Time{}, lost[0]
	}
	if err != nil && !errors.Is(err, ErrNotDurable) {
		return time.Time{}, err
	}
	return deadline, err // an *AckError comes with the renewed deadline, as Ack says
}

// ExtendMany renews the leases of claimed jobs of one queue in one call (a heartbeat). It
// returns the new deadline of the renewed jobs and, for every job whose lease was lost, a
// *[StaleError] with the reason; those jobs were not written. The error is for the call as a
// whole (names, transport, an *[AckError]).
func (b *Bus) ExtendMany(ctx context.Context, jobs []Job, opts *ExtendOpts) (time.Time, []*StaleError, error) {
	const op = "extend"
	var o ExtendOpts
	if opts != nil {
		o = *opts
	}
	if len(jobs) == 0 || len(jobs) > MaxBatch {
		return time.Time{}, nil, fmt.Errorf("%w: %s: %d jobs; one call takes 1 to %d (MaxBatch)", ErrInvalid, op, len(jobs), MaxBatch)
	}
	if o.Lease < 0 {
		return time.Time{}, nil, fmt.Errorf("%w: %s in queue %s: negative Lease", ErrInvalid, op, jobs[0].Queue)
	}
	lease := o.Lease
	if lease == 0 {
		lease = b.cfg.Lease
	}
	var q keys.Queue
	args := make([]string, 1, 1+2*len(jobs))
	args[0] = itoa(msCeil(lease))
	for i, j := range jobs {
		jq, err := b.heldQueue(op, j)
		if err != nil {
			return time.Time{}, nil, err
		}
		if i == 0 {
			q = jq
		} else if j.Queue != jobs[0].Queue {
			return time.Time{}, nil, fmt.Errorf("%w: %s: jobs of queues %s and %s in one call; extend each queue apart", ErrInvalid, op, jobs[0].Queue, j.Queue)
		}
		args = append(args, j.ID.String(), itoa(j.Token))
	}
	msg, err := b.exec(ctx, lua.Run{Script: scExtend, Keys: keysOf(scExtend, q), Args: args}, &o.Ack)
	c := call{op: op, queue: q.Name()}
	if err != nil && !errors.Is(err, ErrNotDurable) {
		return time.Time{}, nil, errorFor(c, err)
	}
	deadline, lost, perr := extendReply(q.Name(), jobs, msg)
	if perr != nil {
		return time.Time{}, nil, perr
	}
	return deadline, lost, errorFor(c, err)
}

// extendReply decodes the reply {deadline_ms, lost} of an extend of jobs, all of queue: the
// new deadline of the renewed jobs and a *StaleError for each lost one.
func extendReply(queue string, jobs []Job, msg valkey.ValkeyMessage) (time.Time, []*StaleError, error) {
	arr, err := msg.ToArray()
	if err != nil || len(arr) != 2 {
		return time.Time{}, nil, protocolError("extend", "reply %v", msg)
	}
	deadline, derr := arr[0].AsInt64()
	flat, ferr := arr[1].AsStrSlice()
	if derr != nil || ferr != nil {
		return time.Time{}, nil, protocolError("extend", "reply %v", msg)
	}
	lost, err := parseLost(queue, jobs, flat)
	if err != nil {
		return time.Time{}, nil, err
	}
	return time.UnixMilli(deadline), lost, nil
}

// parseLost reads the lost list of an extend reply, {id, "EMQSTALE <reason>", ...}, whose
// ids are jobs of the call.
func parseLost(queue string, jobs []Job, flat []string) ([]*StaleError, error) {
	if len(flat)%2 != 0 {
		return nil, protocolError("extend", "a lost list of %d items", len(flat))
	}
	if len(flat) == 0 {
		return nil, nil
	}
	byID := make(map[string]Job, len(jobs))
	for _, j := range jobs {
		byID[j.ID.String()] = j
	}
	lost := make([]*StaleError, 0, len(flat)/2)
	for i := 0; i < len(flat); i += 2 {
		j, ok := byID[flat[i]]
		if !ok {
			return nil, protocolError("extend", "lost id %q is no job of the call", flat[i])
		}
		reason, ok := strings.CutPrefix(flat[i+1], "EMQSTALE ")
		if !ok {
			return nil, protocolError("extend", "lost reason %q is not EMQSTALE", flat[i+1])
		}
		lost = append(lost, &StaleError{Op: "extend", Queue: queue, ID: j.ID, Token: j.Token, Reason: StaleReason(reason)})
	}
	return lost, nil
}
