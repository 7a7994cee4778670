// Package logging builds the daemon's zerolog logger and adapts the loggers
// of the libraries Lemo uses into it, so that every line goes through one
// logger with one format.
//
// Lifecycle:
//  1. cmd/lemo calls New with the configured level and format.
//  2. Packages receive the resulting zerolog.Logger (never a global).
//  3. Slog wraps it for protoactor (log/slog); Printf wraps it for Badger
//     (Errorf/Warningf/Infof/Debugf).
//
// Example:
//
//	log, err := logging.New(os.Stderr, "info", "auto")
//	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
//		return logging.Slog(log, "protoactor")
//	}))
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// Formats accepted by New.
const (
	FormatAuto    = "auto"
	FormatConsole = "console"
	FormatJSON    = "json"
)

// Levels accepted by New.
var Levels = []string{"trace", "debug", "info", "warn", "error"}

// New returns a logger writing to w at level in format: "console" is
// readable on a terminal, "json" is one object per line, "auto" picks console
// when w is a terminal and JSON otherwise.
func New(w io.Writer, level, format string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(strings.ToLower(level))
	if err != nil || level == "" || !validLevel(level) {
		return zerolog.Nop(), fmt.Errorf("logging: level %q: want one of %s", level, strings.Join(Levels, ", "))
	}
	switch format {
	case FormatAuto:
		if isTerminal(w) {
			w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
		}
	case FormatConsole:
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly, NoColor: !isTerminal(w)}
	case FormatJSON:
	default:
		return zerolog.Nop(), fmt.Errorf("logging: format %q: want auto, console or json", format)
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

func validLevel(level string) bool {
	for _, l := range Levels {
		if strings.EqualFold(l, level) {
			return true
		}
	}
	return false
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Slog adapts log into a *slog.Logger whose records carry lib=<lib>.
// Attributes named "message" are renamed "detail" so they never collide with
// zerolog's message field. The library's lines are logged one level lower
// (see LibLevel): at the default level only its warnings and errors show.
func Slog(log zerolog.Logger, lib string) *slog.Logger {
	h := zerolog.NewSlogHandler(log.With().Str("lib", lib).Logger())
	return slog.New(renameHandler{h})
}

// LibLevel is the level a library's (protoactor's) line is logged at:
// its informational lines, a few per client command, are debug (and its
// debug lines trace); its warnings and errors stay, except the error a
// client's normal disconnect produces (the connection's context was
// cancelled), which is debug.
func LibLevel(level slog.Level, errText string) slog.Level {
	switch {
	case level >= slog.LevelWarn && strings.Contains(errText, "code = Canceled"):
		return slog.LevelDebug
	case level >= slog.LevelWarn:
		return level
	case level >= slog.LevelInfo:
		return slog.LevelDebug
	}
	return slog.LevelDebug - 4
}

type renameHandler struct{ slog.Handler }

func (h renameHandler) Enabled(ctx context.Context, l slog.Level) bool {
	// A warning may yet be demoted; that is known only from the record.
	return h.Handler.Enabled(ctx, LibLevel(l, ""))
}

func (h renameHandler) Handle(ctx context.Context, r slog.Record) error {
	errText := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "error" || a.Key == "err" {
			errText = a.Value.String()
		}
		return true
	})
	level := LibLevel(r.Level, errText)
	if !h.Handler.Enabled(ctx, level) {
		return nil
	}
	out := slog.NewRecord(r.Time, level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == zerolog.MessageFieldName {
			a.Key = "detail"
		}
		out.AddAttrs(a)
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h renameHandler) WithAttrs(as []slog.Attr) slog.Handler {
	for i := range as {
		if as[i].Key == zerolog.MessageFieldName {
			as[i].Key = "detail"
		}
	}
	return renameHandler{h.Handler.WithAttrs(as)}
}

func (h renameHandler) WithGroup(name string) slog.Handler {
	return renameHandler{h.Handler.WithGroup(name)}
}

// Printf adapts log to the printf-style logger interface of Badger. The
// library's chatty informational lines go to debug.
type Printf struct {
	Log zerolog.Logger
}

// NewPrintf returns a Printf adapter whose lines carry lib=<lib>.
func NewPrintf(log zerolog.Logger, lib string) Printf {
	return Printf{Log: log.With().Str("lib", lib).Logger()}
}

func (p Printf) Errorf(f string, args ...any)   { line(p.Log.Error(), f, args) }
func (p Printf) Warningf(f string, args ...any) { line(p.Log.Warn(), f, args) }
func (p Printf) Infof(f string, args ...any)    { line(p.Log.Debug(), f, args) }
func (p Printf) Debugf(f string, args ...any)   { line(p.Log.Trace(), f, args) }

// line formats a library's line only when its level is logged: Badger
// calls Debugf four times a commit, and formatting them for nothing was
// 2% of a lone Task's CPU a step.
func line(e *zerolog.Event, f string, args []any) {
	if e.Enabled() {
		e.Msg(strings.TrimRight(fmt.Sprintf(f, args...), "\n"))
	}
}
