package bus

import (
	"context"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// Reads that a tool pipelines: the script call behind a read-only verb, built without a Bus,
// and the decoder of its reply. A dashboard that shows 200 queues (and the cache's tables,
// see cache.StatsRun) sends every call in one round trip with [lua.Pipeline] and decodes each
// reply, instead of paying one round trip per queue. Each reply is its own queue's atomic
// snapshot; the queues' snapshots are not one snapshot together.

// CountsRun is the call [Bus.Counts] sends for queue; [DecodeCounts] reads its reply.
func CountsRun(queue string) (lua.Run, error) {
	q, err := keys.NewQueue(queue)
	if err != nil {
		return lua.Run{}, invalid("counts", err)
	}
	return lua.Run{Script: scCounts, Keys: keysOf(scCounts, q)}, nil
}

// DecodeCounts reads the reply of a [CountsRun] of queue.
func DecodeCounts(queue string, reply valkey.ValkeyResult) (Counts, error) {
	msg, err := reply.ToMessage()
	if err != nil {
		return Counts{}, errorFor(call{op: "counts", queue: queue}, translate(err))
	}
	return countsReply(msg)
}

// countsReply decodes a counts reply {pending, active, scheduled, dead, paused, max_attempts,
// in_lanes, urgent, lanes_ready, lanes_held, lanes_active, dead_max} (see counts.lua).
func countsReply(msg valkey.ValkeyMessage) (Counts, error) {
	const op = "counts"
	arr, err := msg.ToArray()
	if err != nil || len(arr) != 12 {
		return Counts{}, protocolError(op, "reply %v", msg)
	}
	n := make([]int64, 12)
	for i := range arr {
		if n[i], err = arr[i].AsInt64(); err != nil {
			return Counts{}, protocolError(op, "reply %v", msg)
		}
	}
	return Counts{Pending: n[0] + n[6] + n[7], Active: n[1], Scheduled: n[2], Dead: n[3], Paused: n[4] == 1, MaxAttempts: int(n[5]),
		InLanes: n[6], Urgent: n[7], LanesReady: n[8], LanesHeld: n[9], LanesActive: n[10], DeadLimit: int(n[11])}, nil
}

// CountsMany reads the counts of every queue of queues in one pipelined round trip (one per
// node on a cluster); out[i] is queues[i]'s. It validates every name before it sends
// anything, and answers the first error of a reply, if any, with the counts it read.
func (b *Bus) CountsMany(ctx context.Context, queues []string) ([]Counts, error) {
	runs := make([]lua.Run, len(queues))
	for i, name := range queues {
		var err error
		if runs[i], err = CountsRun(name); err != nil {
			return nil, err
		}
	}
	if len(runs) == 0 {
		return nil, nil
	}
	replies, _ := lua.Pipeline(ctx, b.client, runs, nil)
	out := make([]Counts, len(queues))
	var first error
	for i, r := range replies {
		c, err := DecodeCounts(queues[i], r)
		if err != nil && first == nil {
			first = err
		}
		out[i] = c
	}
	return out, first
}

// WorkerStatsRun is the call [Bus.WorkerStats] sends for queue; [DecodeWorkerStats] reads its
// reply.
func WorkerStatsRun(queue string) (lua.Run, error) {
	q, err := keys.NewQueue(queue)
	if err != nil {
		return lua.Run{}, invalid("worker stats", err)
	}
	return lua.Run{Script: scWorkersRead, Keys: []string{q.Workers()}, Args: []string{itoa(maxReports)}}, nil
}

// DecodeWorkerStats reads the reply of a [WorkerStatsRun] of queue.
func DecodeWorkerStats(queue string, reply valkey.ValkeyResult) (FleetStats, error) {
	msg, err := reply.ToMessage()
	if err != nil {
		return FleetStats{}, errorFor(call{op: "worker stats", queue: queue}, translate(err))
	}
	return workerStatsReply(queue, msg)
}
