package topic_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/topic"
)

// TestNew: a nil client and negative Config fields are refused with ErrInvalid, naming the
// field; zero fields mean the defaults.
func TestNew(t *testing.T) {
	t.Parallel()
	c := valkeytest.Shared(t).Client(t)
	_, err := topic.New(nil, topic.Config{})
	require.ErrorIs(t, err, topic.ErrInvalid)
	require.ErrorContains(t, err, "nil client")
	for _, tc := range []struct {
		name  string
		cfg   topic.Config
		field string
	}{
		{"negative MaxPayload", topic.Config{MaxPayload: -1}, "Config.MaxPayload"},
		{"negative SubscribeBuffer", topic.Config{SubscribeBuffer: -1}, "Config.SubscribeBuffer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := topic.New(c, tc.cfg)
			require.ErrorIs(t, err, topic.ErrInvalid)
			require.ErrorContains(t, err, tc.field)
		})
	}
	tp, err := topic.New(c, topic.Config{})
	require.NoError(t, err)
	require.NotNil(t, tp)
}

// TestBadNames: every verb refuses a name that breaks the grammar with ErrInvalid, which
// also matches keys.ErrInvalid and names the broken rule; nothing is sent or subscribed.
func TestBadNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tp := newTopics(t, valkeytest.Shared(t).Client(t), topic.Config{})
	verbs := map[string]func(name string) error{
		"publish": func(name string) error { _, err := tp.Publish(ctx, name, []byte("x")); return err },
		"subscribe": func(name string) error {
			_, err := tp.Subscribe(ctx, []string{name}, func(topic.Event) {})
			return err
		},
	}
	for _, tc := range []struct{ name, topic, rule string }{
		{"empty", "", "empty"},
		{"open brace", "ord{ers", "byte"},
		{"close brace", "ord}ers", "byte"},
		{"colon", "a:b", "byte"},
		{"space", "a b", "byte"},
		{"control byte", "a\x00b", "byte"},
		{"too long", strings.Repeat("q", 65), "65 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for verb, call := range verbs {
				err := call(tc.topic)
				require.ErrorIs(t, err, topic.ErrInvalid, verb)
				require.ErrorIs(t, err, keys.ErrInvalid, verb)
				require.ErrorContains(t, err, tc.rule, verb)
			}
		})
	}
}

// TestBadSubscribe: a subscription needs channels and a handler.
func TestBadSubscribe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tp := newTopics(t, valkeytest.Shared(t).Client(t), topic.Config{})
	_, err := tp.SubscribeChannels(ctx, nil, func(topic.Event) {})
	require.ErrorIs(t, err, topic.ErrInvalid)
	require.ErrorContains(t, err, "no channels")
	_, err = tp.Subscribe(ctx, []string{valkeytest.TestName(t)}, nil)
	require.ErrorIs(t, err, topic.ErrInvalid)
	require.ErrorContains(t, err, "nil handler")
	// A key of the grammar that is no channel: an error about a channel, so keys.ErrInvalid
	// too, as the package's errors say.
	_, err = tp.SubscribeChannels(ctx, []string{"emq:{q}:pending"}, func(topic.Event) {})
	require.ErrorIs(t, err, topic.ErrInvalid)
	require.ErrorIs(t, err, keys.ErrInvalid)
	require.ErrorContains(t, err, "is a pending key")
}

// TestTooLarge: a payload past Config.MaxPayload is refused before anything is sent; the
// default limit is 512 KiB.
func TestTooLarge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := valkeytest.Shared(t).Client(t)
	name := valkeytest.TestName(t)
	rec := newRecorder()
	sub, err := newTopics(t, c, topic.Config{}).Subscribe(ctx, []string{name}, rec.handle)
	require.NoError(t, err)
	defer sub.Close()

	small := newTopics(t, c, topic.Config{MaxPayload: 64})
	_, err = small.Publish(ctx, name, bytes.Repeat([]byte("x"), 65))
	require.ErrorIs(t, err, topic.ErrTooLarge)
	require.ErrorContains(t, err, "the limit is 64")
	n, err := small.Publish(ctx, name, bytes.Repeat([]byte("x"), 64))
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "64 bytes pass")

	def := newTopics(t, c, topic.Config{})
	_, err = def.Publish(ctx, name, make([]byte, topic.DefaultMaxPayload+1))
	require.ErrorIs(t, err, topic.ErrTooLarge)
	require.ErrorContains(t, err, "524288")

	// Only the 64-byte message arrived.
	rec.waitFor(t, "the 64-byte message", func(ev []topic.Event) bool { return count(ev, topic.Message) == 1 })
	_, err = small.Publish(ctx, name, []byte("last"))
	require.NoError(t, err)
	events := rec.waitFor(t, "the last message", func(ev []topic.Event) bool { return count(ev, topic.Message) == 2 })
	require.Equal(t, []string{name + "=" + strings.Repeat("x", 64), name + "=last"}, messages(events))
}
