package bus

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/keys"
)

// The reads of schedule rows need no script: plain commands, pipelined.

// periodicNames reads the queue's index of schedule names.
func (b *Bus) periodicNames(ctx context.Context, q keys.Queue) ([]string, error) {
	names, err := b.client.Do(ctx, b.client.B().Zrange().Key(q.Periodics()).Min("0").Max("-1").Build()).AsStrSlice()
	return names, translate(err)
}

// periodicRowData is one schedule row as read.
type periodicRowData struct {
	name    string
	spec    periodicSpec
	ticks   *ticks
	payload []byte
	last    int64
	paused  bool
	err     error // the row does not decode
}

// declared is the row's declaration.
func (r *periodicRowData) declared() Periodic {
	p := Periodic{Name: r.name, Cron: r.spec.Cron, Zone: r.spec.Zone, Every: time.Duration(r.spec.EveryMs) * time.Millisecond,
		Missed: r.ticks.missed, CatchUp: r.spec.CatchUp}
	if kind, body, err := ParseEnvelope(r.payload); r.spec.Kind != "" && err == nil && kind == r.spec.Kind {
		p.Kind, p.Args = kind, json.RawMessage(body)
	} else {
		p.Payload = r.payload
	}
	return p
}

// periodicRows reads the rows of names with HGETALL in one round trip, preceded by TIME when
// withTime is set. A name whose row is gone, or that is no valid name (written into the index
// by hand), is left out; a row that does not decode, or whose key holds another type, comes
// back with its err set.
func (b *Bus) periodicRows(ctx context.Context, q keys.Queue, names []string, withTime bool) ([]periodicRowData, time.Time, error) {
	cmds := make(valkey.Commands, 0, len(names)+1)
	if withTime {
		cmds = append(cmds, b.client.B().Time().Build())
	}
	valid := make([]string, 0, len(names))
	for _, name := range names {
		if row, err := q.Periodic(name); err == nil {
			valid = append(valid, name)
			cmds = append(cmds, b.client.B().Hgetall().Key(row).Build())
		}
	}
	names = valid
	if len(cmds) == 0 {
		return nil, time.Time{}, nil
	}
	res := b.client.DoMulti(ctx, cmds...)
	var now time.Time
	if withTime {
		var err error
		if now, err = serverTime(res[0]); err != nil {
			return nil, time.Time{}, err
		}
		res = res[1:]
	}
	out := make([]periodicRowData, 0, len(names))
	for i, name := range names {
		m, err := res[i].AsStrMap()
		if _, refused := valkey.IsValkeyErr(err); refused {
			// The server's answer for this row alone (a key of another type): the row is
			// reported with its error, the others are read and fired as usual.
			out = append(out, periodicRowData{name: name, err: translate(err)})
			continue
		}
		if err != nil {
			return nil, time.Time{}, translate(err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, decodeRow(name, m))
	}
	return out, now, nil
}

// decodeRow reads a schedule row's fields.
func decodeRow(name string, m map[string]string) periodicRowData {
	r := periodicRowData{name: name, payload: []byte(m["payload"]), paused: m["paused"] == "1"}
	var err error
	if r.spec, r.ticks, err = parseSpec(m["spec"]); err != nil {
		r.err = err
		return r
	}
	if r.last, err = strconv.ParseInt(m["last"], 10, 64); err != nil {
		r.err = fmt.Errorf("last %q is not an integer", m["last"])
	}
	return r
}

// serverTime reads a TIME reply.
func serverTime(r valkey.ValkeyResult) (time.Time, error) {
	tm, err := r.AsStrSlice()
	if err != nil {
		return time.Time{}, translate(err)
	}
	if len(tm) != 2 {
		return time.Time{}, protocolError("time", "reply %v", tm)
	}
	sec, err1 := strconv.ParseInt(tm[0], 10, 64)
	usec, err2 := strconv.ParseInt(tm[1], 10, 64)
	if err1 != nil || err2 != nil {
		return time.Time{}, protocolError("time", "reply %v", tm)
	}
	return time.Unix(sec, usec*1000), nil
}
