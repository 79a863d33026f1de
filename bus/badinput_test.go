package bus_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// TestInvalidQueueNames: every verb refuses a queue name the grammar refuses, before any
// round trip, with an error that is both bus.ErrInvalid and keys.ErrInvalid and names the rule.
func TestInvalidQueueNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := valkeytest.Shared(t).Client(t)
	b := newBus(t, c, bus.Config{})
	id := keys.NewJobID()
	verbs := map[string]func(q string) error{
		"enqueue": func(q string) error { _, err := b.Enqueue(ctx, q, []byte("x"), nil); return err },
		"batch":   func(q string) error { _, err := b.EnqueueBatch(ctx, q, payloads(2, "x"), nil); return err },
		"claim":   func(q string) error { _, err := b.Claim(ctx, q, nil); return err },
		"complete": func(q string) error {
			return b.Complete(ctx, bus.Job{Queue: q, ID: id, Token: 1}, nil)
		},
		"fail":    func(q string) error { _, err := b.Fail(ctx, bus.Job{Queue: q, ID: id, Token: 1}, nil); return err },
		"extend":  func(q string) error { _, err := b.Extend(ctx, bus.Job{Queue: q, ID: id, Token: 1}, nil); return err },
		"snooze":  func(q string) error { _, err := b.Snooze(ctx, bus.Job{Queue: q, ID: id, Token: 1}, 0, nil); return err },
		"promote": func(q string) error { _, err := b.Promote(ctx, q, nil); return err },
		"reap":    func(q string) error { _, err := b.Reap(ctx, q, nil); return err },
		"pause":   func(q string) error { return b.Pause(ctx, q) },
		"resume":  func(q string) error { return b.Resume(ctx, q) },
		"cancel":  func(q string) error { _, err := b.Cancel(ctx, q, id); return err },
		"retry":   func(q string) error { _, err := b.RetryDead(ctx, q, id); return err },
		"purge":   func(q string) error { _, err := b.PurgeDead(ctx, q, nil); return err },
		"counts":  func(q string) error { _, err := b.Counts(ctx, q); return err },
		"browse":  func(q string) error { _, err := b.Browse(ctx, q, nil); return err },
		"lookup":  func(q string) error { _, err := b.Lookup(ctx, q, id); return err },
		"max":     func(q string) error { return b.SetMaxAttempts(ctx, q, 3) },
		"dead":    func(q string) error { return b.SetDeadLimit(ctx, q, 3) },
		"drop":    func(q string) error { _, err := b.DropQueue(ctx, q, nil); return err },
		"publish": func(q string) error { _, err := b.Publish(ctx, q, []byte("x")); return err },
		"subscribe": func(q string) error {
			_, err := b.Subscribe(ctx, []string{q}, func(bus.Event) {})
			return err
		},
	}
	for _, tc := range []struct{ name, queue, rule string }{
		{"empty", "", "empty"},
		{"open brace", "ord{ers", "byte"},
		{"close brace", "ord}ers", "byte"},
		{"colon", "a:b", "byte"},
		{"space", "a b", "byte"},
		{"control byte", "a\x00b", "byte"},
		{"too long", strings.Repeat("q", 65), "65 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for verb, call := range verbs {
				err := call(tc.queue)
				require.ErrorIs(t, err, bus.ErrInvalid, verb)
				require.ErrorIs(t, err, keys.ErrInvalid, verb)
				require.ErrorContains(t, err, tc.rule, verb)
			}
		})
	}
}

// TestBadInput: unbranded ids, oversized payloads and wrong-type keys give clear errors and
// leave no partial writes, checked by scanning the keyspace.
func TestBadInput(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx := context.Background()
		c := tg.Client
		name := valkeytest.TestName(t)
		q := keys.MustQueue(name)
		b := newBus(t, c, bus.Config{MaxPayload: 64})
		// keyspace is the queue's keys: after a refused call it must be what it was.
		keyspace := func() []string { return scanAll(t, c, "{"+name+"}") }

		t.Run("unbranded ids", func(t *testing.T) {
			for verb, err := range map[string]error{
				"complete": b.Complete(ctx, bus.Job{Queue: name, Token: 1}, nil),
				"cancel":   second(b.Cancel(ctx, name, keys.JobID{})),
				"lookup":   second(b.Lookup(ctx, name, keys.JobID{})),
				"retry":    second(b.RetryDead(ctx, name, keys.JobID{})),
				"purge":    second(b.PurgeDead(ctx, name, &bus.PurgeOpts{IDs: []keys.JobID{{}}})),
			} {
				require.ErrorIs(t, err, bus.ErrInvalid, verb)
				require.ErrorContains(t, err, "not branded", verb)
			}
			// A client of another language can send any bytes: the scripts check the brand.
			for _, bad := range []string{"42", "JOB_", "job_01ARZ3NDEKTSV4RRFFQ69G5FAV", "JOB_01ARZ3NDEKTSV4RRFFQ69G5FAU", "JOB_81ARZ3NDEKTSV4RRFFQ69G5FAV"} {
				err := lua.Get("complete").Exec(ctx, c, []string{q.Active()}, []string{bad, "1", "0", ""}).Error()
				require.ErrorContains(t, err, "EMQARGS ARGV[1] is not a JOB id", bad)
				err = lua.Get("enqueue").Exec(ctx, c, []string{q.Pending(), q.Schedule(), q.Meta(), q.Wake()},
					[]string{"0", "0", "0", "0", bad, "p", ""}).Error()
				require.ErrorContains(t, err, "EMQARGS", bad)
			}
			require.Empty(t, keyspace())
		})

		t.Run("existing id", func(t *testing.T) {
			// Ids are minted by the client; a client that reuses one is refused, all or nothing.
			id := keys.NewJobID().String()
			enqueue := func(ids ...string) error {
				args := []string{"0", "0", "0", "0"}
				for _, id := range ids {
					args = append(args, id, "p", "")
				}
				return lua.Get("enqueue").Exec(ctx, c, []string{q.Pending(), q.Schedule(), q.Meta(), q.Wake()}, args).Error()
			}
			require.NoError(t, enqueue(id))
			before := snapshot(t, tg, name)
			require.ErrorContains(t, enqueue(keys.NewJobID().String(), id), "EMQEXISTS")
			require.Equal(t, before, snapshot(t, tg, name), "nothing written: not even the call's first job")
			for _, k := range scanAll(t, c, "{"+name+"}") {
				require.NoError(t, c.Do(ctx, c.B().Del().Key(k).Build()).Error())
			}
		})

		t.Run("oversized payloads", func(t *testing.T) {
			_, err := b.Enqueue(ctx, name, bytes.Repeat([]byte("x"), 65), nil)
			require.ErrorIs(t, err, bus.ErrTooLarge)
			// One oversized job refuses its whole batch.
			jobs := payloads(3, "ok")
			jobs[2].Payload = bytes.Repeat([]byte("x"), 65)
			_, err = b.EnqueueBatch(ctx, name, jobs, nil)
			require.ErrorIs(t, err, bus.ErrTooLarge)
			_, err = b.Publish(ctx, name, bytes.Repeat([]byte("x"), 65))
			require.ErrorIs(t, err, bus.ErrTooLarge)
			// The script refuses it too, after the first job passed its checks.
			err = lua.Get("enqueue").Exec(ctx, c, []string{q.Pending(), q.Schedule(), q.Meta(), q.Wake()},
				[]string{"0", "0", "0", "4", keys.NewJobID().String(), "four", "", keys.NewJobID().String(), "fiver", ""}).Error()
			require.ErrorContains(t, err, "EMQTOOBIG")
			// The default limit is 512 KiB.
			def := newBus(t, c, bus.Config{})
			_, err = def.Enqueue(ctx, name, make([]byte, bus.DefaultMaxPayload+1), nil)
			require.ErrorIs(t, err, bus.ErrTooLarge)
			require.ErrorContains(t, err, "524288")
			require.Empty(t, keyspace())
		})

		t.Run("wrong-type keys", func(t *testing.T) {
			ok, err := b.Enqueue(ctx, name, []byte("fine"), nil)
			require.NoError(t, err)
			jobs, err := b.Claim(ctx, name, nil)
			require.NoError(t, err)
			require.Len(t, jobs, 1)
			guard, err := q.Unique("taken")
			require.NoError(t, err)
			for _, tc := range []struct {
				name string
				key  string
				call func() error
			}{
				{"pending is a string", q.Pending(), func() error { _, err := b.Enqueue(ctx, name, []byte("x"), nil); return err }},
				{"meta is a string", q.Meta(), func() error { _, err := b.Claim(ctx, name, nil); return err }},
				{"wake is a string", q.Wake(), func() error { _, err := b.Fail(ctx, jobs[0], nil); return err }},
				{"dead is a string", q.Dead(), func() error { _, err := b.Reap(ctx, name, nil); return err }},
				{"guard is a string holding no id", guard, func() error {
					_, err := b.Enqueue(ctx, name, []byte("x"), &bus.EnqueueOpts{UniqueKey: "taken"})
					return err
				}},
			} {
				before := snapshot(t, tg, name)
				// Plant the wrong type: a string where the grammar says zset, hash or list
				// (the guard is a string, but must hold a JOB id).
				require.NoError(t, c.Do(ctx, c.B().Del().Key(tc.key).Build()).Error())
				require.NoError(t, c.Do(ctx, c.B().Set().Key(tc.key).Value("junk").Build()).Error())
				err := tc.call()
				require.ErrorIs(t, err, bus.ErrWrongType, tc.name)
				require.ErrorContains(t, err, tc.key, tc.name)
				require.NoError(t, c.Do(ctx, c.B().Del().Key(tc.key).Build()).Error())
				require.Equal(t, before.without(tc.key), snapshot(t, tg, name).without(tc.key), "%s: nothing was written", tc.name)
			}
			// A job row of the wrong type: the fenced verbs refuse it too.
			row, err := q.Job(jobs[0].ID)
			require.NoError(t, err)
			require.NoError(t, c.Do(ctx, c.B().Del().Key(row).Build()).Error())
			require.NoError(t, c.Do(ctx, c.B().Set().Key(row).Value("junk").Build()).Error())
			require.ErrorIs(t, b.Complete(ctx, jobs[0], nil), bus.ErrWrongType)
			_, err = b.Lookup(ctx, name, ok.ID)
			require.ErrorIs(t, err, bus.ErrWrongType)
		})
	})
}

func second[T any](_ T, err error) error { return err }

// state is a queue's keyspace: each key with its type and content.
type state map[string]string

func (s state) without(key string) state {
	out := state{}
	for k, v := range s {
		if k != key {
			out[k] = v
		}
	}
	return out
}

// snapshot dumps every key of queue name: type and content (scores included for sets).
func snapshot(t *testing.T, tg valkeytest.Target, name string) state {
	t.Helper()
	ctx := context.Background()
	c := tg.Client
	out := state{}
	for _, k := range scanAll(t, c, "{"+name+"}") {
		typ, err := c.Do(ctx, c.B().Type().Key(k).Build()).ToString()
		require.NoError(t, err)
		var v any
		switch typ {
		case "zset":
			v, err = c.Do(ctx, c.B().Zrange().Key(k).Min("0").Max("-1").Withscores().Build()).AsZScores()
		case "hash":
			v, err = c.Do(ctx, c.B().Hgetall().Key(k).Build()).AsStrMap()
		case "list":
			v, err = c.Do(ctx, c.B().Lrange().Key(k).Start(0).Stop(-1).Build()).AsStrSlice()
		case "string":
			v, err = c.Do(ctx, c.B().Get().Key(k).Build()).ToString()
		}
		require.NoError(t, err)
		out[k] = typ + ":" + fmtAny(v)
	}
	return out
}

func fmtAny(v any) string { return fmt.Sprint(v) }
