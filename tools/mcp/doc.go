// Package mcp offers the tools of MCP (Model Context Protocol) servers as
// Lemo tools, through the official Go SDK (github.com/modelcontextprotocol/
// go-sdk) on the client side of its two transports: stdio (a command Lemo
// starts) and streamable HTTP (a URL with optional headers).
//
// Names. Each tool a server lists becomes the Lemo tool
// mcp.<server>.<tool>: the server's name is [a-z0-9_-]; the tool's is
// mapped (MapToolName: lower case, "getUser" to "get_user", every other
// character outside [a-z0-9_-], dots included, to "_"). Tools whose names
// collide after the mapping (also as models see them, "." as "_", and
// across servers: mcp.a_b.c and mcp.a.b_c) are all refused, each with an
// error naming the others and the keys that pick one
// (mcp.servers.<name>.tools); so is a name over 64 characters, and a tool
// whose schemas the registry cannot use. The rest of the server's tools
// are offered. The description is the server's on one line of at most 300
// characters, with the server named, so tool search finds it.
//
// Calls. The Tool actor validates the input against the server's input
// schema before the call; the structured content is validated against the
// tool's output schema (when it declares one) after it, a mismatch being an
// invalid output. A result maps to Output: the text content joined,
// cleaned (escape sequences, controls, bidirectional overrides) and cut to
// its bound (head and tail around a marker), the structured content when it
// fits the bound, and images, audio and resources as metadata with sizes,
// never their bytes. A result the server marks as an error is a result
// with is_error. Every output is Untrusted: the model sees it marked. Retain
// keeps an excerpt by default (RetainExcerpt), or all, or nothing.
//
// Approvals. By the tool's annotations unless the server's configuration
// says otherwise (ApprovalAsk, ApprovalAllow): read-only tools run unasked;
// destructive or open-world ones ask (MCP's defaults for a tool that says
// nothing); the rest ask nothing themselves. The daemon's approvals.* rules
// apply on top in every mode: they can add an ask or a deny, never remove
// the tool's own ask.
//
// Lifecycle of a server:
//  1. New checks the configuration; nothing starts.
//  2. Tools starts every server in parallel (each within its start
//     timeout), lists its tools, and stops a stdio server again: the
//     daemon registers the tools (Offer), and the server starts on its
//     first call. A server whose tools could not be listed (not up yet, a
//     command that failed) is tried again in the background by Offer,
//     with the restart policy's backoff (listRetry: once the policy would
//     mark it failed, at its longest backoff), until a listing succeeds or
//     Close; its tools are then registered as at the start, except those
//     whose names meet a registered tool's as models see them (Admit: the
//     registered one stays). Until then Pending says why they are missing
//     (lemo tools, a Task naming one of them).
//  3. A call gets the server's one connection, shared by every Task,
//     starting it when there is none. A stdio server runs in a process
//     group of its own with Pdeathsig, in the tool namespaces when the
//     daemon uses them (its folder kept), with an environment of only the
//     base variables (PATH, HOME, locale, TMPDIR; never a secret-looking
//     one) and what its env names, plus the run tag and a tag of its own.
//  4. Progress notifications of a call become its state updates (Progress),
//     which clients see live. Cancelling a call, or its timeout, sends MCP's
//     cancellation; a call that timed out after it was sent is outcome
//     unknown. A stdio server is then stopped (as in step 6), once the
//     cancellation was written (at most a second later), so that nothing
//     it started for the call outlives it (afterCall decides): after a
//     timeout at once, as hung, which counts as a death (step 5) and fails
//     its other calls in flight as outcome unknown; after a cancel once no
//     other call is in flight on it, as it may ignore the cancellation
//     (until then it takes no new calls: the next call starts it again, and
//     the stop is not a death). An HTTP server's session is kept: its
//     process is not Lemo's, and each call is a request of its own.
//  5. A server that ends (its process exits, its session closes, it sends
//     a message over the size bound) fails the calls in flight as outcome
//     unknown: they are never sent again. So is a call whose HTTP request
//     failed once it may have reached the server (all but a failure to
//     connect, which is "not called"). The next call starts it again
//     after a backoff (RestartPolicy); after FailAfter deaths within the
//     window the server is failed and its calls say so, until the deaths
//     age out.
//  6. Close stops every server: stdin closed, the exit grace, SIGTERM and
//     SIGKILL to its group, then every descendant carrying its tag, then its
//     namespace.
//
// Limits: a message from a server is bounded (MaxMessageBytes, 16 MiB by
// default): on stdio by line; over HTTP a response body that is one JSON
// message by the transport, each event of an event stream by the SDK. A
// larger one ends the connection, its calls outcome unknown. A 100 MB
// result allocates about 56 MiB on the way over stdio, with a 4 MiB bound
// 9 MiB as JSON and 20 MiB as an event stream over HTTP (the SDK's
// readers cost a few times the bound; see the tests); a server lists at most 1024 tools; a
// server's tools are listed once: at the daemon's start, or for a server
// not up then, when it first answers (a server's later list changes, and
// its tools/list_changed notifications, take a restart).
//
// Example:
//
//	m, err := mcp.New(mcp.Config{Servers: []mcp.ServerConfig{{Name: "fs", Command: "npx",
//		Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/srv/docs"}}}, Environ: os.Environ()})
//	if err != nil { ... }
//	defer m.Close()
//	reg.SetPending(m.Pending) // why a late server's tools are missing
//	err = m.Offer(ctx, reg)   // log err: some servers or tools are not offered (yet)
package mcp
