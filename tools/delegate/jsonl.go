package delegate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// LineTooLongError reports a record longer than the reader's limit. The
// record was skipped up to its line feed; reading continues after it.
type LineTooLongError struct {
	// Bytes counts the skipped record's bytes (without the line feed), or
	// the bytes read before the stream ended.
	Bytes int64
	Max   int
}

func (e *LineTooLongError) Error() string {
	return fmt.Sprintf("delegate: a line of %d bytes exceeds the %d-byte limit and was skipped", e.Bytes, e.Max)
}

// LineReader reads the agent's JSONL stream: records end with a line feed
// (LF) and only there; U+2028 and U+2029 inside JSON strings are content.
// A trailing carriage return is removed. Records may be far longer than
// 64 KiB; one longer than the limit is skipped without being buffered.
type LineReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

// NewLineReader reads records of at most max bytes from r.
func NewLineReader(r io.Reader, max int) *LineReader {
	return &LineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// Next returns the next record without its line ending. The slice is valid
// until the following call. At the end of the stream a last record without
// a line feed is returned first, then io.EOF. A record over the limit
// yields *LineTooLongError; the stream stays usable.
func (l *LineReader) Next() ([]byte, error) {
	l.buf = l.buf[:0]
	var skipped int64
	skipping := false
	for {
		chunk, err := l.r.ReadSlice('\n')
		if skipping {
			skipped += int64(len(chunk))
		} else if len(l.buf)+len(chunk) > l.max+1 { // +1: the LF itself
			skipping = true
			skipped = int64(len(l.buf) + len(chunk))
			l.buf = l.buf[:0]
			if cap(l.buf) > 1<<20 {
				l.buf = nil // do not keep a huge buffer for the next record
			}
		} else {
			l.buf = append(l.buf, chunk...)
		}
		switch {
		case err == nil:
			if skipping {
				return nil, &LineTooLongError{Bytes: skipped - 1, Max: l.max}
			}
			return trimEOL(l.buf), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if skipping {
				return nil, &LineTooLongError{Bytes: skipped, Max: l.max}
			}
			if len(l.buf) > l.max {
				n := len(l.buf)
				l.buf = l.buf[:0]
				return nil, &LineTooLongError{Bytes: int64(n), Max: l.max}
			}
			if len(l.buf) > 0 {
				line := l.buf
				l.buf = l.buf[len(l.buf):]
				return trimCR(line), nil
			}
			return nil, io.EOF
		default:
			return nil, err
		}
	}
}

func trimEOL(b []byte) []byte { return trimCR(b[:len(b)-1]) }

func trimCR(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\r' {
		return b[:n-1]
	}
	return b
}

// Frame is one record from the agent: a response to a command, an event, or
// a request of the agent (extension UI, host tools). Only the fields that
// route it are decoded; Raw keeps the whole record for the event's own
// decoder.
type Frame struct {
	Type string
	// ID is the correlation id of responses and of the agent's requests;
	// "" when absent or not a string.
	ID string
	// Command, Success, Error and Data belong to responses.
	Command string
	Success bool
	Error   string
	Data    json.RawMessage
	// Method names an extension UI request's method.
	Method string
	Raw    []byte
}

// IsResponse reports whether the frame answers a command.
func (f *Frame) IsResponse() bool { return f.Type == "response" }

// ErrNotAFrame is wrapped by DecodeFrame for records that are not JSON
// objects with a string "type".
var ErrNotAFrame = errors.New("delegate: not a protocol frame")

// DecodeFrame decodes one record. The frame keeps a copy of line.
func DecodeFrame(line []byte) (*Frame, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return nil, fmt.Errorf("%w: not a JSON object", ErrNotAFrame)
	}
	var head struct {
		Type    json.RawMessage `json:"type"`
		ID      json.RawMessage `json:"id"`
		Command string          `json:"command"`
		Success bool            `json:"success"`
		Error   json.RawMessage `json:"error"`
		Data    json.RawMessage `json:"data"`
		Method  string          `json:"method"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotAFrame, err)
	}
	f := &Frame{Command: head.Command, Success: head.Success, Method: head.Method}
	if err := json.Unmarshal(head.Type, &f.Type); err != nil || f.Type == "" {
		return nil, fmt.Errorf("%w: no string \"type\"", ErrNotAFrame)
	}
	_ = json.Unmarshal(head.ID, &f.ID) // a non-string id correlates nothing
	if len(head.Error) > 0 {
		if json.Unmarshal(head.Error, &f.Error) != nil {
			f.Error = string(head.Error) // an object: keep its JSON text
		}
	}
	if len(head.Data) > 0 && string(head.Data) != "null" {
		f.Data = head.Data
	}
	f.Raw = append([]byte(nil), line...)
	return f, nil
}
