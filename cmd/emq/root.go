package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/valkey-io/valkey-go"
	"golang.org/x/term"

	"github.com/echocache/echocache/bus"
)

// progName prefixes the tool's messages.
const progName = "emq"

// Defaults of the global flags.
const (
	// defaultAddr is the server when neither --addr nor VALKEY_ADDR names one.
	defaultAddr = "127.0.0.1:6379"
	// defaultConnectTimeout bounds connecting to the server.
	defaultConnectTimeout = 5 * time.Second
	// defaultTimeout bounds each command's round trips once connected.
	defaultTimeout = 10 * time.Second
)

// commands are the subcommands, one constructor per file. A new command (emq dash, say)
// adds its constructor here.
var commands = []func(*app) *cobra.Command{
	queuesCmd,
	statsCmd,
	lsCmd,
	showCmd,
	retryCmd,
	purgeCmd,
	pauseCmd,
	resumeCmd,
	cancelCmd,
	configCmd,
	dropCmd,
	lanesCmd,
	laneCmd,
	periodicCmd,
	enqueueCmd,
	tablesCmd,
	tableCmd,
	watchCmd,
	dashCmd,
}

// app is one run of the tool: its streams, its global flags and, once a command asks for
// it, the connection.
type app struct {
	in       io.Reader
	out, err io.Writer
	getenv   func(string) string
	// isTTY tells whether stdin is a terminal (confirmations); a test replaces it.
	isTTY func() bool

	addr           string
	user           string
	passwordFile   string
	tls            bool
	tlsCA          string
	cluster        bool
	connectTimeout time.Duration
	timeout        time.Duration
	json           bool
	yes            bool

	client valkey.Client
	bus    *bus.Bus
}

// run runs the tool with args and returns its exit code.
func run(args []string, in io.Reader, out, errw io.Writer, getenv func(string) string) int {
	a := &app{in: in, out: out, err: errw, getenv: getenv, isTTY: func() bool { return isTerminal(in) }}
	return a.run(args)
}

func (a *app) run(args []string) int {
	root := a.root()
	root.SetArgs(args)
	err := root.Execute()
	if a.client != nil {
		a.client.Close()
	}
	if err == nil {
		return exitOK
	}
	code := exitCode(err)
	if isFlagError(err) {
		code = exitUsage
	}
	if a.json {
		a.printJSONError(err, code)
	} else {
		fmt.Fprintf(a.err, "%s: %v\n", progName, err)
	}
	return code
}

// root is the root command with every subcommand of commands.
func (a *app) root() *cobra.Command {
	root := &cobra.Command{
		Use:   "emq",
		Short: "Operate EchoMQ queues and EchoCache tables",
		Long: `emq operates EchoMQ queues and EchoCache tables on a Valkey server or cluster.

The server is --addr, else $VALKEY_ADDR, else ` + defaultAddr + `: one address, or the
comma-separated seeds of a cluster. A server that requires a password gets the one in
$VALKEY_PASSWORD, or in the file --password-file names (never a flag of its own, which
other users could read in the process list), as the ACL user --user (else $VALKEY_USERNAME,
else default). --tls connects over TLS, verifying the server's certificate against the
system's roots, or against the PEM file --tls-ca names. Every command takes --json.

Exit codes: 0 success, 1 other failure, 2 usage error, 3 not found (queue, job, table),
4 server unreachable or refusing the connection (credentials, TLS), 5 refused or aborted
(not confirmed, wrong job state, claimed jobs in the way of a drop).`,
		Version:       version(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(a.in)
	root.SetOut(a.out)
	root.SetErr(a.err)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{exitUsage, fmt.Errorf("%w (see %s --help)", err, c.CommandPath())}
	})
	addr := a.getenv("VALKEY_ADDR")
	if addr == "" {
		addr = defaultAddr
	}
	f := root.PersistentFlags()
	f.StringVar(&a.addr, "addr", addr, "server address, or comma-separated cluster seeds ($VALKEY_ADDR)")
	f.StringVar(&a.user, "user", a.getenv("VALKEY_USERNAME"), "ACL user to authenticate as, with the password of $VALKEY_PASSWORD or --password-file ($VALKEY_USERNAME)")
	f.StringVar(&a.passwordFile, "password-file", "", "file whose first line is the password (instead of $VALKEY_PASSWORD)")
	f.BoolVar(&a.tls, "tls", false, "connect over TLS, verifying the server's certificate (system roots, or --tls-ca)")
	f.StringVar(&a.tlsCA, "tls-ca", "", "PEM file of the CA certificates to verify the server's with (implies --tls)")
	f.BoolVar(&a.cluster, "cluster", false, "the server must be a cluster (seeds from --addr)")
	f.DurationVar(&a.connectTimeout, "connect-timeout", defaultConnectTimeout, "bound on connecting to the server")
	f.DurationVar(&a.timeout, "timeout", defaultTimeout, "bound on each command's round trips once connected")
	f.BoolVar(&a.json, "json", false, "print JSON instead of text")
	for _, mk := range commands {
		root.AddCommand(mk(a))
	}
	return root
}

// isFlagError reports whether err is one of cobra's argument errors (an unknown command, a
// wrong number of arguments), which cobra returns as plain errors.
func isFlagError(err error) bool {
	var ee *exitError
	if errors.As(err, &ee) {
		return false
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "unknown command") || strings.HasPrefix(msg, "unknown flag") ||
		strings.Contains(msg, "arg(s)") || strings.HasPrefix(msg, "invalid argument")
}

// ctx is a context bounded by --timeout for one command's round trips.
func (a *app) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), a.timeout)
}

// isTerminal reports whether r is a terminal: a character device is not enough (/dev/null,
// the stdin of cron, systemd and ssh -n, is one too).
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// version is the module version the binary was built from (go install ...@v1.2.3), else
// "(devel)" and the VCS revision it was built at, with the Go version: emq --version.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := info.Main.Version
	if v == "" || v == "(devel)" {
		v = "(devel)"
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " " + s.Value[:12]
			}
			if s.Key == "vcs.modified" && s.Value == "true" {
				v += "+modified"
			}
		}
	}
	return v + " (" + info.GoVersion + ")"
}
