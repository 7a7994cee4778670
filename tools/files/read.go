package files

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strconv"
	"unicode/utf8"

	"lemo/excerpt"
)

type readInput struct {
	Path        string `json:"path"`
	Offset      int    `json:"offset"`
	Limit       int    `json:"limit"`
	LineNumbers *bool  `json:"line_numbers"`
}

type readOutput struct {
	Path       string `json:"path"`
	Revision   string `json:"revision"`
	Content    string `json:"content"`
	StartLine  int    `json:"start_line"`
	EndLine    int    `json:"end_line"`
	TotalLines int    `json:"total_lines"`
	TotalBytes int64  `json:"total_bytes"`
	Truncated  bool   `json:"truncated"`
	NextOffset int    `json:"next_offset,omitempty"`
	Note       string `json:"note,omitempty"`
	Excerpt    string `json:"excerpt,omitempty"`
}

func (f *fileSystem) readTool() *op[readInput, readOutput] {
	c := f.cfg
	return &op[readInput, readOutput]{
		fs:    f,
		name:  NameRead,
		reads: true,
		description: fmt.Sprintf("Read a text file in the workspace. Returns up to %d lines and %d bytes starting at line `offset` "+
			"(1-based), each line prefixed with its number and a tab unless line_numbers is false (strip the prefix "+
			"before using text in files.edit), plus the file's revision (sha256 of the whole file) to pass to files.edit. "+
			"When `truncated` is true, continue with offset = next_offset. Binary files are refused.", c.MaxReadLines, c.MaxReadBytes),
		input: schema(object([]string{"path"}, obj{
			"path":         pathProp("File path, relative to the workspace."),
			"offset":       obj{"type": "integer", "minimum": 1, "description": "First line to return (1-based). Default 1."},
			"limit":        obj{"type": "integer", "minimum": 1, "maximum": c.MaxReadLines, "description": fmt.Sprintf("Most lines to return. Default %d.", c.MaxReadLines)},
			"line_numbers": obj{"type": "boolean", "description": "Prefix each line with its number and a tab. Default true."},
		})),
		result: schema(object([]string{"path", "revision", "content", "start_line", "end_line", "total_lines", "total_bytes", "truncated"}, obj{
			"path":        str,
			"revision":    revisionProp,
			"content":     str,
			"start_line":  obj{"type": "integer", "minimum": 1},
			"end_line":    nonNegInt,
			"total_lines": nonNegInt,
			"total_bytes": nonNegInt,
			"truncated":   boolean,
			"next_offset": obj{"type": "integer", "minimum": 1},
			"note":        str,
			"excerpt":     excerptProp,
		})),
		run: f.read,
		shrink: func(o *readOutput, budget int) {
			n := len(o.Content)
			o.Content = excerpt.Ends(o.Content, budget/2, budget/2)
			o.Excerpt = fmt.Sprintf("content shortened for history: %d of %d bytes kept (head and tail)", len(o.Content), n)
		},
	}
}

// binarySniff is how much of a file's start is checked for binary content.
const binarySniff = 8 << 10

// looksBinary reports whether head (the start of a file) has a NUL byte or
// is not UTF-8 (a rune cut at the end of head is allowed).
func looksBinary(head []byte, complete bool) bool {
	if bytes.IndexByte(head, 0) >= 0 {
		return true
	}
	if !complete {
		// Drop a rune cut in the middle at the end of the sample.
		for i := 0; i < utf8.UTFMax && len(head) > 0; i++ {
			if utf8.Valid(head) {
				return false
			}
			head = head[:len(head)-1]
		}
	}
	return !utf8.Valid(head)
}

// Revision returns the revision string of content, as files.read reports it.
func Revision(content []byte) string {
	s := sha256.Sum256(content)
	return "sha256:" + hex.EncodeToString(s[:])
}

func revisionOf(h hash.Hash) string { return "sha256:" + hex.EncodeToString(h.Sum(nil)) }

// ctxReader fails reads once ctx is done, so long reads stop promptly.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

func (f *fileSystem) read(ctx context.Context, r *root, in *readInput) (*readOutput, error) {
	rel, err := r.resolve(NameRead, in.Path)
	if err != nil {
		return nil, err
	}
	if rel == "." {
		return nil, &PathError{Op: NameRead, Path: in.Path, Reason: "is the workspace folder; use files.list", Err: ErrNotRegular}
	}
	fd, st, err := r.openRegular(NameRead, in.Path, rel, f.cfg.AllowHardlinkReads)
	if err != nil {
		return nil, err
	}
	file := os.NewFile(uintptr(fd), rel)
	defer file.Close()

	offset, limit := in.Offset, in.Limit
	if offset < 1 {
		offset = 1
	}
	if limit < 1 || limit > f.cfg.MaxReadLines {
		limit = f.cfg.MaxReadLines
	}
	numbers := in.LineNumbers == nil || *in.LineNumbers
	last := offset + limit - 1
	budget := f.cfg.MaxReadBytes

	h := sha256.New()
	br := bufio.NewReaderSize(ctxReader{ctx, io.TeeReader(file, h)}, 64<<10)
	head, perr := br.Peek(binarySniff)
	if perr != nil && !errors.Is(perr, io.EOF) && !errors.Is(perr, bufio.ErrBufferFull) {
		return nil, pathErr(NameRead, in.Path, perr)
	}
	if looksBinary(head, perr != nil) {
		return nil, &PathError{Op: NameRead, Path: in.Path, Reason: "looks like a binary file (NUL byte or invalid UTF-8 in its first 8 KiB); files.read returns text only", Err: ErrBinary}
	}

	var (
		buf       bytes.Buffer
		line      int // lines started so far
		lineStart = true
		stopped   bool // the window is complete
		cut       bool // the first line of the window was cut at the byte budget
		endLine   int
		mark      int // buf length at the start of the current line
		total     int64
	)
	for {
		chunk, err := br.ReadSlice('\n')
		total += int64(len(chunk))
		if len(chunk) > 0 {
			if lineStart {
				line++
				lineStart = false
				if !stopped && line >= offset {
					mark = buf.Len()
					if numbers {
						buf.WriteString(fmt.Sprintf("%6d\t", line))
					}
				}
			}
			ends := chunk[len(chunk)-1] == '\n'
			if !stopped && line >= offset {
				buf.Write(chunk)
				if buf.Len() > budget {
					if line == offset {
						// A single line larger than the budget: return its
						// head and move on to the next line.
						keep := len(excerpt.Head(buf.Bytes(), budget))
						buf.Truncate(keep)
						buf.WriteString(" … [line " + strconv.Itoa(line) + " cut at the byte limit]\n")
						cut, endLine = true, line
					} else {
						buf.Truncate(mark)
						endLine = line - 1
					}
					stopped = true
				} else if ends {
					endLine = line
					if line == last {
						stopped = true
					}
				}
			}
			if ends {
				lineStart = true
			}
		}
		if err == nil || errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) {
			break
		}
		return nil, pathErr(NameRead, in.Path, err)
	}
	if !stopped && line >= offset && line > endLine {
		endLine = line // last line without a newline
	}
	out := &readOutput{
		Path:       rel,
		Revision:   revisionOf(h),
		Content:    buf.String(),
		StartLine:  offset,
		EndLine:    endLine,
		TotalLines: line,
		TotalBytes: total,
	}
	if total != st.Size {
		out.Note = fmt.Sprintf("the file changed size while it was read (%d bytes at open, %d read)", st.Size, total)
	}
	switch {
	case line == 0:
		out.EndLine = 0
		out.Note = "the file is empty"
	case offset > line:
		out.EndLine = 0
		out.Note = fmt.Sprintf("offset %d is past the end of the file (%d lines)", offset, line)
	default:
		out.Truncated = cut || endLine < line
		if endLine < line {
			out.NextOffset = endLine + 1
		}
	}
	return out, nil
}
