package contract

import "fmt"

// HazardKind is why one access must happen before another: the kinds of
// data hazard between a pair of accesses to overlapping bytes, named from
// the point of view of the earlier access then the later one, plus After,
// an order the spec asks for. Its text (String, JSON) is "RAW", "WAR",
// "WAW" or "after"; the kinds sort in that order.
type HazardKind uint8

const (
	RAW   HazardKind = iota // read after write: the later access reads bytes the earlier one wrote
	WAR                     // write after read: the later access overwrites bytes the earlier one read
	WAW                     // write after write: both write the same bytes; the later value must win
	After                   // control dependency: the later stage lists the earlier in its `after:`
)

var hazardKindNames = [...]string{RAW: "RAW", WAR: "WAR", WAW: "WAW", After: "after"}

func (k HazardKind) String() string {
	if int(k) < len(hazardKindNames) {
		return hazardKindNames[k]
	}
	return fmt.Sprintf("HazardKind(%d)", uint8(k))
}

// MarshalText writes k's name ("RAW", "WAR", "WAW" or "after").
func (k HazardKind) MarshalText() ([]byte, error) {
	if int(k) >= len(hazardKindNames) {
		return nil, fmt.Errorf("contract: %s is not a hazard kind", k)
	}
	return []byte(hazardKindNames[k]), nil
}

// UnmarshalText reads a name that MarshalText writes; any other text is an
// error.
func (k *HazardKind) UnmarshalText(b []byte) error {
	for i, n := range hazardKindNames {
		if n == string(b) {
			*k = HazardKind(i)
			return nil
		}
	}
	return fmt.Errorf("contract: hazard kind %q: want RAW, WAR, WAW or after", b)
}

// Hazard is one reason to order two accesses: Kind, and the bytes
// [Offset, Offset+Bytes) of Buffer that both touch (the intersection of the
// two accesses: Range().Intersect). An After hazard has no bytes (Buffer "",
// Bytes 0). Its JSON is {"kind", "buffer", "offset", "bytes"}.
type Hazard struct {
	Kind   HazardKind `json:"kind"`
	Buffer string     `json:"buffer"`
	Offset int64      `json:"offset"` // bytes
	Bytes  int64      `json:"bytes"`  // bytes
}

// Range is the bytes of h.
func (h Hazard) Range() Range { return Range{Buffer: h.Buffer, Offset: h.Offset, Bytes: h.Bytes} }

// String is "after", or the kind and the range: "RAW x[0:64]".
func (h Hazard) String() string {
	if h.Kind == After {
		return "after"
	}
	return h.Kind.String() + " " + h.Range().String()
}
