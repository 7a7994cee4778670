package live

import (
	"fmt"
	"io"
	"os"
)

// The text of a live result, as tasks.read_block pages through it: each
// stream under a header line naming it and its size, followed by a line
// break.

func header(s *stream) string {
	total := s.heapLen + s.fileLen + s.dropped
	h := fmt.Sprintf("[%s: %d bytes", s.name, total)
	if s.dropped > 0 {
		h += fmt.Sprintf("; the last %d were dropped: beyond the spill limit", s.dropped)
		if s.r.spillE != nil {
			h = fmt.Sprintf("[%s: %d bytes; the last %d were dropped (%v)", s.name, total, s.dropped, s.r.spillE)
		}
	}
	return h + "]\n"
}

// Size returns the length of the result's text.
func (r *Result) Size() (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.freed {
		return 0, ErrReleased
	}
	var n int64
	for _, s := range r.streams {
		n += int64(len(header(s))) + s.heapLen + s.fileLen + 1
	}
	return n, nil
}

// ReadAt reads the result's text from off (io.ReaderAt); it returns
// ErrReleased once the result was released.
func (r *Result) ReadAt(p []byte, off int64) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.freed {
		return 0, ErrReleased
	}
	n := 0
	pos := int64(0) // start of the current piece in the text
	// piece copies what of [pos, pos+size) lies at or after off+n.
	piece := func(size int64, read func(dst []byte, at int64) error) error {
		defer func() { pos += size }()
		want := off + int64(n)
		if n == len(p) || want >= pos+size || want < pos {
			return nil
		}
		k := min(int64(len(p)-n), pos+size-want)
		if err := read(p[n:n+int(k)], want-pos); err != nil {
			return err
		}
		n += int(k)
		return nil
	}
	str := func(s string) func([]byte, int64) error {
		return func(dst []byte, at int64) error { copy(dst, s[at:]); return nil }
	}
	for _, s := range r.streams {
		h := header(s)
		if err := piece(int64(len(h)), str(h)); err != nil {
			return n, err
		}
		for _, c := range s.chunks {
			if err := piece(int64(len(c)), func(dst []byte, at int64) error { copy(dst, c[at:]); return nil }); err != nil {
				return n, err
			}
		}
		if s.fileLen > 0 {
			if err := piece(s.fileLen, s.readFile); err != nil {
				return n, err
			}
		}
		if err := piece(1, str("\n")); err != nil {
			return n, err
		}
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (s *stream) readFile(dst []byte, at int64) error {
	f := s.file
	if f == nil {
		var err error
		if f, err = os.Open(s.path); err != nil {
			return fmt.Errorf("live: read the spill file: %w", err)
		}
		defer f.Close()
	}
	if _, err := f.ReadAt(dst, at); err != nil {
		return fmt.Errorf("live: read the spill file: %w", err)
	}
	return nil
}
