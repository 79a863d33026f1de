package lua

import (
	"context"

	"github.com/valkey-io/valkey-go"
)

// Run is one call of a script: the script, its KEYS and its ARGV, in header order.
type Run struct {
	Script *Script
	Keys   []string
	Args   []string
}

// Doer is what [Pipeline] needs of a connection: a valkey.Client and a
// valkey.DedicatedClient both have it.
type Doer interface {
	B() valkey.Builder
	DoMulti(ctx context.Context, multi ...valkey.Completed) []valkey.ValkeyResult
}

// Pipeline sends runs in one round trip (per node, on a cluster) by EVALSHA, in order, and
// sends the runs the server answered NOSCRIPT again by EVAL in a second round trip. A run
// answered NOSCRIPT did not execute, so sending it again cannot apply it twice; nothing else
// is resent, so a write that may have landed is never sent twice behind the caller's back.
//
// then, when not nil, builds a command that follows the runs in each round trip (WAIT or
// WAITAOF, whose wait must cover every write sent before it on the same connection); its
// reply is the one of the last round trip. replies[i] is the reply of runs[i].
func Pipeline(ctx context.Context, c Doer, runs []Run, then func(valkey.Builder) valkey.Completed) (replies []valkey.ValkeyResult, thenReply valkey.ValkeyResult) {
	replies = make([]valkey.ValkeyResult, len(runs))
	todo := make([]int, len(runs))
	for i := range todo {
		todo[i] = i
	}
	for attempt := 0; attempt < 2 && len(todo) > 0; attempt++ {
		cmds := make(valkey.Commands, 0, len(todo)+1)
		for _, i := range todo {
			cmds = append(cmds, command(c.B(), runs[i], attempt == 0))
		}
		if then != nil {
			cmds = append(cmds, then(c.B()))
		}
		res := c.DoMulti(ctx, cmds...)
		again := todo[:0:0]
		for j, i := range todo {
			if attempt == 0 && isNoScript(res[j].Error()) {
				again = append(again, i)
				continue
			}
			replies[i] = res[j]
		}
		if then != nil {
			thenReply = res[len(todo)]
		}
		todo = again
	}
	return replies, thenReply
}

// command is run as EVALSHA (byHash) or EVAL.
func command(b valkey.Builder, r Run, byHash bool) valkey.Completed {
	n := int64(len(r.Keys))
	if byHash {
		return b.Evalsha().Sha1(r.Script.SHA1).Numkeys(n).Key(r.Keys...).Arg(r.Args...).Build()
	}
	return b.Eval().Script(r.Script.Source).Numkeys(n).Key(r.Keys...).Arg(r.Args...).Build()
}

func isNoScript(err error) bool {
	e, ok := valkey.IsValkeyErr(err)
	return ok && e.IsNoScript()
}
