package openaicompat

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
)

// DefaultMaxLineBytes bounds one SSE line and one event's data.
const DefaultMaxLineBytes = 8 << 20

// DefaultMaxResponseBytes bounds what one answer may accumulate (the
// events' bytes: text, reasoning, tool arguments, reasoning details);
// MaxToolCalls bounds its tool calls.
const (
	DefaultMaxResponseBytes = 64 << 20
	MaxToolCalls            = 1024
)

// ErrResponseTooLarge is wrapped when an answer exceeds MaxResponseBytes or
// MaxToolCalls.
var ErrResponseTooLarge = errors.New("openaicompat: answer exceeds the size limit")

// ErrLineTooLong is wrapped when a stream line or event exceeds the cap.
var ErrLineTooLong = errors.New("openaicompat: stream line exceeds the size limit")

// SSEReader reads the data of Server-Sent Events from a stream, skipping
// comment lines (keep-alives) and fields other than data. Memory is bounded
// by the line cap: one line and one event's data each stay under it.
type SSEReader struct {
	r    *bufio.Reader
	max  int
	line []byte
	data []byte
}

// NewSSEReader returns a reader of r with lines capped at maxLine bytes
// (DefaultMaxLineBytes when maxLine <= 0).
func NewSSEReader(r io.Reader, maxLine int) *SSEReader {
	if maxLine <= 0 {
		maxLine = DefaultMaxLineBytes
	}
	s := sseReaders.Get().(*SSEReader)
	s.r.Reset(r)
	s.max, s.line, s.data = maxLine, s.line[:0], s.data[:0]
	return s
}

// sseReaders keeps readers (their 32 KiB buffers) for the next streams: a
// daemon reads one stream per model call.
var sseReaders = sync.Pool{New: func() any { return &SSEReader{r: bufio.NewReaderSize(nil, 32<<10)} }}

// sseKeepBytes bounds the line and data buffers a released reader keeps.
const sseKeepBytes = 64 << 10

// Release gives the reader's buffers back for another stream; neither the
// reader nor a slice it returned may be used after.
func (s *SSEReader) Release() {
	s.r.Reset(nil)
	if cap(s.line) > sseKeepBytes {
		s.line = nil
	}
	if cap(s.data) > sseKeepBytes {
		s.data = nil
	}
	sseReaders.Put(s)
}

// readLine returns the next line without its line ending. The slice is
// valid until the next call.
func (s *SSEReader) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		frag, err := s.r.ReadSlice('\n')
		if len(s.line)+len(frag) > s.max+2 {
			return nil, fmt.Errorf("%w (%d bytes)", ErrLineTooLong, s.max)
		}
		if err == nil {
			if len(s.line) == 0 {
				return trimEOL(frag), nil // fast path: no copy
			}
			s.line = append(s.line, frag...)
			return trimEOL(s.line), nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			s.line = append(s.line, frag...)
			continue
		}
		s.line = append(s.line, frag...)
		if err == io.EOF && len(s.line) > 0 {
			return trimEOL(s.line), nil
		}
		return nil, err
	}
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte{'\n'})
	return bytes.TrimSuffix(b, []byte{'\r'})
}

// Next returns the data of the next event that has a data field; several
// data lines are joined with "\n". It returns io.EOF at the end of the
// stream (an unfinished event at EOF is still returned first). The slice is
// valid until the next call.
func (s *SSEReader) Next() ([]byte, error) {
	s.data = s.data[:0]
	have := false
	for {
		line, err := s.readLine()
		if err != nil {
			if err == io.EOF && have {
				return s.data, nil
			}
			return nil, err
		}
		if len(line) == 0 { // blank line: dispatch
			if have {
				return s.data, nil
			}
			continue
		}
		if line[0] == ':' { // comment, keep-alive
			continue
		}
		field, value, _ := bytes.Cut(line, []byte{':'})
		if string(field) != "data" {
			continue // event:, id:, retry: carry nothing we use
		}
		value = bytes.TrimPrefix(value, []byte{' '})
		if have {
			if len(s.data)+1+len(value) > s.max {
				return nil, fmt.Errorf("%w (%d bytes in one event)", ErrLineTooLong, s.max)
			}
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, value...)
		have = true
	}
}
