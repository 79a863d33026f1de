package valkeytest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"
)

const (
	clusterPrimaries = 3
	clusterSize      = 6 // 3 primaries, each with one replica
	numSlots         = 16384
	// clusterTimeout bounds creating the cluster and waiting for it to settle.
	clusterTimeout = 30 * time.Second
	// failoverTimeout is used by Failover when ctx has no deadline.
	failoverTimeout = 30 * time.Second
)

// clusterConfig is the extra config of every cluster node (on top of the
// cluster settings added by startServer). Diskless sync would otherwise wait
// 5 s for more replicas before the first full sync. CLUSTER SLOTS lists a
// replica only once its replication offset is non-zero, which on an empty
// primary happens with the first replication PING: every 10 s by default.
var clusterConfig = []string{
	"--repl-diskless-sync-delay", "0",
	"--repl-ping-replica-period", "1",
}

// Cluster is a 3-primary/3-replica valkey cluster on loopback ports, made by
// [StartCluster] or [SharedCluster]. Roles change on failover, so the role
// methods ask the cluster each time.
type Cluster struct {
	// Nodes are all six nodes, in start order (not by role).
	Nodes []*Server

	shared bool
}

// StartCluster starts a dedicated cluster for one test: 3 primaries and 3
// replicas (cluster-node-timeout 2000, AOF on), created with valkey-cli
// --cluster create. It returns once every node reports cluster_state:ok,
// agrees on slot ownership for all 16384 slots and every replica's link is
// up. The cluster is closed on tb.Cleanup. Use it for fault tests; other
// tests should use [SharedCluster].
func StartCluster(tb testing.TB) *Cluster {
	tb.Helper()
	c, err := startCluster(context.Background())
	if err != nil {
		tb.Fatalf("valkeytest: %v", err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			for _, n := range c.Nodes {
				tb.Logf("valkeytest: last lines of node %s log:\n%s", n.Addr, n.logTail(10))
			}
		}
		c.close()
	})
	return c
}

func startCluster(ctx context.Context) (*Cluster, error) {
	cli, err := exec.LookPath("valkey-cli")
	if err != nil {
		return nil, errors.New("valkey-cli not found on PATH: run .ci/install-valkey (or make test, which runs it)")
	}
	ctx, cancel := context.WithTimeout(ctx, clusterTimeout)
	defer cancel()

	c := &Cluster{Nodes: make([]*Server, clusterSize)}
	errs := make([]error, clusterSize)
	var wg sync.WaitGroup
	for i := range c.Nodes {
		wg.Go(func() { c.Nodes[i], errs[i] = startServer(ctx, clusterConfig, true) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.close()
		return nil, fmt.Errorf("starting cluster nodes: %w", err)
	}

	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	cmd := exec.CommandContext(ctx, cli, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if out, err := cmd.CombinedOutput(); err != nil {
		c.close()
		return nil, fmt.Errorf("valkey-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if err := c.waitFor(ctx, c.settled); err != nil {
		c.close()
		return nil, fmt.Errorf("cluster did not settle: %w", err)
	}
	return c, nil
}

// close kills all nodes and removes their data.
func (c *Cluster) close() {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		if n != nil {
			wg.Go(n.closeServer)
		}
	}
	wg.Wait()
}

// Addrs returns the host:port of every node, in the order of Nodes.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr
	}
	return addrs
}

// Client returns a new valkey-go cluster client (InitAddress: all nodes,
// DisableCache: true), closed on tb.Cleanup.
func (c *Cluster) Client(tb testing.TB) valkey.Client {
	tb.Helper()
	return c.ClientWith(tb, nil)
}

// ClientWith is [Cluster.Client] with the options passed through modify
// before the client is made; modify may be nil.
func (c *Cluster) ClientWith(tb testing.TB, modify func(*valkey.ClientOption)) valkey.Client {
	tb.Helper()
	opt := valkey.ClientOption{InitAddress: c.Addrs(), DisableCache: true}
	if modify != nil {
		modify(&opt)
	}
	cl, err := valkey.NewClient(opt)
	if err != nil {
		tb.Fatalf("valkeytest: cluster client: %v", err)
	}
	tb.Cleanup(cl.Close)
	return cl
}

// Primaries returns the nodes flagged master, in the order of Nodes, as the
// first running node in Nodes sees them (CLUSTER NODES). A node flagged as
// failed keeps its last known role. Nil if no node answers.
func (c *Cluster) Primaries() []*Server {
	return c.withRole(true)
}

// Replicas returns the nodes flagged slave, like [Cluster.Primaries].
func (c *Cluster) Replicas() []*Server {
	return c.withRole(false)
}

func (c *Cluster) withRole(primary bool) []*Server {
	var out []*Server
	for _, n := range c.topology() {
		if n.primary == primary && n.server != nil {
			out = append(out, n.server)
		}
	}
	return out
}

// PrimaryForSlot returns the primary that owns slot, as the first running
// node in Nodes sees it, or nil.
func (c *Cluster) PrimaryForSlot(slot uint16) *Server {
	for _, n := range c.topology() {
		if n.primary && n.owns(int(slot)) {
			return n.server
		}
	}
	return nil
}

// OtherPrimary returns a primary that does not own slot (the first in Nodes), or nil: where a
// test moves the slot to.
func (c *Cluster) OtherPrimary(slot uint16) *Server {
	from := c.PrimaryForSlot(slot)
	for _, p := range c.Primaries() {
		if p != from {
			return p
		}
	}
	return nil
}

// ReplicasOf returns the replicas of primary, as the first running node in
// Nodes sees them, in the order of Nodes.
func (c *Cluster) ReplicasOf(primary *Server) []*Server {
	topo := c.topology()
	var id string
	for _, n := range topo {
		if n.server == primary {
			id = n.id
		}
	}
	var out []*Server
	for _, n := range topo {
		if id != "" && n.masterID == id && n.server != nil {
			out = append(out, n.server)
		}
	}
	return out
}

// Failover makes a running replica of slot's primary the new primary with
// CLUSTER FAILOVER (FORCE when the primary is not running), and waits until
// that replica reports itself as master owning the slot, and every running
// node reports cluster_state:ok and that owner. Without a deadline in ctx it
// gives up after 30 s. It returns an error on a [SharedCluster].
func (c *Cluster) Failover(ctx context.Context, slot uint16) error {
	if c.shared {
		return errors.New("valkeytest: Failover on the shared cluster; use StartCluster")
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, failoverTimeout)
		defer cancel()
	}
	primary := c.PrimaryForSlot(slot)
	if primary == nil {
		return fmt.Errorf("valkeytest: no primary owns slot %d", slot)
	}
	var replica *Server
	for _, r := range c.ReplicasOf(primary) {
		if r.running() {
			replica = r
			break
		}
	}
	if replica == nil {
		return fmt.Errorf("valkeytest: primary %s of slot %d has no running replica", primary.Addr, slot)
	}
	args := []string{"CLUSTER", "FAILOVER"}
	if !primary.running() {
		args = append(args, "FORCE")
	}
	if _, err := command(ctx, replica.Addr, args...); err != nil {
		return fmt.Errorf("valkeytest: %s on %s: %w", strings.Join(args, " "), replica.Addr, err)
	}
	err := c.waitFor(ctx, func(ctx context.Context) error {
		topo, err := nodesOf(ctx, replica)
		if err != nil {
			return err
		}
		for _, n := range topo {
			if n.myself && !(n.primary && n.owns(int(slot))) {
				return fmt.Errorf("%s does not yet report itself as master of slot %d", replica.Addr, slot)
			}
		}
		for _, n := range c.Nodes {
			if !n.running() {
				continue
			}
			if err := clusterStateOK(ctx, n); err != nil {
				return err
			}
			ranges, err := clusterSlots(ctx, n)
			if err != nil {
				return err
			}
			if owner := ranges.owner(int(slot)); owner != replica.Port {
				return fmt.Errorf("%s sees slot %d on port %d, not %d", n.Addr, slot, owner, replica.Port)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("valkeytest: failover of slot %d to %s: %w", slot, replica.Addr, err)
	}
	return nil
}

// waitFor polls check until it returns nil or ctx ends; then it returns the
// last error of check.
func (c *Cluster) waitFor(ctx context.Context, check func(context.Context) error) error {
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := check(cctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// settled checks that a new cluster is ready: every node has cluster_state
// ok and knows all nodes, all nodes report the same CLUSTER SLOTS covering
// all slots with one replica per range, and every replica's link is up.
func (c *Cluster) settled(ctx context.Context) error {
	var first string
	for _, n := range c.Nodes {
		if err := clusterStateOK(ctx, n); err != nil {
			return err
		}
		info, err := command(ctx, n.Addr, "CLUSTER", "INFO")
		if err != nil {
			return err
		}
		if known := infoField(fmt.Sprint(info), "cluster_known_nodes"); known != strconv.Itoa(clusterSize) {
			return fmt.Errorf("%s knows %s nodes", n.Addr, known)
		}
		ranges, err := clusterSlots(ctx, n)
		if err != nil {
			return err
		}
		if err := ranges.complete(); err != nil {
			return fmt.Errorf("%s: %w", n.Addr, err)
		}
		if s := ranges.String(); first == "" {
			first = s
		} else if s != first {
			return fmt.Errorf("nodes disagree on CLUSTER SLOTS: %s vs %s", first, s)
		}
		repl, err := command(ctx, n.Addr, "INFO", "replication")
		if err != nil {
			return err
		}
		if r := fmt.Sprint(repl); infoField(r, "role") == "slave" && infoField(r, "master_link_status") != "up" {
			return fmt.Errorf("replica %s link is %s", n.Addr, infoField(r, "master_link_status"))
		}
	}
	return nil
}
