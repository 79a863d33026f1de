package valkeytest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

const (
	// migrateTimeout is used by MigrateSlot when ctx has no deadline.
	migrateTimeout = 60 * time.Second
	// migrateBatch is how many keys one MIGRATE moves. It is large on purpose: between two
	// batches a slot is split across two nodes, and a script that touches keys it did not
	// declare (a queue's job rows) can find one of them gone mid-script. One batch moves a
	// test's slot whole, in one call the source serves without interleaving anything.
	migrateBatch = 100_000
	// migrateIOTimeout is MIGRATE's own timeout, in milliseconds.
	migrateIOTimeout = "10000"
)

// MigrateSlot moves slot from its primary to the primary to, the way an operator reshards:
// CLUSTER SETSLOT slot IMPORTING on to, MIGRATING on the source, then CLUSTER GETKEYSINSLOT
// and MIGRATE host port "" 0 timeout KEYS ... until the source holds no key of the slot, then
// CLUSTER SETSLOT slot NODE on to, on the source and on every other primary. It returns once
// every running node reports the slot owned by to. While it runs, clients see the ASK,
// TRYAGAIN and MOVED replies of a real migration. Moving a slot to its owner does nothing.
// Without a deadline in ctx it gives up after 60 s. It returns an error on a [SharedCluster].
func (c *Cluster) MigrateSlot(ctx context.Context, slot uint16, to *Server) error {
	if c.shared {
		return errors.New("valkeytest: MigrateSlot on the shared cluster; use StartCluster")
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, migrateTimeout)
		defer cancel()
	}
	from := c.PrimaryForSlot(slot)
	switch {
	case from == nil:
		return fmt.Errorf("valkeytest: no primary owns slot %d", slot)
	case from == to:
		return nil
	}
	if err := c.migrateSlot(ctx, slot, from, to); err != nil {
		return fmt.Errorf("valkeytest: migrating slot %d from %s to %s: %w", slot, from.Addr, to.Addr, err)
	}
	return nil
}

// setMigrating puts slot in migration from from to to (IMPORTING on to, MIGRATING on from)
// and returns to's node id.
func setMigrating(ctx context.Context, slot uint16, from, to *Server) (string, error) {
	fromID, err := myID(ctx, from)
	if err != nil {
		return "", err
	}
	toID, err := myID(ctx, to)
	if err != nil {
		return "", err
	}
	s := strconv.Itoa(int(slot))
	// IMPORTING first: once the source says ASK, the target must accept ASKING.
	if _, err := command(ctx, to.Addr, "CLUSTER", "SETSLOT", s, "IMPORTING", fromID); err != nil {
		return "", fmt.Errorf("SETSLOT IMPORTING on %s: %w", to.Addr, err)
	}
	if _, err := command(ctx, from.Addr, "CLUSTER", "SETSLOT", s, "MIGRATING", toID); err != nil {
		return "", fmt.Errorf("SETSLOT MIGRATING on %s: %w", from.Addr, err)
	}
	return toID, nil
}

func (c *Cluster) migrateSlot(ctx context.Context, slot uint16, from, to *Server) error {
	toID, err := setMigrating(ctx, slot, from, to)
	if err != nil {
		return err
	}
	s := strconv.Itoa(int(slot))
	host, port := "127.0.0.1", strconv.Itoa(to.Port)
	for {
		v, err := command(ctx, from.Addr, "CLUSTER", "GETKEYSINSLOT", s, strconv.Itoa(migrateBatch))
		if err != nil {
			return fmt.Errorf("GETKEYSINSLOT on %s: %w", from.Addr, err)
		}
		names, _ := v.([]any)
		if len(names) == 0 {
			break
		}
		args := []string{"MIGRATE", host, port, "", "0", migrateIOTimeout, "KEYS"}
		for _, k := range names {
			args = append(args, fmt.Sprint(k))
		}
		if _, err := command(ctx, from.Addr, args...); err != nil {
			return fmt.Errorf("MIGRATE of %d keys: %w", len(names), err)
		}
	}
	// The target first, so that it owns the slot (and bumps its epoch) before the source
	// starts answering MOVED; then the source; then the other primaries, which would learn it
	// through the bus anyway.
	for _, n := range append([]*Server{to, from}, c.Primaries()...) {
		if n != to && n != from && !n.running() {
			continue
		}
		if _, err := command(ctx, n.Addr, "CLUSTER", "SETSLOT", s, "NODE", toID); err != nil {
			if n == to || n == from {
				return fmt.Errorf("SETSLOT NODE on %s: %w", n.Addr, err)
			}
		}
	}
	return c.waitFor(ctx, func(ctx context.Context) error {
		for _, n := range c.Nodes {
			if !n.running() {
				continue
			}
			ranges, err := clusterSlots(ctx, n)
			if err != nil {
				return err
			}
			if owner := ranges.owner(int(slot)); owner != to.Port {
				return fmt.Errorf("%s sees slot %d on port %d, not %d", n.Addr, slot, owner, to.Port)
			}
		}
		return nil
	})
}

// myID is n's cluster node id.
func myID(ctx context.Context, n *Server) (string, error) {
	v, err := command(ctx, n.Addr, "CLUSTER", "MYID")
	if err != nil {
		return "", fmt.Errorf("CLUSTER MYID on %s: %w", n.Addr, err)
	}
	id, _ := v.(string)
	if id == "" {
		return "", fmt.Errorf("CLUSTER MYID on %s: empty reply", n.Addr)
	}
	return id, nil
}

// BeginMigration puts slot in the state a reshard holds it in while its keys move, and
// moves none: IMPORTING on to, MIGRATING on its primary. Clients then see what they see
// during every migration (ASK for a key the source lacks, TRYAGAIN for a command of several
// keys some of which it lacks) for as long as the test wants. The function it returns ends
// the state (SETSLOT STABLE on both), leaving the slot where it was. It returns an error on a
// [SharedCluster].
func (c *Cluster) BeginMigration(ctx context.Context, slot uint16, to *Server) (func() error, error) {
	if c.shared {
		return nil, errors.New("valkeytest: BeginMigration on the shared cluster; use StartCluster")
	}
	from := c.PrimaryForSlot(slot)
	if from == nil || from == to {
		return nil, fmt.Errorf("valkeytest: slot %d: no primary owns it, or to does", slot)
	}
	s := strconv.Itoa(int(slot))
	end := func() error {
		_, errFrom := command(context.Background(), from.Addr, "CLUSTER", "SETSLOT", s, "STABLE")
		_, errTo := command(context.Background(), to.Addr, "CLUSTER", "SETSLOT", s, "STABLE")
		return errors.Join(errFrom, errTo)
	}
	if _, err := setMigrating(ctx, slot, from, to); err != nil {
		return nil, errors.Join(fmt.Errorf("valkeytest: migrating slot %d: %w", slot, err), end())
	}
	return end, nil
}
