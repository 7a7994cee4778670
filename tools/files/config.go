package files

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// Config bounds what the files tools read, return and write. A zero numeric
// field takes its default (see DefaultConfig); a negative one is an error.
type Config struct {
	// MaxReadBytes is the most content bytes files.read returns in one call
	// (line-number prefixes included). Default 64 KiB.
	MaxReadBytes int
	// MaxReadLines is the most lines files.read returns in one call; it is
	// also the default limit. Default 2000.
	MaxReadLines int
	// MaxFileBytes is the largest file files.write writes and files.edit
	// edits (edit holds the file in memory). Default 16 MiB.
	MaxFileBytes int
	// MaxListEntries is the largest page files.list returns. Default 1000;
	// the default page is 200 entries or MaxListEntries if smaller.
	MaxListEntries int
	// MaxDirEntries is the most entries read from one directory by list,
	// find and grep. A larger directory is refused by list and reported as
	// truncated by find and grep. Default 100000.
	MaxDirEntries int
	// MaxResults is the most matches files.find and files.grep return.
	// Default 500.
	MaxResults int
	// MaxGrepBytes bounds the total bytes of matched line text files.grep
	// returns. Default 64 KiB.
	MaxGrepBytes int
	// MaxGrepLineBytes bounds one matched line in files.grep results; longer
	// lines are cut and marked. Default 512.
	MaxGrepLineBytes int
	// MaxGrepFileBytes: files.grep skips (and counts) larger files.
	// Default 8 MiB.
	MaxGrepFileBytes int
	// MaxWalkEntries is the most directory entries files.find and files.grep
	// visit in one call. Default 200000.
	MaxWalkEntries int
	// MaxDepth is the deepest directory level find and grep descend to.
	// Default 64.
	MaxDepth int
	// RetainBytes bounds what Retain keeps for the Task's history: results up
	// to this size are kept whole, larger ones as a head-and-tail excerpt.
	// Default 8 KiB; at least 1 KiB.
	RetainBytes int
	// SkipDirs are directory names find and grep never descend into (for
	// example ".git"). They are still listed by files.list and can be
	// searched by naming them as the path. Nil skips nothing.
	SkipDirs []string
	// Protected are workspace-relative paths (for example ".git") that
	// files.write and files.edit refuse to create or change, including
	// anything beneath them and anything reached through a symlink or an
	// alias of them. Nil protects nothing.
	Protected []string
	// AllowHardlinkReads lets read and grep open files that have more than
	// one hard link. By default they are refused (read) or skipped (grep):
	// another name of the same file may be outside the workspace. Writes and
	// edits always refuse such files.
	AllowHardlinkReads bool
}

// DefaultConfig returns the defaults: the zero value of every numeric field
// resolved, ".git" skipped by find and grep and protected from writes.
func DefaultConfig() Config {
	c := Config{SkipDirs: []string{".git"}, Protected: []string{".git"}}
	c.fill()
	return c
}

func (c *Config) fill() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.MaxReadBytes, 64<<10)
	def(&c.MaxReadLines, 2000)
	def(&c.MaxFileBytes, 16<<20)
	def(&c.MaxListEntries, 1000)
	def(&c.MaxDirEntries, 100000)
	def(&c.MaxResults, 500)
	def(&c.MaxGrepBytes, 64<<10)
	def(&c.MaxGrepLineBytes, 512)
	def(&c.MaxGrepFileBytes, 8<<20)
	def(&c.MaxWalkEntries, 200000)
	def(&c.MaxDepth, 64)
	def(&c.RetainBytes, 8<<10)
}

// validate reports every problem at once, each with its field name.
func (c *Config) validate() error {
	var errs []error
	pos := func(name string, v int) {
		if v < 0 {
			errs = append(errs, fmt.Errorf("files: Config.%s = %d: must not be negative (0 means the default)", name, v))
		}
	}
	pos("MaxReadBytes", c.MaxReadBytes)
	pos("MaxReadLines", c.MaxReadLines)
	pos("MaxFileBytes", c.MaxFileBytes)
	pos("MaxListEntries", c.MaxListEntries)
	pos("MaxDirEntries", c.MaxDirEntries)
	pos("MaxResults", c.MaxResults)
	pos("MaxGrepBytes", c.MaxGrepBytes)
	pos("MaxGrepLineBytes", c.MaxGrepLineBytes)
	pos("MaxGrepFileBytes", c.MaxGrepFileBytes)
	pos("MaxWalkEntries", c.MaxWalkEntries)
	pos("MaxDepth", c.MaxDepth)
	pos("RetainBytes", c.RetainBytes)
	if c.RetainBytes > 0 && c.RetainBytes < 1024 {
		errs = append(errs, fmt.Errorf("files: Config.RetainBytes = %d: want at least 1024", c.RetainBytes))
	}
	if c.MaxReadBytes > 0 && c.MaxReadBytes < 256 {
		errs = append(errs, fmt.Errorf("files: Config.MaxReadBytes = %d: want at least 256", c.MaxReadBytes))
	}
	for i, d := range c.SkipDirs {
		if d == "" || strings.ContainsAny(d, "/\x00") || d == "." || d == ".." {
			errs = append(errs, fmt.Errorf("files: Config.SkipDirs[%d] = %q: want a plain directory name", i, d))
		}
	}
	for i, p := range c.Protected {
		clean, err := cleanPath("/", p)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("files: Config.Protected[%d]: %w", i, err))
		case path.IsAbs(p) || clean == ".":
			errs = append(errs, fmt.Errorf("files: Config.Protected[%d] = %q: want a path relative to the workspace, not the workspace itself", i, p))
		}
	}
	return errors.Join(errs...)
}
