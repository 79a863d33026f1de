package topic

import (
	"errors"
	"fmt"
)

// Sentinel errors. Compare with errors.Is.
var (
	// ErrInvalid: a name, channel, handler or [Config] field is not valid. Nothing was sent
	// or subscribed. Errors about names and channels also match keys.ErrInvalid.
	ErrInvalid = errors.New("topic: invalid")
	// ErrTooLarge: a payload is larger than [Config.MaxPayload]. Nothing was sent.
	ErrTooLarge = errors.New("topic: payload too large")
)

// errUnsubscribed is a Disconnected event's Err when the server ended the subscription on a
// live connection (it does so for shard channels whose slot moved).
var errUnsubscribed = errors.New("topic: the server ended the subscription")

// invalid wraps a keys error (or a message) as ErrInvalid, keeping keys.ErrInvalid reachable.
func invalid(op string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrInvalid, op, err)
}

// clientError is the one place where an error of the client (valkey-go) or of the caller's
// context becomes the package's: it names the operation, and the cause stays reachable with
// errors.Is and errors.As (valkey.IsValkeyErr, context.DeadlineExceeded). Sharded pub/sub has
// no error replies of its own to translate.
func clientError(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("topic: %s: %w", op, err)
}
