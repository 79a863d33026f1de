package conformance_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// vector is one file of vectors/.
type vector struct {
	Name  string `json:"name"`
	Doc   string `json:"doc"`
	Names []string
	Steps []step `json:"steps"`
	file  string
}

type step struct {
	Note      string               `json:"note"`
	Call      string               `json:"call"`
	Keys      []any                `json:"keys"`
	Args      []any                `json:"args"`
	Cmd       []any                `json:"cmd"`
	Reply     json.RawMessage      `json:"reply"`
	Error     string               `json:"error"`
	Expect    map[string]keyExpect `json:"expect"`
	Scan      []any                `json:"scan"`
	Unchanged bool                 `json:"unchanged"`
	Class     string               `json:"class"`
	Mutate    *bool                `json:"mutate"`
	Mint      int                  `json:"mint"`
	SleepMS   int                  `json:"sleep_ms"`
	Slot      string               `json:"slot"`
	Is        *int                 `json:"is"`
	Subscribe string               `json:"subscribe"`
	Messages  string               `json:"messages"`
	Are       []json.RawMessage    `json:"are"`
	Set       map[string]string    `json:"set"`
	Until     json.RawMessage      `json:"until"`
	Max       int                  `json:"max"`
}

type keyExpect struct {
	Type    string                     `json:"type"`
	Card    *int64                     `json:"card"`
	Members []string                   `json:"members"`
	Scores  map[string]json.RawMessage `json:"scores"`
	HLen    *int64                     `json:"hlen"`
	Fields  map[string]string          `json:"fields"`
	Len     *int64                     `json:"len"`
	Value   json.RawMessage            `json:"value"`
	PTTL    json.RawMessage            `json:"pttl"`
}

func loadVectors() ([]*vector, error) {
	files, err := filepath.Glob(filepath.Join("vectors", "*.json"))
	if err != nil {
		return nil, err
	}
	var out []*vector
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var v struct {
			vector
			Names []string `json:"names"`
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		vec := v.vector
		vec.Names, vec.file = v.Names, filepath.Base(f)
		if len(vec.Names) == 0 {
			vec.Names = []string{"q"}
		}
		out = append(out, &vec)
	}
	return out, nil
}
