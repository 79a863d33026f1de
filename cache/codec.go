package cache

import "encoding/json"

// Codec encodes values for L2. L1 keeps values decoded, so a codec runs on fills and L2
// reads only, never on an L1 hit. Implementations must be safe for concurrent use; Unmarshal
// must not keep data after it returns.
type Codec[V any] interface {
	Marshal(v V) ([]byte, error)
	Unmarshal(data []byte, v *V) error
}

// JSON is the default [Codec]: encoding/json.
type JSON[V any] struct{}

// Marshal encodes v with encoding/json.
func (JSON[V]) Marshal(v V) ([]byte, error) { return json.Marshal(v) }

// Unmarshal decodes data with encoding/json.
func (JSON[V]) Unmarshal(data []byte, v *V) error { return json.Unmarshal(data, v) }
