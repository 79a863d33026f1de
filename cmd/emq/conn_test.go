package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/internal/valkeytest"
)

// TestPassword: a server that requires a password is reached with the password of
// $VALKEY_PASSWORD or --password-file, as the default user or the ACL user of --user; without
// it, or with a wrong one, the tool exits 4 and says the credentials were refused and where
// the password came from.
func TestPassword(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
	c := srv.Client(t)
	ctx := context.Background()
	require.NoError(t, c.Do(ctx, c.B().Arbitrary("ACL", "SETUSER", "ops", "on", ">ops-pw", "~*", "&*", "+@all").Build()).Error())
	require.NoError(t, c.Do(ctx, c.B().ConfigSet().ParameterValue().ParameterValue("requirepass", "default-pw").Build()).Error())
	addr := srv.Addr
	env := func(kv ...string) []string {
		return append([]string{"VALKEY_ADDR=" + addr, "VALKEY_PASSWORD=", "VALKEY_USERNAME="}, kv...)
	}

	r := emqEnv(t, env(), "", "queues")
	require.Equal(t, exitUnreachable, r.code, r.err)
	require.Contains(t, r.err, addr+` refused the credentials (user "default"; password from nowhere: set $VALKEY_PASSWORD or --password-file)`)

	r = emqEnv(t, env("VALKEY_PASSWORD=default-pw"), "", "queues")
	require.Equal(t, exitOK, r.code, r.err)
	r = emqEnv(t, env("VALKEY_PASSWORD=ops-pw"), "", "queues", "--user", "ops")
	require.Equal(t, exitOK, r.code, r.err)
	r = emqEnv(t, env("VALKEY_PASSWORD=ops-pw", "VALKEY_USERNAME=ops"), "", "queues")
	require.Equal(t, exitOK, r.code, r.err)

	r = emqEnv(t, env("VALKEY_PASSWORD=wrong"), "", "queues", "--user", "ops")
	require.Equal(t, exitUnreachable, r.code, r.err)
	require.Contains(t, r.err, `refused the credentials (user "ops"; password from $VALKEY_PASSWORD)`)

	file := filepath.Join(t.TempDir(), "pw")
	require.NoError(t, os.WriteFile(file, []byte("ops-pw\n"), 0o600))
	r = emqEnv(t, env("VALKEY_PASSWORD=wrong"), "", "queues", "--user", "ops", "--password-file", file)
	require.Equal(t, exitOK, r.code, "the file wins over the environment: %s", r.err)

	r = emqEnv(t, env(), "", "queues", "--password-file", filepath.Join(t.TempDir(), "none"))
	require.Equal(t, exitUsage, r.code, r.err)
	require.Contains(t, r.err, "--password-file")
	empty := filepath.Join(t.TempDir(), "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	r = emqEnv(t, env(), "", "queues", "--password-file", empty)
	require.Equal(t, exitUsage, r.code, r.err)
	require.Contains(t, r.err, "the first line is empty")
}

// TestTLS: a server's TLS port is reached with --tls and the CA of --tls-ca; without the CA
// the certificate does not verify, nor by a name it does not hold, and --tls to the plain port or no --tls to the TLS port
// fail: each exits 4 within the connect bound, the first two saying what to change (a plain
// port never answers a TLS hello, so that one is a timeout with a hint).
func TestTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := writeTLSFiles(t, dir)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	tlsPort := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	srv := valkeytest.Start(t, valkeytest.WithoutPersistence(),
		valkeytest.WithConfig("tls-port", strconv.Itoa(tlsPort)),
		valkeytest.WithConfig("tls-cert-file", filepath.Join(dir, "server.pem")),
		valkeytest.WithConfig("tls-key-file", filepath.Join(dir, "server.key")),
		valkeytest.WithConfig("tls-ca-cert-file", ca),
		valkeytest.WithConfig("tls-auth-clients", "no"))
	tlsAddr := "127.0.0.1:" + strconv.Itoa(tlsPort)

	r := emq(t, tlsAddr, "queues", "--tls-ca", ca)
	require.Equal(t, exitOK, r.code, r.err)
	require.Contains(t, r.out, "QUEUE")
	r = emq(t, tlsAddr, "queues", "--tls", "--tls-ca", ca, "--json")
	require.Equal(t, exitOK, r.code, r.err)

	r = emq(t, tlsAddr, "queues", "--tls")
	require.Equal(t, exitUnreachable, r.code, r.err)
	require.Contains(t, r.err, "the server's TLS certificate is not signed by a CA this tool trusts (give its CA with --tls-ca)")
	r = emq(t, "localhost:"+strconv.Itoa(tlsPort), "queues", "--tls-ca", ca)
	require.Equal(t, exitUnreachable, r.code, r.err)
	require.Contains(t, r.err, "the server's TLS certificate is not for this address", "it names 127.0.0.1 alone")

	r = emq(t, srv.Addr, "queues", "--tls", "--tls-ca", ca, "--connect-timeout", "2s")
	require.Equal(t, exitUnreachable, r.code, r.err)
	require.Contains(t, r.err, "(with --tls: is "+srv.Addr+" the server's TLS port?)")

	start := time.Now()
	r = emq(t, tlsAddr, "queues", "--connect-timeout", "1s")
	require.Equal(t, exitUnreachable, r.code, r.err)
	require.Less(t, time.Since(start), 10*time.Second)

	r = emq(t, tlsAddr, "queues", "--tls-ca", filepath.Join(dir, "none.pem"))
	require.Equal(t, exitUsage, r.code, r.err)
	r = emq(t, tlsAddr, "queues", "--tls-ca", filepath.Join(dir, "server.key"))
	require.Equal(t, exitUsage, r.code, r.err)
	require.Contains(t, r.err, "holds no PEM certificate")
}

// writeTLSFiles writes a CA (ca.pem) and a server certificate for 127.0.0.1 signed by it
// (server.pem, server.key) into dir, and returns the CA's path.
func writeTLSFiles(t *testing.T, dir string) string {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		return k
	}
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
		return path
	}
	now := time.Now()
	caKey := key()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "emq test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	caCert, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	srvKey := key()
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	require.NoError(t, err)
	srvKeyDER, err := x509.MarshalPKCS8PrivateKey(srvKey)
	require.NoError(t, err)
	write("server.pem", "CERTIFICATE", srvDER)
	write("server.key", "PRIVATE KEY", srvKeyDER)
	return write("ca.pem", "CERTIFICATE", caDER)
}

// TestSlowReplyWithinTimeout: a reply slower than --connect-timeout but within --timeout is
// waited for. valkey-go bounds a reply by the connection's write timeout, which was
// --connect-timeout: a server stalled 1.5 s failed a command of --timeout 10s after 300 ms.
func TestSlowReplyWithinTimeout(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
	queue := valkeytest.TestName(t)
	ok(t, srv.Addr, "enqueue", queue, "x")
	c := srv.Client(t)
	// Writes wait 1.5 s; the connection's PING still answers at once.
	require.NoError(t, c.Do(context.Background(), c.B().ClientPause().Timeout(1500).Write().Build()).Error())
	start := time.Now()
	r := emq(t, srv.Addr, "--connect-timeout", "300ms", "--timeout", "10s", "pause", queue)
	require.Equal(t, exitOK, r.code, r.err)
	require.Greater(t, time.Since(start), time.Second, "the pause waited for the server")
}
