package dash

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
)

// ErrInvalid is wrapped by the errors of [New] about its Config; they name the field.
var ErrInvalid = errors.New("dash: invalid")

// Defaults of [Config].
const (
	// DefaultSampleEvery is Config.SampleEvery: how often the sampler reads the workers'
	// published counters.
	DefaultSampleEvery = 5 * time.Second
	// DefaultSamples is Config.Samples: how many samples each queue's ring keeps (5 minutes
	// at the default interval).
	DefaultSamples = 60
	// DefaultMaxQueues is Config.MaxQueues: how many queues the sampler and the overview
	// follow.
	DefaultMaxQueues = 1000
	// DefaultPageSize is how many jobs a page of a queue's set lists.
	DefaultPageSize = 50
)

// Config configures a [Dashboard]. Bus is required; a zero field means its default.
type Config struct {
	// Bus is the EchoMQ bus whose queues the dashboard shows and acts on. Required.
	Bus *bus.Bus
	// Client reads the registries, the counts and the published stats. Default
	// Bus.Client().
	Client valkey.Client
	// Prefix is the path the dashboard is mounted under, without a trailing slash, as in
	// mux.Handle("/echo/", d) with Prefix "/echo". Default "" (the root).
	Prefix string
	// Title is shown in the header and the page titles. Default "EchoCache".
	Title string
	// ReadOnly hides every action and refuses every POST with 403 Forbidden.
	ReadOnly bool
	// Authorize, when set, is asked before each request is served: with ActionView for
	// every page and read, and with the action itself for every POST. false answers 403
	// Forbidden. Default: every request is allowed (put the dashboard behind your own
	// authentication).
	Authorize func(*http.Request, Action) bool
	// Secret keys the CSRF tokens (HMAC-SHA256 of a per-browser cookie). Give every
	// instance of a service the same secret when a load balancer spreads one browser's
	// requests over them. Default: 32 random bytes drawn by New. At least 16 bytes.
	Secret []byte
	// SampleEvery is how often the sampler reads the workers' counters for throughput.
	// Default 5 s ([DefaultSampleEvery]); the workers publish every
	// WorkerConfig.StatsInterval (5 s by default), so a shorter interval sees no more.
	SampleEvery time.Duration
	// Samples is the length of each queue's ring of throughput samples. Default 60
	// ([DefaultSamples]).
	Samples int
	// MaxQueues bounds the queues the overview lists and the sampler follows (the first by
	// name). Default 1000 ([DefaultMaxQueues]).
	MaxQueues int
}

// Action is what a request asks of the dashboard, as [Config].Authorize sees it.
type Action string

// The actions. Every page and read is ActionView; each POST is one of the others.
const (
	ActionView   Action = "view"
	ActionRetry  Action = "retry"  // dead jobs back to pending (one or all)
	ActionPurge  Action = "purge"  // dead jobs deleted (one or all)
	ActionPause  Action = "pause"  // a queue stops handing out work
	ActionResume Action = "resume" // a paused queue hands out work again
	ActionCancel Action = "cancel" // a waiting job deleted (or an active one asked to stop)
	// ActionPauseLane stops a lane of a queue from giving work; its claimed jobs run on.
	ActionPauseLane Action = "pause-lane"
	// ActionResumeLane lets a paused lane give work again.
	ActionResumeLane Action = "resume-lane"
)

// Dashboard is the web dashboard: an [http.Handler] that serves the pages, the live counts,
// the assets and the actions. Close stops its sampler.
type Dashboard struct {
	cfg     Config
	client  valkey.Client
	mux     *http.ServeMux
	csrf    *csrf
	pages   *pages
	sampler *sampler
	cancel  context.CancelFunc
	done    chan struct{}
	once    sync.Once
}

// New validates cfg, fills its defaults and starts the throughput sampler. The dashboard
// serves under cfg.Prefix: mount it with mux.Handle(cfg.Prefix+"/", d).
func New(cfg Config) (*Dashboard, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	client := cfg.Client
	if client == nil {
		client = cfg.Bus.Client()
	}
	p, err := loadPages()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &Dashboard{
		cfg: cfg, client: client, pages: p, csrf: newCSRF(cfg.Secret, cfg.Prefix),
		sampler: newSampler(client, cfg.Bus, cfg.Samples, cfg.MaxQueues),
		cancel:  cancel, done: make(chan struct{}),
	}
	d.routes()
	go func() {
		defer close(d.done)
		d.sampler.run(ctx, cfg.SampleEvery)
	}()
	return d, nil
}

// Close stops the sampler and waits for it. The handler keeps serving pages, without new
// throughput samples. Close may be called more than once.
func (d *Dashboard) Close() {
	d.once.Do(d.cancel)
	<-d.done
}

// Validate reports what [New] would refuse in c (an error wrapping [ErrInvalid]), without
// starting anything.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

func (c Config) withDefaults() (Config, error) {
	if c.Bus == nil {
		return c, fmt.Errorf("%w: Config.Bus is nil", ErrInvalid)
	}
	if c.Prefix != "" && (!strings.HasPrefix(c.Prefix, "/") || strings.HasSuffix(c.Prefix, "/")) {
		return c, fmt.Errorf("%w: Config.Prefix %q: want \"\" or a path like /echo (a leading slash, no trailing one)", ErrInvalid, c.Prefix)
	}
	switch {
	case c.SampleEvery < 0:
		return c, fmt.Errorf("%w: Config.SampleEvery %v is negative", ErrInvalid, c.SampleEvery)
	case c.Samples < 0:
		return c, fmt.Errorf("%w: Config.Samples %d is negative", ErrInvalid, c.Samples)
	case c.MaxQueues < 0:
		return c, fmt.Errorf("%w: Config.MaxQueues %d is negative", ErrInvalid, c.MaxQueues)
	case c.Secret != nil && len(c.Secret) < 16:
		return c, fmt.Errorf("%w: Config.Secret has %d bytes; at least 16", ErrInvalid, len(c.Secret))
	}
	if c.Title == "" {
		c.Title = "EchoCache"
	}
	if c.SampleEvery == 0 {
		c.SampleEvery = DefaultSampleEvery
	}
	if c.Samples == 0 {
		c.Samples = DefaultSamples
	}
	if c.MaxQueues == 0 {
		c.MaxQueues = DefaultMaxQueues
	}
	if c.Secret == nil {
		c.Secret = make([]byte, 32)
		rand.Read(c.Secret)
	}
	return c, nil
}

// ServeHTTP serves the dashboard: the request's path must start with Config.Prefix.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Referrer-Policy", "same-origin")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'")
	if d.cfg.Prefix == "" {
		d.mux.ServeHTTP(w, r)
		return
	}
	http.StripPrefix(d.cfg.Prefix, d.mux).ServeHTTP(w, r)
}

// routes registers every page, read and action.
func (d *Dashboard) routes() {
	m := http.NewServeMux()
	m.Handle("GET /static/", d.view(http.StripPrefix("/static/", staticFiles())))
	m.Handle("GET /{$}", d.view(http.HandlerFunc(d.overview)))
	m.Handle("GET /live", d.view(http.HandlerFunc(d.live)))
	m.Handle("GET /queues/{queue}", d.view(http.HandlerFunc(d.queuePage)))
	m.Handle("GET /queues/{queue}/jobs/{id}", d.view(http.HandlerFunc(d.jobPage)))
	m.Handle("GET /tables/{table}", d.view(http.HandlerFunc(d.tablePage)))
	m.Handle("POST /queues/{queue}/pause", d.act(ActionPause, d.pause))
	m.Handle("POST /queues/{queue}/resume", d.act(ActionResume, d.resume))
	m.Handle("POST /queues/{queue}/retry", d.act(ActionRetry, d.retry))
	m.Handle("POST /queues/{queue}/purge", d.act(ActionPurge, d.purge))
	m.Handle("POST /queues/{queue}/jobs/{id}/cancel", d.act(ActionCancel, d.cancelJob))
	// The lane goes in the form, not the path: names may be "." and "..", dot segments a
	// browser resolves, and "lanes/../pause" would be the queue's own pause.
	m.Handle("POST /queues/{queue}/lanes/pause", d.act(ActionPauseLane, d.pauseLane))
	m.Handle("POST /queues/{queue}/lanes/resume", d.act(ActionResumeLane, d.resumeLane))
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		d.fail(w, r, http.StatusNotFound, "no such page: "+r.URL.Path)
	})
	d.mux = m
}

// view guards a read: Authorize with ActionView.
func (d *Dashboard) view(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.cfg.Authorize != nil && !d.cfg.Authorize(r, ActionView) {
			d.fail(w, r, http.StatusForbidden, "not authorized to view the dashboard")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// url is the dashboard's path for a path below it ("/queues/q").
func (d *Dashboard) url(p string) string { return d.cfg.Prefix + p }
