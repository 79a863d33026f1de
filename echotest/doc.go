// Package echotest helps users test code built on EchoMQ and EchoCache: a throwaway Valkey
// for the tests ([Valkey], [Main]), a handler run on one task without a server ([Worker],
// like River's rivertest.Worker), and assertions on what a call enqueued
// ([RequireEnqueued], [RequireNotEnqueued], [Enqueued]).
//
// A test of a producer and of its handler:
//
//	func TestMain(m *testing.M) { echotest.Main(m) } // one server for the package's tests
//
//	func TestSignup(t *testing.T) {
//		b := echotest.Valkey(t).Bus(t, nil)
//		queue := echotest.Name(t)
//		require.NoError(t, Signup(ctx, b, queue, "ada@example.com")) // the code under test
//		echotest.RequireEnqueued(t, b, queue, "email.send", Email{To: "ada@example.com"}, nil)
//	}
//
//	func TestSendEmail(t *testing.T) {
//		w := echotest.NewWorker(t, bus.WorkerConfig{Middleware: mws}, "email.send", SendEmail, nil)
//		res := w.Work(ctx, t, Email{To: "ada@example.com"}, nil)
//		require.NoError(t, res.Err)
//		require.Equal(t, echotest.Completed, res.Outcome)
//	}
//
// [Valkey] runs valkey-server from PATH (or uses VALKEY_ADDR). Without it a test fails and
// says how to install it; under go test -short it is skipped instead.
package echotest
