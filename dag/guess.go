package dag

import "hash/maphash"

// bufferGuess finds the buffers of accesses, met stage by stage in
// declaration order, without a look-up in a name map (a cache miss or
// several, in a map of a million names) where it can. It tries two
// guesses, each checked against the name: the buffer after the one the
// previous stage's access in the same position of its reads (or writes)
// named (machine-written specs often declare buffers in the order their
// stages write them), and a cache of the buffers accessed lately, by
// their name's hash (stages mostly read what stages shortly before them
// wrote). The loader's check and Hazards use it.
type bufferGuess struct {
	next   [2][4]knownBuffer // reads, writes: by position in the list
	recent [1024]knownBuffer
}

// knownBuffer is a buffer name and 1 + its index (0: none).
type knownBuffer struct {
	name string
	i    int32
}

// guessSeed hashes names into bufferGuess.recent.
var guessSeed = maphash.MakeSeed()

func (g *bufferGuess) slot(name string) *knownBuffer {
	return &g.recent[maphash.String(guessSeed, name)%uint64(len(g.recent))]
}

// find returns the buffer a guess names for an access of name in
// position j of a stage's reads (or writes), if a guess names it.
func (g *bufferGuess) find(name string, write bool, j int) (int, bool) {
	if w := b2i(write); j < len(g.next[w]) {
		if n := &g.next[w][j]; n.i > 0 && n.name == name {
			return int(n.i - 1), true
		}
	}
	if r := g.slot(name); r.i > 0 && r.name == name {
		return int(r.i - 1), true
	}
	return 0, false
}

// found records that the access in position j is to buffer bi of bufs, for the guesses of the accesses after it. next says whether a
// buffer may be guessed as the next one (the buffer a look-up by its
// name would find: with names declared twice, the right declaration).
func (g *bufferGuess) found(bufs []BufferSpec, write bool, j, bi int, next func(i int) bool) {
	*g.slot(bufs[bi].Name) = knownBuffer{bufs[bi].Name, int32(bi) + 1}
	if w := b2i(write); j < len(g.next[w]) {
		g.next[w][j] = knownBuffer{}
		if k := bi + 1; k < len(bufs) && (next == nil || next(k)) {
			g.next[w][j] = knownBuffer{bufs[k].Name, int32(k) + 1}
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
