// Package gateway is the daemon's edge: a separate actor system with
// protoactor remote enabled that hosts only the gateway actor and one
// session actor per attached client. Clients (the CLI, the console,
// programs) reach the daemon only through it; no actor of the internal tree
// is reachable from the network. Sessions bridge to the daemon's Go API
// (actors.Daemon) as their client's principal.
//
// Hardening (protoactor's remote layer has no authentication, crashes on
// unknown message types and on two unimplemented RPCs, and drops oversized
// batches silently):
//   - Binds loopback unless TLS is configured; an address in use is an
//     error (ErrAddressInUse), not a panic.
//   - Connections are bounded (conns): every connection is seen as gRPC
//     accepts it, before TLS and HTTP/2; one that presents no valid token
//     within AuthTimeout is closed; at most MaxConnections are open, and at
//     most MaxConnections-ConnectionReserve of them unauthenticated. A new
//     connection beyond that takes the place of the oldest unauthenticated
//     one, so a client that presents its token at once always gets in; only
//     when every open connection is authenticated is a new one refused.
//     At most 16 streams per connection.
//   - Sessions and subscriptions are bounded per token (whatever address
//     or connection they come from) and overall; a refusal is an Error
//     that names the limit, its value and its configuration key. A
//     session's subscriptions are bounded too (MaxSubscriptions).
//   - A gRPC stream interceptor (guard) checks the connection's token
//     (metadata "lemo-token") and inspects every message batch before
//     protoactor decodes it: the first message must declare the client's own
//     address (an IP equal to the connection's source, without TLS); only
//     Request messages may go to "gateway"; only Request, Watch, Unwatch and
//     Terminated may go to a session, and only to a session of the same
//     client node, whose names cannot be guessed; system messages and
//     senders may name no address but the client's own. Anything else
//     closes the stream. The guard stamps trusted headers (principal, peer)
//     on every envelope it lets through, and readdresses every target to
//     the daemon's own address: a message is delivered here whatever
//     daemon address it names (the local end of a client's tunnel), and
//     never makes the daemon dial out.
//   - Recovering interceptors on stream and unary RPCs; ListProcesses and
//     GetProcessDiagnostics answer Unimplemented (after the token check, so
//     clients use them to test a token).
//   - gRPC limits are raised (32 MiB) and protoactor's writer batch lowered
//     (16), and every daemon-to-client message over 512 KiB is sent as
//     Chunks, so no batch can exceed a limit and be dropped.
//   - Commands are validated (validate) before anything else; every
//     command is answered, with a typed Error when it fails; a session runs
//     at most 64 commands at once. Text fields (requests, messages, reasons,
//     paths, names) must be UTF-8 without control characters
//     (api.CheckText: multi-line text may hold tab, line feed and carriage
//     return); every bound on bytes, the gateway's or the daemon's, answers
//     ERROR_CODE_TOO_LARGE; a workspace the daemon's policy refuses
//     (actors.WorkspacePolicy) answers ERROR_CODE_PERMISSION_DENIED. Error
//     messages are made valid UTF-8, so no answer is dropped unencodable.
//   - The daemon dials replies back to each client; it presents the
//     client's callback secret (from Hello) so clients can refuse anyone
//     else. An address's secret belongs to the first token and secret that
//     declared it until its last session ends: a hello from the same IP
//     with another token or secret is refused (ERROR_CODE_CONFLICT), so no
//     peer can replace the secret presented to another client.
//
// Subscriptions (pump): subscribe to the hub first, then replay history
// from the requested seqs, then live updates, dropping events already
// sent; CaughtUp marks the end of the replay. Each subscription sends at
// most CreditWindow updates (and 8 MiB) the client has not acknowledged; a
// client that stops acknowledging has its updates queued up to MaxQueue,
// then gets FellBehind (with the last seqs sent) and the subscription ends;
// it resumes from its last seq. The hub and the Task are never slowed.
// Subscriptions of the same principal and scope share one hub subscription
// (feed); live updates leave in batches at most every 4 ms (Linger).
//
// Owner scoping: every command runs as the session's principal; a Task of
// another owner reads as not found. Operator tokens see every owner. The
// inspection commands (inspect: the live internal actor tree with mailbox
// statistics; stop_call: stop one running tool call) are for operator
// tokens only; others get ERROR_CODE_PERMISSION_DENIED.
//
// Lifecycle:
//  1. cmd/lemo builds Tokens (the data folder's token, generated at first
//     start, and any configured ones) and calls Start with the daemon,
//     tools, providers and the Services registry.
//  2. A client sends Request{hello} to "gateway"; the gateway spawns its
//     session (gateway/<random>) and the session answers Welcome and
//     watches the client's actor.
//  3. The session serves the client's commands on goroutines and streams
//     its subscriptions; Services the client registers forward their calls
//     to it.
//  4. When the client goes away (its actor stops, its process dies, or it
//     says Goodbye) the session ends its subscriptions, withdraws its
//     Services and stops.
//  5. Stop ends every session, waits for their goroutines and shuts the
//     remote layer down.
//
// Example:
//
//	tokens, _ := gateway.NewTokens(gateway.Token{Secret: secret, Principal: gateway.Principal{Owner: "local", Operator: true}})
//	gw, err := gateway.Start(ctx, gateway.Config{Listen: "127.0.0.1:7465", Tokens: tokens, Daemon: d, Tools: reg, Models: provs})
//	defer gw.Stop(context.Background())
package gateway
