package dag

// Limits of the spec format (docs/spec.md, "Limits"). A spec beyond one is
// refused with an error at the place it is exceeded that names the limit;
// they bound what a spec file can make the loader build, whoever wrote it.
const (
	// MaxSpecBytes bounds a spec file's size (1 GiB): a spec of a million
	// stages is about 200 MB of YAML.
	MaxSpecBytes = 1 << 30
	// MaxYAMLv3Bytes bounds a YAML spec outside the streaming scanner's
	// subset (internal/yamlscan: anchors and aliases, tags, block and
	// multi-line scalars, tabs, directives), which yaml.v3 parses into a
	// node tree of the whole document, about 70 bytes of memory per byte
	// of YAML (a 24 MB spec, 1.7 GB): 32 MiB, about 2 GB. Specs within the
	// subset, and JSON specs, are parsed item by item up to MaxSpecBytes.
	MaxYAMLv3Bytes = 32 << 20
	// MaxStages bounds the stages of a spec (2^22).
	MaxStages = 1 << 22
	// MaxBuffers bounds the buffers of a spec (2^22).
	MaxBuffers = 1 << 22
	// MaxKernels bounds the user kernels of a spec (2^16).
	MaxKernels = 1 << 16
	// MaxStageAccesses bounds the reads and the writes of one stage (2^16
	// each).
	MaxStageAccesses = 1 << 16
	// MaxAccesses bounds the reads and writes of all stages together (2^25).
	MaxAccesses = 1 << 25
	// MaxBufferBytes bounds one buffer's size, and the sum of every
	// buffer's bytes times its copies (1 TiB, the plan format's
	// plan.MaxBufferBytes).
	MaxBufferBytes = 1 << 40
	// MaxHazards bounds the hazards of a spec's hazard graph (Hazards):
	// the labelled pairs of conflicting accesses it keeps (those no other
	// edges imply), about 160 bytes each through planning. A spec may have
	// HazardsPerAccess per read, write and after: entry, or MaxHazards
	// (2^22, about 650 MiB), whichever is more; a spec where each of many
	// stages reads what many unordered earlier stages wrote (n writers and
	// n readers of all they wrote: n² pairs, none implied by another)
	// passes it and is refused at the stage where it does. A stage reading
	// what every earlier stage wrote in order (a prefix of a buffer every
	// stage appends to) keeps one edge, not one per earlier stage.
	MaxHazards = 1 << 22
	// HazardsPerAccess is the hazards a spec may have per access (see
	// MaxHazards).
	HazardsPerAccess = 4
	// MaxHazardOverlaps bounds the work of the hazard analysis (Hazards):
	// the byte ranges of earlier accesses that the spec's accesses meet
	// (live segments, and candidate pairs found in them), each examined
	// once whether or not its edge is kept, and each of a read's taking
	// at most 12 bytes until a write covers its bytes. A spec may have
	// OverlapsPerAccess per read, write and after: entry, or
	// MaxHazardOverlaps (2^26: at most about 800 MB, a few seconds),
	// whichever is more; a spec of n stages each reading the prefix that
	// the earlier stages' writes tile meets n² (within the limit up to
	// n = 8,192, a YAML spec of about 1.1 MB) and is refused at the stage
	// where it passes.
	MaxHazardOverlaps = 1 << 26
	// OverlapsPerAccess is the overlaps a spec may have per access (see
	// MaxHazardOverlaps).
	OverlapsPerAccess = 16
	// hazardSearchPerCandidate bounds, per candidate of a stage, the edges
	// Hazards follows back to find candidates that happen before others.
	hazardSearchPerCandidate = 16
)

// maxYAMLv3Bytes is MaxYAMLv3Bytes (tests lower it).
var maxYAMLv3Bytes = MaxYAMLv3Bytes

// maxHazards is MaxHazards (tests lower it).
var maxHazards = MaxHazards

// maxHazardOverlaps is MaxHazardOverlaps (tests lower it).
var maxHazardOverlaps = MaxHazardOverlaps

// limits are the limits the loader applies (tests lower them).
var limits = struct{ stages, buffers, kernels, accesses int }{MaxStages, MaxBuffers, MaxKernels, MaxAccesses}

// LoadOptions control LoadFileWith and LoadWith.
type LoadOptions struct {
	// AllowOutside lets init files and PTX files lie outside the spec's
	// folder: absolute paths, "..", symbolic links that lead out. By
	// default they are refused, without looking them up, so that a spec
	// from someone else can neither read nor probe the user's other files.
	AllowOutside bool
}

// LoadFileWith is LoadFile with options.
func LoadFileWith(path string, o LoadOptions) (*Spec, error) { return loadFile(path, o) }

// LoadWith is Load with options.
func LoadWith(data []byte, file, dir string, o LoadOptions) (*Spec, error) {
	s, err, _ := loadText(string(data), file, dir, o, false)
	return s, err
}
