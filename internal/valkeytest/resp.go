package valkeytest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/valkey-io/valkey-go"
)

// The harness talks to its servers with this minimal RESP2 client instead of
// valkey-go, so that it starts no background goroutines (goroutine-leak
// checks in tests stay clean) and works while a server is loading.

// replyError is an error reply ("-ERR ...") from the server.
type replyError string

func (e replyError) Error() string { return string(e) }

// command sends one command on a new connection and returns the reply:
// string (simple or bulk), int64, []any, nil (null), or a replyError as err.
// Without a deadline in ctx it gives up after 5 s.
func command(ctx context.Context, addr string, args ...string) (any, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return nil, err
	}
	v, err := readReply(bufio.NewReader(conn))
	if err != nil {
		return nil, err
	}
	if e, ok := v.(replyError); ok {
		return nil, e
	}
	return v, nil
}

// readReply reads one RESP2 reply.
func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty RESP line")
	}
	body := line[1:]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return replyError(body), nil
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, fmt.Errorf("bad bulk length %q", body)
		}
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, fmt.Errorf("bad array length %q", body)
		}
		if n < 0 {
			return nil, nil
		}
		arr := make([]any, n)
		for i := range arr {
			if arr[i], err = readReply(r); err != nil {
				return nil, err
			}
		}
		return arr, nil
	}
	return nil, fmt.Errorf("unexpected RESP type in %q", line)
}

// Do sends one command to the server on a new connection (no valkey-go
// client, so it also works while the server loads) and returns the reply as
// a string: simple and bulk strings as they are, integers in decimal, arrays
// flattened one element per line. A null reply returns valkey.Nil (see
// valkey.IsValkeyNil); an error reply returns an error with its text. Without
// a deadline in ctx it gives up after 5 s.
func (s *Server) Do(ctx context.Context, args ...string) (string, error) {
	v, err := command(ctx, s.Addr, args...)
	if err != nil {
		return "", err
	}
	if v == nil {
		return "", valkey.Nil
	}
	var b strings.Builder
	flatten(&b, v)
	return strings.TrimSuffix(b.String(), "\n"), nil
}

func flatten(b *strings.Builder, v any) {
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			flatten(b, e)
		}
		return
	case nil:
	default:
		fmt.Fprint(b, v)
	}
	b.WriteString("\n")
}
