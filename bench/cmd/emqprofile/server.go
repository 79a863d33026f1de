package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/lua"
)

// serverStats is what the profile reads from the server around a drain: INFO commandstats
// (calls and µs per command) and INFO cpu (seconds of CPU of the whole process and of its
// main thread).
type serverStats struct {
	calls   map[string]int64
	usec    map[string]int64
	cpu     float64 // used_cpu_sys + used_cpu_user
	cpuMain float64 // used_cpu_sys_main_thread + used_cpu_user_main_thread
}

func readServer(ctx context.Context, c valkey.Client) (serverStats, error) {
	s := serverStats{calls: map[string]int64{}, usec: map[string]int64{}}
	info, err := c.Do(ctx, c.B().Info().Section("commandstats").Section("cpu").Build()).ToString()
	if err != nil {
		return s, fmt.Errorf("INFO: %w", err)
	}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		if cmd, ok := strings.CutPrefix(name, "cmdstat_"); ok {
			for _, kv := range strings.Split(rest, ",") {
				k, v, _ := strings.Cut(kv, "=")
				n, _ := strconv.ParseInt(v, 10, 64)
				switch k {
				case "calls":
					s.calls[cmd] = n
				case "usec":
					s.usec[cmd] = n
				}
			}
			continue
		}
		v, _ := strconv.ParseFloat(rest, 64)
		switch name {
		case "used_cpu_sys", "used_cpu_user":
			s.cpu += v
		case "used_cpu_sys_main_thread", "used_cpu_user_main_thread":
			s.cpuMain += v
		}
	}
	return s, nil
}

// scriptCost is the server time of one script over a drain, from the slow log.
type scriptCost struct {
	calls int64
	usec  int64
}

// tracer reads the server's slow log with a threshold of 0 µs while a drain runs, so that every
// EVALSHA is logged with its duration and its arguments, the script's SHA1 among them: INFO
// commandstats has one line for all of EVALSHA, the slow log tells the scripts apart. It reads
// and resets the log in one MULTI every few milliseconds, so no entry is read twice or lost.
type tracer struct {
	c     valkey.Client
	names map[string]string // SHA1 -> script name
	stop  chan struct{}
	done  chan error
	cost  map[string]*scriptCost
	saved []string // the slowlog-* settings to restore
}

func startTracer(ctx context.Context, c valkey.Client) (*tracer, error) {
	t := &tracer{c: c, names: map[string]string{}, stop: make(chan struct{}), done: make(chan error, 1), cost: map[string]*scriptCost{}}
	for _, s := range lua.All() {
		t.names[s.SHA1] = s.Name
	}
	for _, p := range []string{"slowlog-log-slower-than", "slowlog-max-len"} {
		kv, err := c.Do(ctx, c.B().ConfigGet().Parameter(p).Build()).AsStrMap()
		if err != nil {
			return nil, fmt.Errorf("CONFIG GET %s: %w", p, err)
		}
		t.saved = append(t.saved, p, kv[p])
	}
	if err := c.Do(ctx, c.B().ConfigSet().ParameterValue().ParameterValue("slowlog-max-len", "1000000").ParameterValue("slowlog-log-slower-than", "0").Build()).Error(); err != nil {
		return nil, fmt.Errorf("CONFIG SET slowlog: %w", err)
	}
	if err := c.Do(ctx, c.B().SlowlogReset().Build()).Error(); err != nil {
		return nil, err
	}
	go func() { t.done <- t.run() }()
	return t, nil
}

func (t *tracer) run() error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-t.stop:
			return t.drain()
		}
		if err := t.drain(); err != nil {
			return err
		}
	}
}

// drain reads and resets the slow log atomically and adds its EVALSHA entries to cost.
func (t *tracer) drain() error {
	ctx := context.Background()
	c := t.c
	var entries []valkey.ValkeyMessage
	err := c.Dedicated(func(dc valkey.DedicatedClient) error {
		res := dc.DoMulti(ctx, dc.B().Multi().Build(), dc.B().SlowlogGet().Count(-1).Build(), dc.B().SlowlogReset().Build(), dc.B().Exec().Build())
		out, err := res[3].ToArray()
		if err != nil {
			return fmt.Errorf("SLOWLOG in MULTI: %w", err)
		}
		entries, err = out[0].ToArray()
		return err
	})
	if err != nil {
		return err
	}
	for _, e := range entries {
		f, err := e.ToArray()
		if err != nil || len(f) < 4 {
			continue
		}
		us, _ := f[2].AsInt64()
		args, _ := f[3].AsStrSlice()
		if len(args) < 2 {
			continue
		}
		var name string
		switch strings.ToUpper(args[0]) {
		case "EVALSHA":
			name = t.names[args[1]]
			if name == "" {
				name = "evalsha " + args[1][:min(8, len(args[1]))]
			}
		case "EVAL":
			name = "eval (script load)"
		default:
			continue
		}
		sc := t.cost[name]
		if sc == nil {
			sc = &scriptCost{}
			t.cost[name] = sc
		}
		sc.calls++
		sc.usec += us
	}
	return nil
}

// finish stops the tracer, reads what is left and restores the slow log's settings.
func (t *tracer) finish(ctx context.Context) (map[string]*scriptCost, error) {
	close(t.stop)
	err := <-t.done
	cmd := t.c.B().ConfigSet().ParameterValue()
	for i := 0; i < len(t.saved); i += 2 {
		cmd = cmd.ParameterValue(t.saved[i], t.saved[i+1])
	}
	if rerr := t.c.Do(ctx, cmd.Build()).Error(); rerr != nil && err == nil {
		err = rerr
	}
	_ = t.c.Do(ctx, t.c.B().SlowlogReset().Build()).Error()
	return t.cost, err
}
