package main

import (
	"bufio"
	"context"
	"fmt"
	"strings"
)

// confirm asks before a destructive command: with --yes it goes ahead; on a terminal it
// asks and goes ahead only on "y" or "yes"; without a terminal it refuses (exit 5), so a
// script never destroys by accident.
func (a *app) confirm(what string) error {
	if a.yes {
		return nil
	}
	if !a.isTTY() {
		return refusedf("%s: stdin is not a terminal; pass --yes to confirm", what)
	}
	fmt.Fprintf(a.err, "%s? [y/N] ", what)
	line, _ := bufio.NewReader(a.in).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return refusedf("%s: not confirmed", what)
}

// confirmed asks as confirm does, between the reads that show the operator what is at stake
// and the writes that act on it: once the answer is yes, the writes get a deadline of their
// own (--timeout from now), since the time spent reading the prompt is not the server's.
// cancel is the reads' deadline; on a refusal it is returned as it is, for the caller's
// deferred func() { cancel() }().
func (a *app) confirmed(what string, cancel context.CancelFunc) (context.Context, context.CancelFunc, error) {
	if err := a.confirm(what); err != nil {
		return nil, cancel, err
	}
	cancel()
	ctx, cancel := a.ctx()
	return ctx, cancel, nil
}
