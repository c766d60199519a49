package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"time"

	"github.com/golang/snappy"
)

// heldInMemory is how much of a held output heldOutput keeps in memory
// (bytes); the rest goes, compressed, to a temporary file. The buffer
// grows by doubling, so while it grows it takes up to three times this;
// 1 MiB holds the indented plan file of 700 to 1,000 stages, and at 10,000
// stages keeps the command's peak memory 4 to 7 MiB lower than 4 MiB did.
var heldInMemory = 1 << 20

// heldOutput is output written before it may be printed: `dagrun plan`
// encodes the plan while the verifier runs and prints it only once the
// verifier has passed it, so that a plan with races leaves no output. Its
// first heldInMemory bytes stay in memory, the rest go to a temporary
// file that is unlinked as soon as it is made (nothing is left behind,
// however the command ends), so that a plan file of hundreds of MB does
// not add its size to the verifier's peak memory. The file holds the
// bytes in the Snappy framing format (github.com/golang/snappy): a plan's
// JSON takes a tenth of its size or less there, so the page cache the
// file takes, and the time it takes to write and read back, are that
// much less. When no temporary file can be made, it all stays in memory.
type heldOutput struct {
	mem  bytes.Buffer
	file *os.File       // nil until mem is full
	z    *snappy.Writer // compresses into file
	err  error          // the first write error; the output is then not printed from here
	// inMemory is set when no temporary file could be made.
	inMemory bool
	ms       float64 // the time spent encoding into it, ms
}

func (h *heldOutput) Write(p []byte) (int, error) {
	if h.err != nil {
		return 0, h.err
	}
	if h.file == nil && !h.inMemory && h.mem.Len()+len(p) > heldInMemory {
		if f, err := os.CreateTemp("", "dagrun-plan-*"); err == nil {
			os.Remove(f.Name()) // open, unlinked: gone when closed or when the process ends
			h.file, h.z = f, snappy.NewBufferedWriter(f)
		} else {
			h.inMemory = true // no temporary file: all of it in memory
		}
	}
	if h.file == nil {
		return h.mem.Write(p)
	}
	if h.mem.Len() > 0 {
		if _, err := h.z.Write(h.mem.Bytes()); err != nil {
			h.err = err
			return 0, err
		}
		h.mem = bytes.Buffer{}
	}
	n, err := h.z.Write(p)
	if err != nil {
		h.err = err
	}
	return n, err
}

// hold runs encode into h, timing it; an error of encode is h's error.
func (h *heldOutput) hold(encode func(w io.Writer) error) {
	t0 := time.Now()
	if err := encode(h); err != nil && h.err == nil {
		h.err = err
	}
	h.ms = msSince(t0)
}

// writeTo prints what h holds to w and releases it.
func (h *heldOutput) writeTo(w io.Writer) error {
	defer h.discard()
	if h.file == nil {
		_, err := w.Write(h.mem.Bytes())
		return err
	}
	if err := h.z.Close(); err != nil { // the last block into the file
		return err
	}
	if _, err := h.file.Seek(0, io.SeekStart); err != nil {
		return err
	}
	_, err := io.Copy(w, snappy.NewReader(bufio.NewReaderSize(h.file, 1<<20)))
	return err
}

// discard releases what h holds, printing nothing.
func (h *heldOutput) discard() {
	h.mem = bytes.Buffer{}
	if h.file != nil {
		h.file.Close()
		h.file, h.z = nil, nil
	}
}
