package valkeytest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Reading a cluster's state: CLUSTER INFO, CLUSTER SLOTS and CLUSTER NODES, as the
// cluster's waits and its role queries use them.

// clusterStateOK reports an error unless n answers CLUSTER INFO with cluster_state:ok.
func clusterStateOK(ctx context.Context, n *Server) error {
	info, err := command(ctx, n.Addr, "CLUSTER", "INFO")
	if err != nil {
		return err
	}
	if st := infoField(fmt.Sprint(info), "cluster_state"); st != "ok" {
		return fmt.Errorf("%s has cluster_state:%s", n.Addr, st)
	}
	return nil
}

// slotRange is one entry of CLUSTER SLOTS, with nodes as ports.
type slotRange struct {
	start, end int
	primary    int
	replicas   []int
}

type slotRanges []slotRange

// clusterSlots returns n's CLUSTER SLOTS, sorted by start.
func clusterSlots(ctx context.Context, n *Server) (slotRanges, error) {
	v, err := command(ctx, n.Addr, "CLUSTER", "SLOTS")
	if err != nil {
		return nil, err
	}
	entries, _ := v.([]any)
	var out slotRanges
	for _, e := range entries {
		f, _ := e.([]any)
		if len(f) < 3 {
			return nil, fmt.Errorf("%s: odd CLUSTER SLOTS entry %v", n.Addr, e)
		}
		start, _ := f[0].(int64)
		end, _ := f[1].(int64)
		r := slotRange{start: int(start), end: int(end)}
		for i, node := range f[2:] {
			nf, _ := node.([]any)
			if len(nf) < 2 {
				return nil, fmt.Errorf("%s: odd CLUSTER SLOTS node %v", n.Addr, node)
			}
			port, _ := nf[1].(int64)
			if i == 0 {
				r.primary = int(port)
			} else {
				r.replicas = append(r.replicas, int(port))
			}
		}
		slices.Sort(r.replicas)
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b slotRange) int { return a.start - b.start })
	return out, nil
}

// complete checks that the ranges cover every slot once, each with a replica.
func (rs slotRanges) complete() error {
	next := 0
	for _, r := range rs {
		if r.start != next {
			return fmt.Errorf("slots %d-%d not covered", next, r.start-1)
		}
		if len(r.replicas) != 1 {
			return fmt.Errorf("slots %d-%d have %d replicas", r.start, r.end, len(r.replicas))
		}
		next = r.end + 1
	}
	if next != numSlots {
		return fmt.Errorf("slots %d-%d not covered", next, numSlots-1)
	}
	return nil
}

// owner returns the port of the primary owning slot, or 0.
func (rs slotRanges) owner(slot int) int {
	for _, r := range rs {
		if r.start <= slot && slot <= r.end {
			return r.primary
		}
	}
	return 0
}

func (rs slotRanges) String() string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "%d-%d:%d/%v ", r.start, r.end, r.primary, r.replicas)
	}
	return b.String()
}

// nodeInfo is one line of CLUSTER NODES.
type nodeInfo struct {
	id       string
	server   *Server // nil if the port is not one of Nodes
	port     int
	myself   bool
	primary  bool
	masterID string
	slots    [][2]int
}

func (n nodeInfo) owns(slot int) bool {
	for _, r := range n.slots {
		if r[0] <= slot && slot <= r[1] {
			return true
		}
	}
	return false
}

// topology returns CLUSTER NODES as seen by the first running node that
// answers, or nil.
func (c *Cluster) topology() []nodeInfo {
	for _, n := range c.Nodes {
		if !n.running() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		topo, err := nodesOf(ctx, n)
		cancel()
		if err == nil {
			for i := range topo {
				for _, s := range c.Nodes {
					if s.Port == topo[i].port {
						topo[i].server = s
					}
				}
			}
			return topo
		}
	}
	return nil
}

// nodesOf returns n's CLUSTER NODES, parsed.
func nodesOf(ctx context.Context, n *Server) ([]nodeInfo, error) {
	v, err := command(ctx, n.Addr, "CLUSTER", "NODES")
	if err != nil {
		return nil, err
	}
	var out []nodeInfo
	for line := range strings.SplitSeq(strings.TrimSpace(fmt.Sprint(v)), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		// f[1] is ip:port@cport[,hostname]
		addr, _, _ := strings.Cut(f[1], "@")
		_, portStr, _ := strings.Cut(addr, ":")
		port, _ := strconv.Atoi(portStr)
		flags := strings.Split(f[2], ",")
		ni := nodeInfo{
			id:       f[0],
			port:     port,
			myself:   slices.Contains(flags, "myself"),
			primary:  slices.Contains(flags, "master"),
			masterID: f[3],
		}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") { // migrating/importing marker
				continue
			}
			lo, hi, isRange := strings.Cut(s, "-")
			a, _ := strconv.Atoi(lo)
			b := a
			if isRange {
				b, _ = strconv.Atoi(hi)
			}
			ni.slots = append(ni.slots, [2]int{a, b})
		}
		out = append(out, ni)
	}
	return out, nil
}
