//go:build !cuda

package cudart

import (
	"fmt"

	"github.com/dagrun/dagrun/executor"
)

// Available reports whether this binary was built with the cuda tag.
const Available = false

// New returns an error wrapping ErrNotSupported: this binary was built
// without the cuda tag.
func New(Options) (executor.Backend, error) {
	return nil, fmt.Errorf("cudart: %w", ErrNotSupported)
}

// Probe returns an error wrapping ErrNotSupported.
func Probe() error { return fmt.Errorf("cudart: %w", ErrNotSupported) }

// ProbeInfo returns an error wrapping ErrNotSupported.
func ProbeInfo() (Info, error) { return Info{}, Probe() }
