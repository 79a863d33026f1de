package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Row is the small record every cache benchmark reads: our tables, raw
// ristretto, raw GET and the peers all hold the same value, so a ratio
// compares the machinery and not the payload. Its JSON form is about 100
// bytes, a typical cached database row.
type Row struct {
	ID      int64  `json:"id"`
	Name    string `json:"name"`
	Email   string `json:"email"`
	Balance int64  `json:"balance"`
	Active  bool   `json:"active"`
}

// SampleRow returns the row with the given id; the same id always gives the
// same row.
func SampleRow(id int64) Row {
	return Row{
		ID:      id,
		Name:    "user-" + strconv.FormatInt(id, 10),
		Email:   "user-" + strconv.FormatInt(id, 10) + "@example.com",
		Balance: id * 100,
		Active:  id%2 == 0,
	}
}

// SampleRowJSON is SampleRow(id) encoded as JSON, the bytes a raw GET
// benchmark stores.
func SampleRowJSON(id int64) []byte {
	b, err := json.Marshal(SampleRow(id))
	if err != nil {
		panic(err) // a Row always encodes
	}
	return b
}

// uniqueSeq makes UniqueName distinct within one process.
var uniqueSeq atomic.Uint64

// UniqueName returns a name for a table, queue or key prefix that no other
// benchmark run on the same server uses: the benchmark's name sanitized to
// [A-Za-z0-9_.-] and cut so that the result fits in 64 bytes, then the
// process id, the time and a sequence number. A benchmark function runs
// several times (once per b.N it tries, and once per -count), and every
// round of `make bench` is a new process on the same server, so the suffix
// matters.
func UniqueName(benchName string) string {
	var sb strings.Builder
	for _, r := range benchName {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.', r == '-':
			sb.WriteRune(r)
		default:
			sb.WriteByte('_')
		}
	}
	suffix := fmt.Sprintf("_%x_%x_%x", os.Getpid(), time.Now().UnixNano()&0xffffffffff, uniqueSeq.Add(1))
	head := sb.String()
	if room := 64 - len(suffix); len(head) > room {
		head = head[:room]
	}
	return head + suffix
}
