package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"google.golang.org/protobuf/proto"

	"lemo/client"
	"lemo/config"
)

// clientFlags are the flags every client command shares.
type clientFlags struct {
	data, addr, token string
	cert, key, ca     string
	// clientListen and clientAdvertise: where this client listens for
	// the daemon's replies and the address the daemon dials (see
	// client.NodeOptions).
	clientListen, clientAdvertise string
	json                          bool
	explicitData                  bool
	// local: connect found the daemon through its data folder's
	// daemon.json, so it runs on this machine and shares its folders.
	local              bool
	stdout, stderr     io.Writer
	fs                 *flag.FlagSet
	cmd, usage, detail string
}

// newClientFlags declares the shared flags of command cmd.
func newClientFlags(cmd, usage, detail string, stdout, stderr io.Writer) *clientFlags {
	f := &clientFlags{stdout: stdout, stderr: stderr, cmd: cmd, usage: usage, detail: detail}
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.data, "data", "", "data folder of a local daemon (default $LEMO_DATA, else $XDG_DATA_HOME/lemo, else ~/.local/share/lemo)")
	fs.StringVar(&f.addr, "addr", "", "daemon address host:port (default $LEMO_ADDR, else the data folder's daemon.json)")
	fs.StringVar(&f.token, "token", "", "token (default $LEMO_TOKEN, else the data folder's token file)")
	fs.StringVar(&f.cert, "tls-cert", "", "this client's certificate (PEM) for a TLS daemon")
	fs.StringVar(&f.key, "tls-key", "", "this client's private key (PEM)")
	fs.StringVar(&f.ca, "tls-ca", "", "CA (PEM) of the daemon's certificate")
	fs.StringVar(&f.clientListen, "client-listen", "", "where this client listens for the daemon's replies, host:port (default $LEMO_CLIENT_LISTEN, else 127.0.0.1 on a port the system picks; a fixed port for an SSH tunnel)")
	fs.StringVar(&f.clientAdvertise, "client-advertise", "", "the address the daemon dials to reach this client, host:port as seen from the daemon's machine (default $LEMO_CLIENT_ADVERTISE, else the listen address)")
	fs.BoolVar(&f.json, "json", false, "print JSON for scripts")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: lemo %s %s\n\n%s\n\nFlags:\n", cmd, usage, detail)
		fs.PrintDefaults()
	}
	f.fs = fs
	return f
}

// short adds -name as a short form of the flag --long.
func (f *clientFlags) short(name, long string) {
	f.fs.Var(f.fs.Lookup(long).Value, name, "short for --"+long)
}

// parseFlags parses a command's own flag set (commands without the client
// flags): with --json a bad flag prints no usage text (the error is one
// JSON object); -h is flag.ErrHelp, any other error a usage error.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if wantsJSON(args) {
		fs.SetOutput(io.Discard)
		fs.Usage = func() {}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return flag.ErrHelp
		}
		return usageError("%v", err)
	}
	return nil
}

// parse parses args (flags may follow positional arguments) and checks the
// number of positional arguments.
func (f *clientFlags) parse(args []string, minArgs, maxArgs int) ([]string, error) {
	if wantsJSON(args) {
		// The error is reported as one JSON object; no usage text.
		f.fs.SetOutput(io.Discard)
		f.fs.Usage = func() {}
	}
	var pos []string
	for {
		if err := f.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, flag.ErrHelp
			}
			return nil, usageError("%v", err)
		}
		args = f.fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) < minArgs || (maxArgs >= 0 && len(pos) > maxArgs) {
		f.fs.Usage()
		return nil, usageError("lemo %s %s", f.cmd, f.usage)
	}
	f.fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "data" {
			f.explicitData = true
		}
	})
	return pos, nil
}

// connect finds the daemon (flags, then LEMO_* variables, then the data
// folder) and connects, with errors that say what to do.
func (f *clientFlags) connect(ctx context.Context) (*client.Conn, error) {
	addr := firstOf(f.addr, os.Getenv("LEMO_ADDR"))
	token := firstOf(f.token, os.Getenv("LEMO_TOKEN"))
	data := config.DataFolder(firstOf(f.data, os.Getenv("LEMO_DATA")), os.Environ())
	needTLS := false
	if addr == "" || token == "" {
		l, err := client.FindLocal(data)
		if err != nil {
			if addr == "" {
				return nil, err
			}
			return nil, fmt.Errorf("no token: pass --token or set LEMO_TOKEN (%v)", err)
		}
		if addr == "" {
			addr, needTLS = l.Address, l.TLS
			f.local = true
		}
		if token == "" {
			if l.TokenErr != nil {
				return nil, l.TokenErr
			}
			token = l.Token
		}
	}
	o := client.Options{Addr: addr, Token: token, Name: "lemo-cli",
		Listen: firstOf(f.clientListen, os.Getenv("LEMO_CLIENT_LISTEN")), Advertise: firstOf(f.clientAdvertise, os.Getenv("LEMO_CLIENT_ADVERTISE"))}
	if _, err := client.CheckCallback(o.Listen, o.Advertise); err != nil {
		return nil, usageError("--client-listen/--client-advertise (or LEMO_CLIENT_LISTEN/LEMO_CLIENT_ADVERTISE): %v", err)
	}
	if needTLS && f.cert == "" {
		return nil, fmt.Errorf("the daemon at %s requires TLS: pass --tls-cert, --tls-key and --tls-ca (a certificate its client CA signed)", addr)
	}
	if f.cert != "" || f.ca != "" {
		cfg, err := f.tlsConfig()
		if err != nil {
			return nil, err
		}
		o.TLS = cfg
	}
	c, err := client.Connect(ctx, o)
	if err != nil {
		switch {
		case errors.Is(err, client.ErrUnauthenticated):
			return nil, fmt.Errorf("the daemon at %s refused the token: check --token, LEMO_TOKEN or the data folder's token file", addr)
		case errors.Is(err, client.ErrNotRunning):
			return nil, fmt.Errorf("%v; start it with: lemo serve --data %s", err, data)
		case errors.Is(err, client.ErrTimeout) && !f.local:
			// The daemon answers by dialing this client: say how to
			// make that possible.
			return nil, fmt.Errorf("%w; listen where the daemon can reach this client (--client-listen, --client-advertise; without TLS it dials only the IP this connection comes from), or tunnel both ways over SSH (docs/quickstart-remote.md)", err)
		}
		return nil, err
	}
	return c, nil
}

func (f *clientFlags) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.cert != "" || f.key != "" {
		cert, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if f.ca != "" {
		pem, err := os.ReadFile(f.ca)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca: %s holds no PEM certificate", f.ca)
		}
		cfg.RootCAs, cfg.ClientCAs = pool, pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

func firstOf(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// describe turns a client error into what the user reads.
func describe(err error, taskID string) error {
	switch {
	case errors.Is(err, client.ErrNotFound) && taskID != "":
		return &notFound{msg: fmt.Sprintf("unknown task %s (no task id this token may see is, begins or ends with it)", taskID)}
	}
	return err
}

// notFound is a not-found error in the words of the command; it keeps the
// code for --json (errors.Is(err, client.ErrNotFound)).
type notFound struct{ msg string }

func (e *notFound) Error() string        { return e.msg }
func (e *notFound) Is(target error) bool { return target == client.ErrNotFound }

// resolveTask turns what the person typed (a whole Task id, or its
// beginning or end, as the console shows it) into the Task's id; the
// daemon matches only Tasks the token may see, and an ambiguous part is an
// error that lists the matches.
func resolveTask(ctx context.Context, c *client.Conn, arg string) (string, error) {
	m, err := c.Task(ctx, arg)
	if err != nil {
		return "", describe(err, arg)
	}
	return m.GetTaskId(), nil
}

// printJSON prints one message as a JSON line (see marshalJSON).
func printJSON(w io.Writer, m proto.Message) {
	b, err := marshalJSON(m)
	if err != nil {
		fmt.Fprintf(w, "{\"error\": %q}\n", err.Error())
		return
	}
	fmt.Fprintln(w, string(b))
}

// printJSONList prints messages as one JSON array.
func printJSONList[M proto.Message](w io.Writer, list []M) {
	fmt.Fprint(w, "[")
	for i, m := range list {
		if i > 0 {
			fmt.Fprint(w, ",")
		}
		b, _ := marshalJSON(m)
		fmt.Fprint(w, "\n  "+string(b))
	}
	if len(list) > 0 {
		fmt.Fprint(w, "\n")
	}
	fmt.Fprintln(w, "]")
}
