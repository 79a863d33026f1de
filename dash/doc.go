// Package dash is EchoCache's web dashboard: an [http.Handler] a service mounts under a
// prefix, showing every queue of the bus (counts per set, throughput over the last minutes)
// and every table of the cache (reads by tier, loads, invalidations, propagation delay) on
// one page, with a page per queue (a tab per set, paged by cursor and mint-time range, the
// periodic schedules, and on a queue with lane state a Lanes tab: the queue's rate and
// lane defaults, then a page of one lane index (ready, held back, with claimed jobs, with
// limits) with each lane's limits in force, waiting and claimed jobs, paused and held-until),
// per job (state, attempts, lease deadline, payload) and per table
// (tier shares, coherence flushes and why).
//
//	d, err := dash.New(dash.Config{Bus: b, Prefix: "/echo"})
//	if err != nil { ... }
//	defer d.Close()
//	mux.Handle("/echo/", d)
//
// Everything is embedded: server-rendered HTML (html/template), one stylesheet, one small
// plain script for live refresh and confirmations; no build step, no CDN, no external font.
// The pages work without the script.
//
// # Actions and their safety
//
// Retry and purge of dead jobs (one or all), pause and resume of a queue or of a lane, and
// cancel are POSTs only;
// nothing changes on GET. Each one passes, in order: [Config].Authorize with its [Action],
// [Config].ReadOnly (which refuses every POST with 403), the CSRF checks (the browser's
// Sec-Fetch-Site and Origin, then a token in the form, an HMAC of a per-browser cookie under
// [Config].Secret), and a confirmation step.
//
// # Cost
//
// The overview reads the two registries and then every queue's counts and every table's
// stats in ONE pipelined round trip (see bus.CountsRun and cache.StatsRun); the live refresh
// (GET live?q=...&t=...) is that one round trip alone, for the queues and tables the page
// shows. Throughput comes from a sampler that reads every queue's published worker stats in
// one round trip every [Config].SampleEvery into a ring of [Config].Samples per queue.
package dash
