package delegate

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// lines reads every record of in with limit max.
func lines(t *testing.T, in string, max int) (got []string, tooLong []int64) {
	t.Helper()
	lr := NewLineReader(iotest.OneByteReader(strings.NewReader(in)), max)
	for i := 0; i < 1000; i++ {
		l, err := lr.Next()
		var tl *LineTooLongError
		switch {
		case err == nil:
			got = append(got, string(l))
		case errors.As(err, &tl):
			tooLong = append(tooLong, tl.Bytes)
		case errors.Is(err, io.EOF):
			return got, tooLong
		default:
			t.Fatalf("Next: %v", err)
		}
	}
	t.Fatal("no EOF")
	return nil, nil
}

func TestLineReader(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		max     int
		want    []string
		tooLong []int64
	}{
		{"lf only", "a\nb\n", 10, []string{"a", "b"}, nil},
		{"crlf", "a\r\nb\r\n", 10, []string{"a", "b"}, nil},
		{"unicode separators are content", "x\u2028y\u2029z\n", 20, []string{"x\u2028y\u2029z"}, nil},
		{"lone cr is content", "a\rb\n", 10, []string{"a\rb"}, nil},
		{"last line without lf", "a\nbc", 10, []string{"a", "bc"}, nil},
		{"empty lines", "\n\na\n", 10, []string{"", "", "a"}, nil},
		{"exactly max", "abcd\n", 4, []string{"abcd"}, nil},
		{"over max is skipped", "abcde\nok\n", 4, []string{"ok"}, []int64{5}},
		{"over max at eof", "ok\nabcdef", 4, []string{"ok"}, []int64{6}},
		{"max+1 at eof", "abcde", 4, nil, []int64{5}},
		{"empty", "", 4, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, tl := lines(t, c.in, c.max)
			if strings.Join(got, "|") != strings.Join(c.want, "|") || len(got) != len(c.want) {
				t.Fatalf("lines = %q, want %q", got, c.want)
			}
			if len(tl) != len(c.tooLong) || (len(tl) > 0 && tl[0] != c.tooLong[0]) {
				t.Fatalf("too long = %v, want %v", tl, c.tooLong)
			}
		})
	}
}

// Records far beyond 64 KiB (bufio.Scanner's default) are read whole; a
// record over the limit is skipped without being buffered and the stream
// goes on.
func TestLineReaderLongRecords(t *testing.T) {
	big := strings.Repeat("x", 5<<20)
	in := `{"type":"a","d":"` + big + "\"}\n" + strings.Repeat("y", 9<<20) + "\n" + `{"type":"b"}` + "\n"
	lr := NewLineReader(strings.NewReader(in), 8<<20)
	l, err := lr.Next()
	if err != nil || len(l) != len(big)+len(`{"type":"a","d":""}`) {
		t.Fatalf("5 MB record: %d bytes, %v", len(l), err)
	}
	if f, err := DecodeFrame(l); err != nil || f.Type != "a" {
		t.Fatalf("DecodeFrame: %v %v", f, err)
	}
	_, err = lr.Next()
	var tl *LineTooLongError
	if !errors.As(err, &tl) || tl.Bytes != 9<<20 {
		t.Fatalf("9 MB record: err = %v", err)
	}
	if cap(lr.buf) > 8<<20+1<<20 {
		t.Fatalf("the reader kept a %d-byte buffer", cap(lr.buf))
	}
	if l, err = lr.Next(); err != nil || string(l) != `{"type":"b"}` {
		t.Fatalf("after the skipped record: %q %v", l, err)
	}
}

func TestDecodeFrame(t *testing.T) {
	cases := []struct {
		in   string
		ok   bool
		want Frame
	}{
		{`{"type":"agent_start"}`, true, Frame{Type: "agent_start"}},
		{`{"id":"lemo-1","type":"response","command":"prompt","success":true}`, true, Frame{Type: "response", ID: "lemo-1", Command: "prompt", Success: true}},
		{`{"id":"x","type":"response","command":"steer","success":false,"error":"no"}`, true, Frame{Type: "response", ID: "x", Command: "steer", Error: "no"}},
		{`{"id":5,"type":"response","success":false,"error":{"code":1}}`, true, Frame{Type: "response", Error: `{"code":1}`}},
		{`{"type":"extension_ui_request","id":"u","method":"confirm"}`, true, Frame{Type: "extension_ui_request", ID: "u", Method: "confirm"}},
		{`  {"type":"x"}  `, true, Frame{Type: "x"}},
		{`[1]`, false, Frame{}},
		{`not json`, false, Frame{}},
		{`{"no":"type"}`, false, Frame{}},
		{`{"type":""}`, false, Frame{}},
		{`{"type":7}`, false, Frame{}},
		{`{"type":"x"`, false, Frame{}},
		{``, false, Frame{}},
	}
	for _, c := range cases {
		f, err := DecodeFrame([]byte(c.in))
		if (err == nil) != c.ok {
			t.Errorf("DecodeFrame(%s): err = %v, want ok=%v", c.in, err, c.ok)
			continue
		}
		if err != nil {
			if !errors.Is(err, ErrNotAFrame) {
				t.Errorf("DecodeFrame(%s): err = %v, want ErrNotAFrame", c.in, err)
			}
			continue
		}
		if f.Type != c.want.Type || f.ID != c.want.ID || f.Command != c.want.Command || f.Success != c.want.Success || f.Error != c.want.Error || f.Method != c.want.Method {
			t.Errorf("DecodeFrame(%s) = %+v, want %+v", c.in, f, c.want)
		}
		if !bytes.Equal(f.Raw, bytes.TrimSpace([]byte(c.in))) {
			t.Errorf("Raw = %q", f.Raw)
		}
	}
	f, _ := DecodeFrame([]byte(`{"type":"response","data":{"text":"hi"}}`))
	if string(f.Data) != `{"text":"hi"}` {
		t.Fatalf("Data = %s", f.Data)
	}
}
