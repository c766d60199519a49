package contract

import (
	"encoding/json"
	"testing"
)

// A hazard's JSON names its kind; the names read back, and only they do.
func TestHazardJSON(t *testing.T) {
	for _, h := range []Hazard{
		{Kind: RAW, Buffer: "x", Offset: 8, Bytes: 8},
		{Kind: WAR, Buffer: "y", Bytes: 4},
		{Kind: WAW, Buffer: "z", Offset: 4, Bytes: 4},
		{Kind: After},
	} {
		b, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		want := `{"kind":"` + h.Kind.String() + `","buffer":"` + h.Buffer + `","offset":` + itoa(h.Offset) + `,"bytes":` + itoa(h.Bytes) + `}`
		if string(b) != want {
			t.Errorf("%s: JSON %s, want %s", h, b, want)
		}
		var back Hazard
		if err := json.Unmarshal(b, &back); err != nil || back != h {
			t.Errorf("%s: read back %v, %v", h, back, err)
		}
	}
	if got := (Hazard{Kind: RAW, Buffer: "x", Offset: 8, Bytes: 8}).String(); got != "RAW x[8:16]" {
		t.Errorf("String: %s", got)
	}
	if got := (Hazard{Kind: After}).String(); got != "after" {
		t.Errorf("String: %s", got)
	}
	var k HazardKind
	for _, bad := range []string{"raw", "After", "", "RAWW"} {
		if err := k.UnmarshalText([]byte(bad)); err == nil {
			t.Errorf("UnmarshalText(%q) = %s, want an error", bad, k)
		}
	}
	if _, err := HazardKind(4).MarshalText(); err == nil {
		t.Error("MarshalText(HazardKind(4)): want an error")
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }
