package usertest

import (
	"context"
	"errors"
	"strings"

	"github.com/echocache/echocache/bus"
)

// Email is the args of the task kind "email.send".
type Email struct {
	To string `json:"to"`
}

// Signup is the code a user tests: it enqueues a welcome email.
func Signup(ctx context.Context, b *bus.Bus, queue, address string) error {
	if !strings.Contains(address, "@") {
		return errors.New("signup: not an email address")
	}
	_, err := bus.EnqueueTask(ctx, b, queue, "email.send", Email{To: address}, nil)
	return err
}

// SendEmail is the handler of "email.send": an address at example.invalid never accepts mail.
func SendEmail(_ context.Context, t *bus.Task[Email]) error {
	if strings.HasSuffix(t.Args.To, "@example.invalid") {
		return bus.SkipRetry(errors.New("no such domain"))
	}
	return nil
}
