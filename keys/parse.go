package keys

import (
	"fmt"
	"strings"
)

// Parse reads any string as a key of the grammar. It is total: every string either parses
// into a Key whose String is the input, or returns an error wrapping [ErrInvalid].
func Parse(s string) (Key, error) {
	var k Key
	var rest string
	switch {
	case strings.HasPrefix(s, cachePrefix):
		k.Role, rest = Cache, s[len(cachePrefix):]
	case strings.HasPrefix(s, busPrefix):
		k.Role, rest = Bus, s[len(busPrefix):]
	default:
		return Key{}, fmt.Errorf("%w key %q: neither the ecc: nor the emq: prefix", ErrInvalid, clip(s))
	}
	switch s {
	case queueRegistry:
		return Key{Role: Bus, Type: Queues}, nil
	case tableRegistry:
		return Key{Role: Cache, Type: Tables}, nil
	}
	if len(rest) == 0 || rest[0] != '{' {
		return Key{}, fmt.Errorf("%w key %q: the prefix must be followed by {<name>}", ErrInvalid, clip(s))
	}
	end := strings.IndexByte(rest, '}')
	if end < 0 {
		return Key{}, fmt.Errorf("%w key %q: unclosed hash tag", ErrInvalid, clip(s))
	}
	k.Name, rest = rest[1:end], rest[end+1:]
	sharded := false
	if i := strings.IndexByte(k.Name, shardSep); i >= 0 {
		n, err := parseShard(k.Name[i+1:])
		if err != nil {
			return Key{}, fmt.Errorf("key %q: %w", clip(s), err)
		}
		k.Name, k.Shard, sharded = k.Name[:i], n, true
	}
	if err := ValidateName(k.Name); err != nil {
		return Key{}, fmt.Errorf("key %q: %w", clip(s), err)
	}
	if k.Role == Cache {
		switch {
		case rest == "":
			k.Type = Record
			if sharded {
				k.Type = ShardRecord
			}
			return k, nil
		case rest == tableStatsSuffix && !sharded:
			k.Type = TableStats
			return k, nil
		case rest[0] != ':':
			return Key{}, fmt.Errorf("%w key %q: the hash tag must be followed by :<id>, %s or nothing", ErrInvalid, clip(s), tableStatsSuffix)
		}
		k.Type, k.ID = Row, rest[1:]
		if sharded {
			k.Type = ShardRow
		}
		if err := ValidateID(k.ID); err != nil {
			return Key{}, fmt.Errorf("key %q: %w", clip(s), err)
		}
		return k, nil
	}
	if rest == "" || rest[0] != ':' {
		return Key{}, fmt.Errorf("%w key %q: the hash tag must be followed by :<type>", ErrInvalid, clip(s))
	}
	rest = rest[1:]
	if sharded {
		if rest != suffix[Inval] {
			return Key{}, fmt.Errorf("%w key %q: a shard's hash tag {<table>#<shard>} under emq: takes only :inval", ErrInvalid, clip(s))
		}
		k.Type = ShardInval
		return k, nil
	}
	for t := Inval; t <= lastType; t++ {
		if int(t) >= len(suffix) || suffix[t] == "" {
			continue // a cache type, or a registry: not spelled after a queue's tag
		}
		sfx := suffix[t]
		switch t {
		case Job, Unique, Periodic, Errors, Result, LanePending, LaneLog:
			if !strings.HasPrefix(rest, sfx) {
				continue
			}
			k.Type, k.ID = t, rest[len(sfx):]
			var err error
			switch t {
			case Job, Errors, Result:
				_, err = ParseJobID(k.ID)
			case Unique:
				err = ValidateID(k.ID)
			default:
				err = ValidateName(k.ID) // a schedule or a lane is named like a queue
			}
			if err != nil {
				return Key{}, fmt.Errorf("key %q: %w", clip(s), err)
			}
			return k, nil
		default:
			if rest == sfx {
				k.Type = t
				return k, nil
			}
		}
	}
	return Key{}, fmt.Errorf("%w key %q: unknown type; the bus types are pending, active, schedule, dead, meta, wake, job:<JOB id>, uniq:<key>, inval, topic, periodic:<name>, periodics, errors:<JOB id>, result:<JOB id>, workers, flow, lanes, laneactive, laneready, lanewait, joblane, urgent, flowlog, lanepending:<lane>, lanelog:<lane>", ErrInvalid, clip(s))
}

// parseShard reads a shard index: a decimal in [0, MaxShards) without leading zeros, so each
// shard has exactly one spelling.
func parseShard(s string) (int, error) {
	bad := func() (int, error) {
		return 0, fmt.Errorf("%w shard %q: a shard is a decimal in [0, %d] without leading zeros", ErrInvalid, s, MaxShards-1)
	}
	if s == "" || len(s) > 3 || len(s) > 1 && s[0] == '0' {
		return bad()
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return bad()
		}
		n = n*10 + int(s[i]-'0')
	}
	if n >= MaxShards {
		return bad()
	}
	return n, nil
}

// clip keeps error texts short for long hostile inputs.
func clip(s string) string {
	if len(s) > 96 {
		return s[:96] + "..."
	}
	return s
}
