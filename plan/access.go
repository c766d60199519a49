package plan

// Race kinds, named from the point of view of declaration order: the first
// stage's access, then the second's.
const (
	RaceRAW = "RAW" // first writes, second reads
	RaceWAR = "WAR" // first reads, second writes
	RaceWAW = "WAW" // both write
)

// AccessBuffers returns, per access of p (stage by stage, reads then
// writes), the index in p.Buffers of its buffer, or -1 for a name p does
// not declare. The verifier's own p.AccBuf (Plan.AccOwn) is returned as
// it is. Any other p.AccBuf (Build's) is a hint: an
// entry is used where the buffer it names has the access's name, and
// every other access's name is looked up in a map of p's buffer names
// (made only then), so that the result does not depend on the passes.
func AccessBuffers(p *Plan) []int32 {
	n := 0
	for i := range p.Stages {
		n += len(p.Stages[i].Reads) + len(p.Stages[i].Writes)
	}
	hint := p.AccBuf
	if len(hint) != n {
		hint = nil
	} else if p.AccOwn {
		return hint
	}
	var idx map[string]int32
	out := make([]int32, 0, n)
	for i := range p.Stages {
		for _, list := range [2][]Access{p.Stages[i].Reads, p.Stages[i].Writes} {
			for _, a := range list {
				if hint != nil {
					if b := hint[len(out)]; b >= 0 && int(b) < len(p.Buffers) && p.Buffers[b].Name == a.Buffer {
						out = append(out, b)
						continue
					}
				}
				if idx == nil {
					idx = make(map[string]int32, len(p.Buffers))
					for i, b := range p.Buffers {
						idx[b.Name] = int32(i)
					}
				}
				b, ok := idx[a.Buffer]
				if !ok {
					b = -1
				}
				out = append(out, b)
			}
		}
	}
	return out
}
