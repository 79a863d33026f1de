package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/tables"
)

// serveConfig is what `service serve` takes from its flags.
type serveConfig struct {
	Listen, Valkey, DB, Name string
	Products                 int
	IndexDelay               time.Duration // a re-index job's stand-in for a search-engine call
}

// The names this service declares on the engine.
const (
	productsTable = "products"
	reindexQueue  = "reindex"
	reindexKind   = "product.reindex"
)

// reindexArgs is the re-index job: which product, at which version it was written.
type reindexArgs struct {
	ID      int64 `json:"id"`
	Version int64 `json:"version"`
}

// service is one instance: the catalog behind an EchoCache table, and an EchoMQ worker that
// keeps the search index in step with writes.
type service struct {
	name     string
	db       *store
	bus      *bus.Bus
	cache    *cache.Cache
	products *cache.Table[int64, Product]
	worker   *bus.Worker
}

func newService(ctx context.Context, cfg serveConfig, client valkey.Client, db *store) (*service, error) {
	s := &service{name: cfg.Name, db: db}
	var err error
	if s.bus, err = bus.New(client, bus.Config{Lease: 5 * time.Second}); err != nil {
		return nil, err
	}
	if s.cache, err = cache.New(client, cache.Config{}); err != nil {
		return nil, err
	}
	s.products, err = cache.NewTable(s.cache, tables.Spec{Name: productsTable, TTL: 10 * time.Minute, L1TTL: time.Minute, L1MaxEntries: 50_000},
		func(ctx context.Context, id int64) (Product, error) {
			p, err := db.Get(ctx, id)
			if errors.Is(err, errNoProduct) {
				return Product{}, cache.ErrNotFound
			}
			return p, err
		}, nil)
	if err != nil {
		s.cache.Close()
		return nil, err
	}
	s.worker, err = bus.NewWorker(s.bus, bus.WorkerConfig{
		Queue: reindexQueue, Concurrency: 4, Lease: 2 * time.Second, HousekeepInterval: 500 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		s.cache.Close()
		return nil, err
	}
	bus.MustHandle(s.worker, reindexKind, func(ctx context.Context, t *bus.Task[reindexArgs]) error {
		select { // the search engine's round trip
		case <-time.After(cfg.IndexDelay):
		case <-ctx.Done():
			return ctx.Err()
		}
		return db.Reindex(ctx, t.Job.ID.String(), t.Args.ID, t.Args.Version, t.Job.Token)
	}, nil)
	if err := s.worker.Start(); err != nil {
		s.cache.Close()
		return nil, err
	}
	return s, nil
}

// Read answers from the first tier that has the product, and says which.
func (s *service) Read(ctx context.Context, id int64) (Product, string, error) {
	p, tier, err := s.products.Lookup(ctx, id)
	if errors.Is(err, cache.ErrNotFound) {
		return Product{}, tier.String(), errNoProduct
	}
	return p, tier.String(), err
}

// Write commits to the database first (the source of truth), then invalidates the row in
// every instance's cache, then enqueues the re-index. A crash between the steps leaves at
// worst a cached copy that the table's coherence repairs, never a lost write.
func (s *service) Write(ctx context.Context, id int64, name string, priceCents int64) (Product, string, error) {
	p, err := s.db.Update(ctx, id, name, priceCents)
	if err != nil {
		return Product{}, "", err
	}
	if err := s.products.Invalidate(ctx, id); err != nil {
		return Product{}, "", fmt.Errorf("invalidate: %w", err)
	}
	enq, err := bus.EnqueueTask(ctx, s.bus, reindexQueue, reindexKind, reindexArgs{ID: id, Version: p.Version}, nil)
	if err != nil {
		return Product{}, "", fmt.Errorf("enqueue re-index: %w", err)
	}
	return p, enq.ID.String(), nil
}

// instanceStats is /stats: the library's counters plus what the database says of the jobs.
type instanceStats struct {
	Name  string          `json:"name"`
	Cache cache.Stats     `json:"cache"`
	Bus   bus.Counts      `json:"queue"`
	Work  bus.WorkerStats `json:"worker"`

	InvalidationsSent     int64 `json:"invalidations_sent"`
	InvalidationsReceived int64 `json:"invalidations_received"`
	PropagationMeanNanos  int64 `json:"propagation_mean_ns"`
	PropagationMaxNanos   int64 `json:"propagation_max_ns"`
	Flushes               int64 `json:"table_flushes"`
	JobsRun               int64 `json:"jobs_run"`
	JobsDone              int64 `json:"jobs_done"`
	JobsDuplicate         int64 `json:"jobs_run_more_than_once"`
	JobsReclaimed         int64 `json:"jobs_finished_on_a_later_claim"`
}

func (s *service) Stats(ctx context.Context) (*instanceStats, error) {
	st := &instanceStats{Name: s.name, Cache: s.products.Stats(), Work: s.worker.Stats()}
	var err error
	if st.Bus, err = s.bus.Counts(ctx, reindexQueue); err != nil {
		return nil, err
	}
	if st.JobsDone, st.JobsDuplicate, st.JobsReclaimed, err = s.db.JobsDone(ctx); err != nil {
		return nil, err
	}
	st.JobsRun = st.Work.Completed
	st.InvalidationsSent = st.Cache.InvalidationsSent
	st.InvalidationsReceived = st.Cache.InvalidationsReceived
	if n := st.Cache.PropagationCount; n > 0 {
		st.PropagationMeanNanos = int64(st.Cache.PropagationTotal) / n
	}
	st.PropagationMaxNanos = int64(st.Cache.PropagationMax)
	st.Flushes = st.Cache.Flushes
	return st, nil
}

func (s *service) close(ctx context.Context) {
	_ = s.worker.Close(ctx)
	s.cache.Close()
}

func serve(ctx context.Context, cfg serveConfig) error {
	client, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{cfg.Valkey}, DisableCache: true})
	if err != nil {
		return fmt.Errorf("valkey %s: %w", cfg.Valkey, err)
	}
	defer client.Close()
	db, err := openStore(ctx, cfg.DB, cfg.Products)
	if err != nil {
		return fmt.Errorf("catalog %s: %w", cfg.DB, err)
	}
	defer db.Close()
	svc, err := newService(ctx, cfg, client, db)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(svc))
	srv := &http.Server{Handler: newMux(svc, promhttp.HandlerFor(reg, promhttp.HandlerOpts{})), ReadHeaderTimeout: 5 * time.Second}
	l, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		svc.close(ctx)
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdown)
	svc.close(shutdown)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// collector exposes the library's counters to Prometheus at scrape time.
type collector struct {
	svc   *service
	descs map[string]*prometheus.Desc
	mu    sync.Mutex
}

func newCollector(svc *service) *collector {
	c := &collector{svc: svc, descs: map[string]*prometheus.Desc{}}
	for name, help := range metricHelp {
		c.descs[name] = prometheus.NewDesc("echocache_"+name, help, []string{"instance"}, nil)
	}
	return c
}

var metricHelp = map[string]string{
	"cache_l1_hits_total":            "Reads answered from the in-process L1.",
	"cache_l2_hits_total":            "Reads answered from the Valkey L2 row.",
	"cache_loads_total":              "Loader calls.",
	"cache_load_errors_total":        "Loader calls that failed.",
	"cache_invalidations_sent_total": "Invalidations this instance published.",
	"cache_invalidations_recv_total": "Invalidations this instance received.",
	"cache_table_flushes_total":      "Whole-table L1 flushes (gaps, epochs, reconciles).",
	"bus_jobs_completed_total":       "Jobs this instance's worker completed.",
	"bus_jobs_failed_total":          "Handler failures in this instance's worker.",
	"bus_jobs_stale_total":           "Outcomes answered EMQSTALE.",
	"bus_queue_pending":              "Jobs pending in the re-index queue.",
	"bus_queue_active":               "Jobs leased in the re-index queue.",
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := c.svc.Stats(ctx)
	if err != nil {
		return
	}
	values := map[string]struct {
		v float64
		t prometheus.ValueType
	}{
		"cache_l1_hits_total":            {float64(st.Cache.L1Hits), prometheus.CounterValue},
		"cache_l2_hits_total":            {float64(st.Cache.L2Hits), prometheus.CounterValue},
		"cache_loads_total":              {float64(st.Cache.Loads), prometheus.CounterValue},
		"cache_load_errors_total":        {float64(st.Cache.LoadErrors), prometheus.CounterValue},
		"cache_invalidations_sent_total": {float64(st.InvalidationsSent), prometheus.CounterValue},
		"cache_invalidations_recv_total": {float64(st.InvalidationsReceived), prometheus.CounterValue},
		"cache_table_flushes_total":      {float64(st.Flushes), prometheus.CounterValue},
		"bus_jobs_completed_total":       {float64(st.Work.Completed), prometheus.CounterValue},
		"bus_jobs_failed_total":          {float64(st.Work.Failed), prometheus.CounterValue},
		"bus_jobs_stale_total":           {float64(st.Work.Stale), prometheus.CounterValue},
		"bus_queue_pending":              {float64(st.Bus.Pending), prometheus.GaugeValue},
		"bus_queue_active":               {float64(st.Bus.Active), prometheus.GaugeValue},
	}
	names := make([]string, 0, len(values))
	for n := range values {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ch <- prometheus.MustNewConstMetric(c.descs[n], values[n].t, values[n].v, c.svc.name)
	}
}
