package contract

import "fmt"

// Where is where a buffer lives.
type Where string

// Buffer placements.
const (
	WhereDevice     Where = "device"      // device memory (cuMemAlloc)
	WhereHostPinned Where = "host_pinned" // page-locked host memory (cuMemAllocHost), reachable from host stages
	// WhereHostPageable is ordinary (pageable) host memory: copies to and
	// from it are staged through driver-owned pinned memory, with the
	// synchronization CUDA's "API synchronization behavior" table gives.
	WhereHostPageable Where = "host_pageable"
)

// Wheres lists the buffer placements.
var Wheres = []Where{WhereDevice, WhereHostPinned, WhereHostPageable}

// Valid reports whether w is one of Wheres.
func (w Where) Valid() bool {
	return w == WhereDevice || w == WhereHostPinned || w == WhereHostPageable
}

// Host reports whether w is host memory (pinned or pageable).
func (w Where) Host() bool { return w == WhereHostPinned || w == WhereHostPageable }

// ParseWhere returns s as a Where. It returns an error naming the valid
// placements when s is not one of them ("" included).
func ParseWhere(s string) (Where, error) {
	if w := Where(s); w.Valid() {
		return w, nil
	}
	return "", fmt.Errorf("where %q, want %s, %s or %s", s, WhereDevice, WhereHostPinned, WhereHostPageable)
}

// Role is what a buffer is for in a run.
type Role string

// Buffer roles.
const (
	RoleInput  Role = "input"  // written by the host before the run; stages may only read it
	RoleOutput Role = "output" // read back and checksummed after the run
	RoleTemp   Role = "temp"   // scratch; lives only within the run
)

// Roles lists the buffer roles.
var Roles = []Role{RoleInput, RoleOutput, RoleTemp}

// Valid reports whether r is one of Roles.
func (r Role) Valid() bool { return r == RoleInput || r == RoleOutput || r == RoleTemp }

// InitKind is how a buffer's initial contents are made.
type InitKind string

// Initial contents kinds.
const (
	InitZeros  InitKind = "zeros"  // all bytes 0
	InitFill   InitKind = "fill"   // every float32 element the same value
	InitFile   InitKind = "file"   // the raw bytes of a file, exactly the buffer's size
	InitRandom InitKind = "random" // bytes from a seeded PRNG
)

// InitKinds lists the initial contents kinds.
var InitKinds = []InitKind{InitZeros, InitFill, InitFile, InitRandom}

// Valid reports whether k is one of InitKinds.
func (k InitKind) Valid() bool {
	return k == InitZeros || k == InitFill || k == InitFile || k == InitRandom
}

// AllocMode is how the executor allocates a run's buffers.
type AllocMode string

// Allocation modes.
const (
	// AllocStatic allocates every buffer before the run; buffers the plan
	// places in its arena share one allocation. The default.
	AllocStatic AllocMode = "static"
	// AllocDynamic allocates each temp buffer in stream order just before
	// its first stage and frees it in stream order after its last use.
	AllocDynamic AllocMode = "dynamic"
)

// AllocModes lists the allocation modes.
var AllocModes = []AllocMode{AllocStatic, AllocDynamic}

// Valid reports whether m is one of AllocModes.
func (m AllocMode) Valid() bool { return m == AllocStatic || m == AllocDynamic }
