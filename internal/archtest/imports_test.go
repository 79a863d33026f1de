package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// module is the module whose packages the table governs.
const module = "github.com/echocache/echocache"

// allowed is, for every package of the module (by its path below the module root), the
// packages of ours its non-test files may import. Test files import freely. A package
// missing here fails the test: add it with its arrows, keeping them pointing one way.
var allowed = map[string][]string{
	// The library, bottom up: keys <- lua <- topic <- bus; keys, lua, topic, tables <- cache.
	"keys":   {},
	"lua":    {"keys"},
	"topic":  {"keys", "lua"},
	"bus":    {"keys", "lua", "topic", "internal/panics", "internal/jsonfmt"},
	"tables": {"keys"},
	"cache":  {"keys", "lua", "tables", "topic", "internal/panics", "internal/jsonfmt", "internal/msgpackfmt"},

	// Helpers. internal/valkeytest may appear in no list: only tests import it.
	"internal/valkeytest": {"keys"},
	"internal/archtest":   {},
	"internal/panics":     {},
	"internal/jsonfmt":    {},
	"internal/msgpackfmt": {},
	// The fleets' monotonic sums, shared by the exporters of contrib/ (nested modules).
	"internal/fleetsum": {"bus", "cache"},
	// The scene of the exporters' lane tests (test files of contrib/ import it).
	"internal/lanescene": {"bus"},
	// The protocol's document is generated from the grammar and the script headers; the
	// conformance vectors' runner is all test files.
	"internal/protocolgen": {"keys", "lua"},
	"conformance":          {},

	// The tools sit on top of the library (see toolRoots); nothing below imports them.
	"bench":                 {"cache", "tables"}, // InvalidationSide, shared with bench/peers
	"bench/cmd/benchreport": {"bench"},
	"bench/cmd/emqprofile":  {"bus", "keys", "lua"},
	"bench/cmd/scriptcost":  {"bus", "keys", "lua"},
	"cmd/emq":               {"bus", "cache", "dash", "keys"},
	"examples/jobs":         {"bus", "keys"},
	"examples/periodic":     {"bus"},
	"examples/quickstart":   {"cache", "tables"},
	// Test helpers for users: the one tool allowed the throwaway servers (see testHelpers).
	"echotest": {"bus", "keys", "internal/panics", "internal/valkeytest"},
	// The web dashboard reads the bus and the cache, and pipelines their reads (lua.Pipeline).
	"dash": {"bus", "cache", "keys", "lua"},
}

// toolRoots are the directories whose packages are tools: a package outside them never
// imports one, whatever its entry says.
var toolRoots = []string{"cmd", "dash", "contrib", "echotest", "examples", "bench"}

// testOnly are the helpers that only test files import.
var testOnly = []string{"internal/valkeytest", "internal/lanescene"}

// testHelpers are the public packages that exist for users' tests: they may import a testOnly
// helper (echotest wraps internal/valkeytest), and only tests import them in turn, since they
// are tools.
var testHelpers = []string{"echotest"}

// pkg is what the check reads of `go list -json`: the non-test imports, and the test
// imports, which it ignores.
type pkg struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

func isTool(rel string) bool {
	first, _, _ := strings.Cut(rel, "/")
	return slices.Contains(toolRoots, first)
}

// ours is path's place below the module root, or false for a package of another module.
func ours(path string) (string, bool) {
	if path == module {
		return ".", true
	}
	rel, ok := strings.CutPrefix(path, module+"/")
	return rel, ok
}

// violations lists every wrong arrow in pkgs against table, every package without an entry,
// and every entry that is wrong in itself or names no package.
func violations(pkgs []pkg, table map[string][]string) []string {
	var out []string
	for _, from := range slices.Sorted(maps.Keys(table)) {
		for _, to := range table[from] {
			if !isTool(from) && isTool(to) {
				out = append(out, fmt.Sprintf("the entry of %s lists the tool %s: nothing below the tools imports them", from, to))
			}
			if slices.Contains(testOnly, to) && !slices.Contains(testHelpers, from) {
				out = append(out, fmt.Sprintf("the entry of %s lists %s: only tests import it", from, to))
			}
		}
	}
	seen := map[string]bool{}
	for _, p := range pkgs {
		from, ok := ours(p.ImportPath)
		if !ok {
			continue
		}
		seen[from] = true
		may, ok := table[from]
		if !ok {
			out = append(out, fmt.Sprintf("%s has no entry in the table of allowed imports (internal/archtest/imports_test.go): add it with the packages of ours it may import", from))
			continue
		}
		for _, imp := range p.Imports {
			to, ok := ours(imp)
			if !ok || slices.Contains(may, to) {
				continue
			}
			switch {
			case !isTool(from) && isTool(to):
				out = append(out, fmt.Sprintf("%s imports %s: %s is a tool, and nothing below the tools imports them", from, to, to))
			case slices.Contains(testOnly, to) && !slices.Contains(testHelpers, from):
				out = append(out, fmt.Sprintf("%s imports %s outside its tests: only tests import it", from, to))
			default:
				out = append(out, fmt.Sprintf("%s imports %s: not an allowed arrow (%s may import %v)", from, to, from, may))
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(table)) {
		if !seen[name] {
			out = append(out, fmt.Sprintf("the table lists %s, which is no package of the module: remove its entry", name))
		}
	}
	return out
}

// listPackages runs `go list -json ./...` at the module root.
func listPackages(t *testing.T) []pkg {
	t.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	require.NoError(t, err)
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestImportDirection: every package of the module imports only what its entry allows.
func TestImportDirection(t *testing.T) {
	t.Parallel()
	pkgs := listPackages(t)
	var names []string
	for _, p := range pkgs {
		names = append(names, p.ImportPath)
	}
	require.Contains(t, names, module+"/cache", "go list saw the module")
	require.Empty(t, violations(pkgs, allowed), "wrong arrows between our packages")
}

// TestViolations: the check reports each kind of wrong arrow, and lets test imports be.
func TestViolations(t *testing.T) {
	t.Parallel()
	p := func(from string, imports ...string) pkg {
		full := func(rel string) string { return module + "/" + rel }
		q := pkg{ImportPath: full(from), Imports: []string{"context", "github.com/valkey-io/valkey-go"}}
		for _, imp := range imports {
			q.Imports = append(q.Imports, full(imp))
		}
		return q
	}
	table := map[string][]string{
		"keys":                {},
		"topic":               {"keys"},
		"bus":                 {"keys", "topic"},
		"cache":               {"keys", "topic"},
		"internal/valkeytest": {},
		"cmd/emq":             {"bus"},
	}
	good := []pkg{p("keys"), p("topic", "keys"), p("bus", "keys", "topic"), p("cache", "keys", "topic"), p("internal/valkeytest"), p("cmd/emq", "bus")}
	require.Empty(t, violations(good, table))
	helper := append(slices.Clone(good), p("echotest", "bus", "internal/valkeytest"))
	require.Empty(t, violations(helper, with(table, "echotest", "bus", "internal/valkeytest")), "echotest wraps the throwaway servers")

	withTests := slices.Clone(good)
	withTests[3].TestImports = []string{module + "/bus", module + "/internal/valkeytest"}
	withTests[3].XTestImports = []string{module + "/cmd/emq"}
	require.Empty(t, violations(withTests, table), "test imports are free")

	for _, tc := range []struct {
		name  string
		pkgs  []pkg
		table map[string][]string
		want  string
	}{
		{"cache imports bus", replace(good, p("cache", "keys", "topic", "bus")), table,
			"cache imports bus: not an allowed arrow (cache may import [keys topic])"},
		{"topic imports bus", replace(good, p("topic", "keys", "bus")), table,
			"topic imports bus: not an allowed arrow"},
		{"keys imports ours", replace(good, p("keys", "topic")), table,
			"keys imports topic: not an allowed arrow (keys may import [])"},
		{"a library package imports a tool", replace(good, p("bus", "keys", "topic", "cmd/emq")), table,
			"bus imports cmd/emq: cmd/emq is a tool"},
		{"a library entry lists a tool", replace(good, p("bus", "keys", "topic", "cmd/emq")), with(table, "bus", "keys", "topic", "cmd/emq"),
			"the entry of bus lists the tool cmd/emq"},
		{"valkeytest outside tests", replace(good, p("cache", "keys", "topic", "internal/valkeytest")), table,
			"cache imports internal/valkeytest outside its tests: only tests import it"},
		{"an entry lists valkeytest", good, with(table, "cmd/emq", "bus", "internal/valkeytest"),
			"the entry of cmd/emq lists internal/valkeytest: only tests import it"},
		{"a new package", append(slices.Clone(good), p("lanes", "keys")), table,
			"lanes has no entry in the table of allowed imports (internal/archtest/imports_test.go): add it"},
		{"a stale entry", good, with(table, "dash", "bus"),
			"the table lists dash, which is no package of the module: remove its entry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := violations(tc.pkgs, tc.table)
			require.Len(t, got, 1, "%q", got)
			require.Contains(t, got[0], tc.want)
		})
	}
}

// replace is pkgs with the package of q's path swapped for q.
func replace(pkgs []pkg, q pkg) []pkg {
	out := slices.Clone(pkgs)
	for i := range out {
		if out[i].ImportPath == q.ImportPath {
			out[i] = q
		}
	}
	return out
}

// with is table with from's entry set to may.
func with(table map[string][]string, from string, may ...string) map[string][]string {
	out := maps.Clone(table)
	out[from] = may
	return out
}
