// Command emq operates EchoMQ queues and EchoCache tables on a Valkey server or cluster:
// list queues and tables, read counts and fleet stats, browse sets, show a job with its
// payload decoded, and retry, purge, pause, resume, cancel and enqueue; list a queue's lanes
// with their limits and counts, read one lane, pause and resume a lane.
//
// The commands:
//
//	emq queues                            every queue of the registry with its counts
//	emq stats [queue] [--window D]        counts (lane counts too) and the fleet's counters
//	emq watch [queue]                     stats, refreshed
//	emq ls <queue> <set>                  a page of a set's jobs
//	emq show <queue> <id>                 one job, its payload decoded
//	emq retry|purge <queue> <id>...|--all dead jobs back to pending, or deleted
//	emq pause|resume <queue>              stop and restart handing out work
//	emq cancel <queue> <id>               cancel a waiting or running job
//	emq enqueue <queue> <payload|->       one job
//	emq lanes <queue> [--set S]           a page of a lane index (ready, held, active, limits)
//	emq lane <queue> <lane>               one lane: limits in force, paused, counts
//	emq lane pause|resume <queue> <lane>  stop and restart a lane
//	emq tables, emq table <name>          the cache tables, one table's stats
//	emq dash                              the web dashboard
//
// Install it with
//
//	go install github.com/echocache/echocache/cmd/emq@latest
//
// The server is named by --addr (or VALKEY_ADDR; default 127.0.0.1:6379): one address, or
// comma-separated seeds of a cluster (--cluster insists on a cluster). A password comes from
// VALKEY_PASSWORD or the first line of --password-file, for the ACL user --user (or
// VALKEY_USERNAME; default "default"); --tls connects over TLS, verifying the server against
// the system's roots or the CA certificates of --tls-ca. Every command takes --json and then
// prints one JSON document (watch: one per refresh) instead of text.
//
// Exit codes, for scripts:
//
//	0  success
//	1  any other failure (the server answered an error, a reply the tool does not understand)
//	2  usage error: an unknown command or flag, a missing or malformed argument
//	3  not found: the queue is not in the registry, the job has no row, the table is unknown
//	4  the server is unreachable, not answering or refusing the connection (its credentials
//	   or its TLS certificate): no connection within --connect-timeout
//	   (default 5 s), a command's round trips not answered within --timeout (default 10 s),
//	   or the connection lost mid-command (a watch whose server went away)
//	5  refused or aborted: a destructive command not confirmed, or the job is in a state the
//	   command does not apply to
//
// Destructive commands (purge, retry --all) ask for confirmation when stdin is a terminal,
// and refuse without one unless --yes is given.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}
