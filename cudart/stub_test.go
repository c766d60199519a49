//go:build !cuda

package cudart

import (
	"errors"
	"strings"
	"testing"
)

func TestStubSaysHowToBuild(t *testing.T) {
	b, err := New(Options{})
	if b != nil || !errors.Is(err, ErrNotSupported) {
		t.Fatalf("New without the cuda tag = %v, %v; want nil and ErrNotSupported", b, err)
	}
	if !strings.Contains(err.Error(), "scripts/build-gpu.sh") {
		t.Errorf("error %q does not say how to build with CUDA", err)
	}
	if err := Probe(); !errors.Is(err, ErrNotSupported) {
		t.Errorf("Probe = %v, want ErrNotSupported", err)
	}
}
