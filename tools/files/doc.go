// Package files provides the workspace-confined file tools: files.read,
// files.write, files.edit, files.list, files.find and files.grep (one
// tools.Tool per operation, all rendered by the "files" View).
//
// Confinement. Every path is relative to the Task's workspace folder (an
// absolute path is accepted only when it is inside it). Paths with NUL bytes
// or ".." components are refused before anything is opened. The workspace is
// then held open as a directory descriptor and every path is opened beneath
// it with openat2(2) and RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS, so the kernel
// refuses absolute symlinks, symlinks that climb out, /proc magic links
// (/proc/self/root, /proc/self/fd/N) and rename races during resolution; the
// path string is never checked and then opened. Where openat2 is missing the
// package walks the path one component at a time with O_NOFOLLOW, expanding
// relative symlinks itself and refusing any that lead out. A refusal is a
// *PathError naming the path and the rule (Rule* constants) and wrapping
// ErrRefused. Further rules:
//   - files with more than one hard link are refused by write and edit (a
//     second name may be outside), and by read and grep unless
//     Config.AllowHardlinkReads;
//   - write and edit replace a name atomically (temporary file + rename in
//     the already-opened parent folder) and refuse a name that is a symlink,
//     so they never write through a link;
//   - write and edit refuse Config.Protected paths, also when reached
//     through another name (checked by file identity, walking up to the
//     workspace);
//   - read opens a path first with O_PATH to check it is a regular file, so
//     FIFOs and devices are never opened for I/O;
//   - find and grep never follow symlinks: they open each child by name
//     relative to its parent's descriptor with O_NOFOLLOW.
//
// Mount points inside the workspace are trusted (creating one needs
// privilege). The shell tool is not confined by this package.
//
// Revisions. A revision is "sha256:" and the hex SHA-256 of a file's whole
// content (see Revision). files.read returns it with every window it reads;
// files.edit requires it and refuses a stale one (ErrStale), so an edit is
// always made against the content the model saw. files.write takes it
// optionally. Writes and edits of one name are serialised within the process.
//
// Bounds (Config; zero means the default): read returns at most MaxReadLines
// lines and MaxReadBytes bytes per call and says where to continue; list
// pages with an opaque cursor; find and grep stop at MaxResults matches,
// MaxWalkEntries visited entries and MaxDepth levels, and say so in
// truncated_reason; grep skips binary files (a NUL byte or invalid UTF-8 in
// the first 8 KiB) and files over MaxGrepFileBytes, and counts them.
//
// Retain keeps a result whole when its JSON is at most RetainBytes, else a
// shortened copy of the same shape (content as head and tail, lists as their
// first and last items) whose "excerpt" field states what was left out; the
// live result always has everything the tool returned.
//
// Lifecycle:
//  1. cmd/lemo builds a Config (DefaultConfig, then the config file) and
//     calls New, which validates it and returns the six tools.
//  2. It registers each in the tools.Registry.
//  3. For each call the runtime validates the input and calls Execute with
//     the Task's workspace; the tool opens the workspace, resolves the path
//     beneath it, does the operation and closes every descriptor before it
//     returns. Cancelling ctx stops long reads, walks and greps.
//  4. The runtime persists Retain(output, input).
//
// Example:
//
//	ts, err := files.New(files.DefaultConfig())
//	if err != nil { ... }
//	for _, t := range ts {
//		if err := reg.Register(t); err != nil { ... }
//	}
//	// files.read {"path":"main.go","offset":1,"limit":200}
//	// files.edit {"path":"main.go","old_text":"foo()","new_text":"bar()","revision":"sha256:..."}
package files
