package usertest_test

import (
	"context"
	"testing"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/echotest"

	"example.com/usertest"
)

// No TestMain: each echotest.Valkey call starts a server of the test's own.

func TestSignupEnqueuesTheEmail(t *testing.T) {
	t.Parallel()
	b := echotest.Valkey(t).Bus(t, nil)
	queue := echotest.Name(t)
	if err := usertest.Signup(context.Background(), b, queue, "ada@example.com"); err != nil {
		t.Fatal(err)
	}
	echotest.RequireEnqueued(t, b, queue, "email.send", usertest.Email{To: "ada@example.com"}, nil)
	if err := usertest.Signup(context.Background(), b, queue, "not an address"); err == nil {
		t.Fatal("a bad address was accepted")
	}
	if n := len(echotest.Enqueued(t, b, queue)); n != 1 {
		t.Fatalf("%d jobs enqueued, want 1", n)
	}
}

func TestSendEmail(t *testing.T) {
	t.Parallel()
	w := echotest.NewWorker(t, bus.WorkerConfig{Queue: "mail"}, "email.send", usertest.SendEmail, nil)
	if res := w.Work(context.Background(), t, usertest.Email{To: "ada@example.com"}, nil); res.Outcome != echotest.Completed {
		t.Fatalf("outcome %s, err %v", res.Outcome, res.Err)
	}
	if res := w.Work(context.Background(), t, usertest.Email{To: "bob@example.invalid"}, nil); res.Outcome != echotest.Dead {
		t.Fatalf("outcome %s, err %v", res.Outcome, res.Err)
	}
}
