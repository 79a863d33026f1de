package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
)

// connect opens the client and the bus, once; the dial and the first round trip are bounded
// by --connect-timeout, and a failure names the address.
func (a *app) connect() error {
	if a.client != nil {
		return nil
	}
	var seeds []string
	for _, s := range strings.Split(a.addr, ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	if len(seeds) == 0 {
		return usagef("--addr: no address")
	}
	if a.connectTimeout <= 0 {
		return usagef("--connect-timeout: %v is not positive", a.connectTimeout)
	}
	if a.timeout <= 0 {
		return usagef("--timeout: %v is not positive", a.timeout)
	}
	password, err := a.password()
	if err != nil {
		return err
	}
	tlsConfig, err := a.tlsConfig()
	if err != nil {
		return err
	}
	opt := valkey.ClientOption{
		InitAddress:  seeds,
		Username:     a.user,
		Password:     password,
		TLSConfig:    tlsConfig,
		DisableCache: true,
		Dialer:       netDialer(a.connectTimeout),
		// A command that cannot be written, or whose reply does not come, within the bound
		// fails instead of waiting: valkey-go bounds both by this one setting, so it is the
		// longer of the two bounds, and a slow reply within --timeout is waited for (each
		// command's context bounds it by --timeout in any case).
		ConnWriteTimeout: max(a.timeout, a.connectTimeout),
	}
	client, err := valkey.NewClient(opt)
	if err != nil {
		return a.connError("cannot connect to %s within %v: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.connectTimeout)
	defer cancel()
	if err := client.Do(ctx, client.B().Ping().Build()).Error(); err != nil {
		client.Close()
		return a.connError("cannot reach %s within %v: %w", err)
	}
	if a.cluster && client.Mode() != valkey.ClientModeCluster {
		client.Close()
		return usagef("--cluster: %s is not a cluster (mode %s)", a.addr, client.Mode())
	}
	b, err := bus.New(client, bus.Config{})
	if err != nil {
		client.Close()
		return err
	}
	a.client, a.bus = client, b
	return nil
}

// connError is a failure to connect (exit 4), told apart when the server refused the
// credentials or the TLS handshake failed, so the message says what to change.
func (a *app) connError(format string, err error) error {
	msg := fmt.Errorf(format, a.addr, a.connectTimeout, err)
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	switch s := err.Error(); {
	case strings.HasPrefix(s, "WRONGPASS"), strings.HasPrefix(s, "NOAUTH"), strings.Contains(s, "AUTH <password> called without any password"):
		msg = fmt.Errorf("%s refused the credentials (user %q; password from %s): %w", a.addr, a.userName(), a.passwordSource(), err)
	case errors.As(err, &unknownCA):
		msg = fmt.Errorf("%s: the server's TLS certificate is not signed by a CA this tool trusts (give its CA with --tls-ca): %w", a.addr, err)
	case errors.As(err, &hostname):
		msg = fmt.Errorf("%s: the server's TLS certificate is not for this address (connect by a name or IP it names): %w", a.addr, err)
	case a.usesTLS():
		// A plain port reads a TLS hello as the start of a command and waits for its end.
		msg = fmt.Errorf("%w (with --tls: is %s the server's TLS port?)", msg, a.addr)
	}
	return &exitError{exitUnreachable, msg}
}

func (a *app) userName() string {
	if a.user == "" {
		return "default"
	}
	return a.user
}

func (a *app) passwordSource() string {
	switch {
	case a.passwordFile != "":
		return "--password-file " + a.passwordFile
	case a.getenv("VALKEY_PASSWORD") != "":
		return "$VALKEY_PASSWORD"
	}
	return "nowhere: set $VALKEY_PASSWORD or --password-file"
}

// usesTLS reports whether the connection is TLS: --tls, or --tls-ca, which implies it.
func (a *app) usesTLS() bool { return a.tls || a.tlsCA != "" }

// password is the first line of --password-file, else $VALKEY_PASSWORD.
func (a *app) password() (string, error) {
	if a.passwordFile == "" {
		return a.getenv("VALKEY_PASSWORD"), nil
	}
	b, err := os.ReadFile(a.passwordFile)
	if err != nil {
		return "", usagef("--password-file: %v", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSuffix(line, "\r")
	if line == "" {
		return "", usagef("--password-file: %s: the first line is empty", a.passwordFile)
	}
	return line, nil
}

// tlsConfig is nil without --tls and --tls-ca; else TLS 1.2 or later, verifying the server's
// certificate against the system's roots or --tls-ca's certificates.
func (a *app) tlsConfig() (*tls.Config, error) {
	if !a.usesTLS() {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if a.tlsCA != "" {
		pem, err := os.ReadFile(a.tlsCA)
		if err != nil {
			return nil, usagef("--tls-ca: %v", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, usagef("--tls-ca: %s holds no PEM certificate", a.tlsCA)
		}
	}
	return cfg, nil
}

// netDialer is the dialer of every connection: its timeout is --connect-timeout.
func netDialer(timeout time.Duration) net.Dialer { return net.Dialer{Timeout: timeout} }
