package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite", pure Go
)

// Product is one row of the catalog: the source of truth the cache copies.
type Product struct {
	ID         int64  `json:"id"`
	Name       string `json:"name"`
	PriceCents int64  `json:"price_cents"`
	Version    int64  `json:"version"`
}

// errNoProduct is the store's not-found.
var errNoProduct = errors.New("no such product")

// store is the SQLite catalog shared by every instance of the service (one file, WAL mode, so
// two processes read and write it at once).
type store struct{ db *sql.DB }

func openStore(ctx context.Context, path string, seed int) (*store, error) {
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(8)
	s := &store{db: db}
	if err := s.init(ctx, seed); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func (s *store) Close() error { return s.db.Close() }

// init creates the schema and seeds the catalog on first start. Two instances starting at
// once both try; the transaction makes one of them a no-op.
func (s *store) init(ctx context.Context, seed int) error {
	for _, stmt := range []string{
		`CREATE TABLE IF NOT EXISTS products (
			id INTEGER PRIMARY KEY, name TEXT NOT NULL, price_cents INTEGER NOT NULL, version INTEGER NOT NULL)`,
		// The search index the re-index jobs maintain: one row per product, at the version
		// last indexed, with how many times a job ran for it (duplicates show up here).
		`CREATE TABLE IF NOT EXISTS search_index (
			product_id INTEGER PRIMARY KEY, version INTEGER NOT NULL, tokens TEXT NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS jobs_done (
			job_id TEXT PRIMARY KEY, product_id INTEGER NOT NULL, version INTEGER NOT NULL, runs INTEGER NOT NULL,
			token INTEGER NOT NULL)`,
	} {
		if _, err := s.db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("schema: %w", err)
		}
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM products`).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	ins, err := tx.PrepareContext(ctx, `INSERT INTO products (id, name, price_cents, version) VALUES (?, ?, ?, 1)`)
	if err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(1, 1))
	adjectives := []string{"red", "quiet", "swift", "brass", "linen", "polar", "amber", "tidy"}
	nouns := []string{"kettle", "lamp", "chair", "notebook", "bicycle", "teapot", "scarf", "clock"}
	for id := 1; id <= seed; id++ {
		name := adjectives[r.IntN(len(adjectives))] + " " + nouns[r.IntN(len(nouns))] + fmt.Sprintf(" #%d", id)
		if _, err := ins.ExecContext(ctx, id, name, 100+r.IntN(100_000)); err != nil {
			return fmt.Errorf("seed: %w", err)
		}
	}
	return tx.Commit()
}

func (s *store) Get(ctx context.Context, id int64) (Product, error) {
	var p Product
	err := s.db.QueryRowContext(ctx, `SELECT id, name, price_cents, version FROM products WHERE id = ?`, id).
		Scan(&p.ID, &p.Name, &p.PriceCents, &p.Version)
	if errors.Is(err, sql.ErrNoRows) {
		return Product{}, errNoProduct
	}
	return p, err
}

// Update writes name and price and bumps the version, returning the row as committed.
func (s *store) Update(ctx context.Context, id int64, name string, priceCents int64) (Product, error) {
	p := Product{ID: id, Name: name, PriceCents: priceCents}
	err := s.db.QueryRowContext(ctx,
		`UPDATE products SET name = ?, price_cents = ?, version = version + 1 WHERE id = ? RETURNING version`,
		name, priceCents, id).Scan(&p.Version)
	if errors.Is(err, sql.ErrNoRows) {
		return Product{}, errNoProduct
	}
	return p, err
}

// Reindex is the re-index job's effect: the index row moves to the product's current version
// (never backwards), and the job is recorded as done, counting every run of it and keeping
// the highest claim token (above 1: an earlier holder lost the job, e.g. by dying).
func (s *store) Reindex(ctx context.Context, jobID string, id, version, token int64) error {
	p, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	if _, err := tx.ExecContext(ctx, `INSERT INTO search_index (product_id, version, tokens) VALUES (?, ?, ?)
		ON CONFLICT(product_id) DO UPDATE SET version = excluded.version, tokens = excluded.tokens
		WHERE excluded.version > search_index.version`, id, p.Version, strings.ToLower(p.Name)); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO jobs_done (job_id, product_id, version, runs, token) VALUES (?, ?, ?, 1, ?)
		ON CONFLICT(job_id) DO UPDATE SET runs = runs + 1, token = max(token, excluded.token)`, jobID, id, version, token); err != nil {
		return err
	}
	return tx.Commit()
}

// JobsDone counts distinct re-index jobs that ran, runs beyond the first (duplicates), and
// jobs finished under a later claim than their first.
func (s *store) JobsDone(ctx context.Context) (done, duplicates, reclaimed int64, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(runs - 1), 0), coalesce(sum(token > 1), 0) FROM jobs_done`).
		Scan(&done, &duplicates, &reclaimed)
	return done, duplicates, reclaimed, err
}

// JobsRan counts the jobs of ids that ran at least once (each id counted once).
func (s *store) JobsRan(ctx context.Context, ids []string) (int64, error) {
	var ran int64
	for start := 0; start < len(ids); start += 500 { // within SQLite's bound on parameters
		chunk := ids[start:min(start+500, len(ids))]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		var n int64
		q := `SELECT count(*) FROM jobs_done WHERE job_id IN (?` + strings.Repeat(",?", len(chunk)-1) + `)`
		if err := s.db.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
			return 0, err
		}
		ran += n
	}
	return ran, nil
}
