package main

import (
	"bufio"
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
