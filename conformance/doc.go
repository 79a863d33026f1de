// Package conformance holds the protocol's conformance vectors, vectors/*.json, and their Go
// runner (go test ./conformance). A vector is language-neutral: a sequence of steps that call
// the scripts of lua/ by name with raw EVALSHA, and the replies and keyspace effects a
// conforming server side must show. A client in another runtime that loads the same script
// files replays the same vectors against a server; PROTOCOL.md at the repository root is the
// interface they exercise.
//
// # Vectors
//
// A file is one object: "name", "doc", "names" (the placeholders for fresh names; default
// ["q"]) and "steps". Each step is one of:
//
//	{"call": "<script>", "keys": [...], "args": [...], "reply": <match> | "error": "<prefix>"}
//	{"cmd": ["ZCARD", "<a key>"], "reply": <match>}   a plain command, keys in grammar form
//	{"mint": N}                  mint N JOB ids, in order: ${job:1}, ${job:2}, ...
//	{"sleep_ms": N}              wait N ms (server time advances with it)
//	{"slot": "{orders}", "is": 105}   CRC16 slot of a key; on a cluster also CLUSTER KEYSLOT
//	{"subscribe": "<channel>"}   SSUBSCRIBE to a shard channel and keep its messages
//	{"messages": "<channel>", "are": [<match>, ...]}   the messages received so far
//
// A call without "keys" takes its header's KEYS with <q> and <table> read as $q. Any step may
// add "expect" (a map from key to a key expectation, checked after the step), "scan" (the
// keys that exist under the vector's hash tags after the step: exactly these), "unchanged":
// true (the keyspace after the step equals the keyspace before it), "class" (names the bad
// input a step sends, for the closing table of refusals) and "mutate": false (see below).
//
// Strings expand, in this order: ${i} inside {"for": [from, to], "each": ...}, which repeats
// its items for i = from..to inside a list; $q (each name of "names") to a name fresh per run;
// then ${job:N} (the Nth minted id), ${now:+N} (the server's TIME in ms, read before the step,
// plus N), ${hex:ec01} (raw bytes), ${rep:N:s} (s N times) and ${var:x} (a value bound
// earlier).
//
// A reply <match> is a JSON number (an integer reply), a string (a bulk or status string),
// null, an array (element by element), or an object: {"time": N} (an integer between TIME
// before the step + N and TIME after it + N), {"re": "..."} (a string matching the regular
// expression), {"bind": "x"} (anything, kept as ${var:x}), {"any": true}, {"len": N} (an array
// of N elements), {"between": [lo, hi]}.
//
// A key expectation is an object with "type" (string, hash, zset, list or none) and any of
// "card", "members" (ZRANGE 0 -1 in order), "scores" (member to <match>), "hlen", "fields"
// (HGETALL, exactly), "len", "value" (GET, a <match>) and "pttl" ([lo, hi], -1, or {"of": N}:
// at most N and at least N minus the ms the step and its checks took).
//
// # Refusals derived from every successful call
//
// Before each successful call (unless it says "mutate": false) the runner sends variants that
// a conforming script must refuse without writing: each argument replaced by each bad value
// of its rule (for uint: 1e3, 0x10, +1, " 1", "1 ", -1, 1.0, "", 16 digits, lo-1, hi+1; for
// tokens, ids, JOB ids, SHA1s, cursors and rows their own), one argument too many, one key
// too few or too many, each key replaced by another type's key of the same hash tag (or by a
// registry, which has none, where that does not put a call's keys in two slots), each absent
// key created with the wrong value type, and (standalone only, where slots do not
// matter) every key moved to an invalid or a foreign name. Each must answer the role's KEYS,
// ARGS or TYPE error code and leave the keyspace exactly as it was (SCAN and every value).
// The error codes the vectors and the refusals provoke must cover every code each header
// declares.
package conformance
