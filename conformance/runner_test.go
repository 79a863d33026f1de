package conformance_test

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// runner_test.go and the files beside it (vectors, step, match, state, pubsub, refusals) are
// the runner: they know the vector format of doc.go and nothing of bus or cache.

// script is one file of the bundle under test, as a client of another runtime sees it.
type script struct {
	name   string
	src    string
	sha    string
	header lua.Header
	role   keys.Role
}

// bundle is the scripts by name.
type bundle map[string]*script

// loadBundle reads ../lua/*.lua, the files themselves, not the bundle compiled into package lua.
func loadBundle() (bundle, error) {
	files, err := filepath.Glob(filepath.Join("..", "lua", "*.lua"))
	if err != nil {
		return nil, err
	}
	b := bundle{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		s, err := newScript(strings.TrimSuffix(filepath.Base(f), ".lua"), string(src))
		if err != nil {
			return nil, err
		}
		b[s.name] = s
	}
	return b, nil
}

func newScript(name, src string) (*script, error) {
	h, err := lua.ParseHeader(src)
	if err != nil {
		return nil, fmt.Errorf("%s.lua: %w", name, err)
	}
	sum := sha1.Sum([]byte(src))
	k, err := keys.Parse(fillForm(h.Keys[0].Name, "t"))
	if err != nil {
		return nil, fmt.Errorf("%s.lua: KEYS[1] %s: %w", name, h.Keys[0].Name, err)
	}
	return &script{name: name, src: src, sha: hex.EncodeToString(sum[:]), header: h, role: k.Role}, nil
}

// with is a copy of b in which one script's source is replaced.
func (b bundle) with(name, src string) (bundle, error) {
	out := bundle{}
	for k, v := range b {
		out[k] = v
	}
	s, err := newScript(name, src)
	if err != nil {
		return nil, err
	}
	out[name] = s
	return out, nil
}

// code is the script's error code for a class of refusal: KEYS, ARGS or TYPE.
func (s *script) code(class string) string {
	for _, e := range s.header.Errors {
		if strings.HasSuffix(e.Name, class) || class == "ARGS" && strings.HasSuffix(e.Name, "ARG") {
			return e.Name
		}
	}
	return "?" + class
}

// fillForm reads a grammar form with every name placeholder as name and every id
// placeholder as a valid id.
func fillForm(form, name string) string {
	form = strings.NewReplacer("<q>", name, "<table>", name, "<topic>", name,
		"<JOB id>", keys.JobIDFloor(time.Unix(0, 0))).Replace(form)
	return placeholderRe.ReplaceAllString(form, "x") // <id>, <key>, and any id a later type adds
}

var placeholderRe = regexp.MustCompile(`<[^<>]+>`)

// target is a server to replay on.
type target struct {
	name    string
	client  valkey.Client
	cluster bool

	once      sync.Once
	primaries []valkey.Client
	err       error
}

// nodes are the primaries: where SCAN sees every key (replicas may lag).
func (tg *target) nodes(ctx context.Context) ([]valkey.Client, error) {
	tg.once.Do(func() {
		for _, n := range tg.client.Nodes() {
			role, err := n.Do(ctx, n.B().Role().Build()).ToArray()
			if err != nil {
				tg.err = err
				return
			}
			if r, _ := role[0].ToString(); r == "master" {
				tg.primaries = append(tg.primaries, n)
			}
		}
	})
	return tg.primaries, tg.err
}

// load makes every node know every script by its SHA1 (SCRIPT LOAD), and checks the name.
func (tg *target) load(ctx context.Context, b bundle) error {
	for _, n := range tg.client.Nodes() {
		for _, s := range b {
			sha, err := n.Do(ctx, n.B().ScriptLoad().Script(s.src).Build()).ToString()
			if err != nil {
				return fmt.Errorf("SCRIPT LOAD %s: %w", s.name, err)
			}
			if sha != s.sha {
				return fmt.Errorf("SCRIPT LOAD %s answered %s, the file's SHA1 is %s", s.name, sha, s.sha)
			}
		}
	}
	return nil
}

// result is what one replay of one vector saw.
type result struct {
	fails   []string
	codes   map[string]map[string]bool // script -> error codes it answered
	called  map[string]bool            // scripts called with success
	refused []refusal                  // steps with a class, for the closing table
	derived int                        // refusals derived from successful calls
}

// refusal is one bad-input step: what was sent, what came back, and whether the keyspace
// stayed as it was.
type refusal struct {
	class, call, reply string
	before, after      int // keys under the tag, by SCAN
	same               bool
}

func (r *result) saw(script, code string) {
	if r.codes[script] == nil {
		r.codes[script] = map[string]bool{}
	}
	r.codes[script][code] = true
}

var runSeq atomic.Int64

// replay runs one vector on tg with bundle b.
func replay(ctx context.Context, tg *target, b bundle, v *vector) *result {
	r := &run{ctx: ctx, tg: tg, b: b, v: v, names: map[string]string{}, vars: map[string]string{},
		subs: map[string]*subscription{}, res: &result{codes: map[string]map[string]bool{}, called: map[string]bool{}}}
	var salt [3]byte
	_, _ = rand.Read(salt[:])
	for _, n := range v.Names {
		r.names[n] = fmt.Sprintf("cf%d.%s.%s", runSeq.Add(1), hex.EncodeToString(salt[:]), n)
	}
	defer r.close()
	for i := range v.Steps {
		r.where = fmt.Sprintf("%s step %d", v.file, i+1)
		if v.Steps[i].Note != "" {
			r.where += " (" + v.Steps[i].Note + ")"
		}
		if !r.step(&v.Steps[i]) {
			break // the steps after a failed one build on it
		}
	}
	return r.res
}

type run struct {
	ctx           context.Context
	tg            *target
	b             bundle
	v             *vector
	names         map[string]string
	jobs          []string
	vars          map[string]string
	now           int64 // server TIME (ms) at the start of the step: ${now:+N}
	before, after int64 // server TIME (ms) around the step's call
	started       time.Time
	where         string
	subs          map[string]*subscription
	res           *result
}

func (r *run) fail(format string, args ...any) {
	r.res.fails = append(r.res.fails, r.where+": "+fmt.Sprintf(format, args...))
}

// close ends the run's subscriptions and deletes its keys: every snapshot SCANs the whole
// keyspace, so keys left behind would make each later run slower than the one before.
func (r *run) close() {
	for _, s := range r.subs {
		s.cancel()
		<-s.done
	}
	for _, k := range r.scan() {
		if err := r.tg.client.Do(r.ctx, r.tg.client.B().Del().Key(k).Build()).Error(); err != nil {
			r.fail("DEL %s: %v", k, err)
		}
	}
}

func (r *run) serverMillis() int64 {
	tm, err := r.tg.client.Do(r.ctx, r.tg.client.B().Time().Build()).AsStrSlice()
	if err != nil || len(tm) != 2 {
		r.fail("TIME: %v", err)
		return 0
	}
	sec, _ := strconv.ParseInt(tm[0], 10, 64)
	usec, _ := strconv.ParseInt(tm[1], 10, 64)
	return sec*1000 + usec/1000
}
