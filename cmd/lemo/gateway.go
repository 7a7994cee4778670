package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"lemo/actors"
	"lemo/actors/gateway"
	"lemo/actors/services"
	"lemo/api"
	"lemo/config"
	"lemo/persistence"
	"lemo/providers"
	"lemo/tools"
)

// Files in the data folder that clients use to find the daemon.
const (
	daemonFile = "daemon.json"
	tokenFile  = "token"
)

// daemonInfo is daemon.json: where a local daemon listens.
type daemonInfo struct {
	Address    string    `json:"address"`
	PID        int       `json:"pid"`
	APIVersion int       `json:"api_version"`
	Version    string    `json:"version"`
	TLS        bool      `json:"tls"`
	Started    time.Time `json:"started"`
}

// remoteAPI is the running gateway and the files it wrote.
type remoteAPI struct {
	gw   *gateway.Gateway
	info string
	log  zerolog.Logger
}

// startRemoteAPI starts the gateway over d, then writes the token and
// daemon.json into the data folder (the store's lock is already held).
func startRemoteAPI(cfg *config.Config, dd *persistence.DataDir, d *actors.Daemon, provs *providers.Registry, reg *tools.Registry, svcs *services.Registry, log zerolog.Logger) (*remoteAPI, error) {
	tokens, err := loadTokens(cfg, dd)
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	gc := gateway.Config{
		Listen: cfg.Listen, Tokens: tokens, Daemon: d, Tools: reg, Models: provs, Services: svcs, Approvals: d,
		DefaultModel: cfg.Models.Default, Version: buildVersion, Log: log,
		Limits: gateway.Limits{
			MaxConnections: cfg.Remote.MaxConnections, ConnectionReserve: cfg.Remote.ConnectionReserve, AuthTimeout: cfg.Remote.AuthTimeout,
			MaxSessionsPerToken: cfg.Remote.MaxSessionsPerToken, MaxSessionsTotal: cfg.Remote.MaxSessions,
			MaxSubscriptionsPerToken: cfg.Remote.MaxSubscriptionsPerToken, MaxSubscriptionsTotal: cfg.Remote.MaxSubscriptions,
		},
	}
	if cat := delegateCatalog(reg); cat != nil {
		gc.DelegateSessions = cat // a nil *Catalog must not become a non-nil interface
	}
	if cfg.TLS.Cert != "" {
		if gc.ServerTLS, gc.ClientTLS, err = tlsConfigs(cfg.TLS); err != nil {
			return nil, &exitError{code: 2, err: err}
		}
	}
	gw, err := gateway.Start(context.Background(), gc)
	if err != nil {
		return nil, err
	}
	info := daemonInfo{Address: gw.Addr(), PID: os.Getpid(), APIVersion: api.ProtocolVersion, Version: buildVersion, TLS: gc.ServerTLS != nil, Started: time.Now().UTC()}
	b, _ := json.MarshalIndent(info, "", "  ")
	path := dd.Join(daemonFile)
	if err := writeFileAtomic(path, append(b, '\n'), 0o600); err != nil {
		_ = gw.Stop(context.Background())
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return &remoteAPI{gw: gw, info: path, log: log}, nil
}

// stop removes daemon.json (clients then know the daemon is gone) and
// stops the gateway.
func (r *remoteAPI) stop() {
	if err := os.Remove(r.info); err != nil && !errors.Is(err, os.ErrNotExist) {
		r.log.Warn().Err(err).Msg("remove daemon.json")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := r.gw.Stop(ctx); err != nil {
		r.log.Warn().Err(err).Msg("stop the remote API")
	}
}

// loadTokens returns the accepted tokens: the operator token (configured,
// else the data folder's, generated at first start) and the tokens file's.
// The operator token is (re)written to the data folder for local clients.
func loadTokens(cfg *config.Config, dd *persistence.DataDir) (*gateway.Tokens, error) {
	path := dd.Join(tokenFile)
	secret := cfg.Auth.Token
	if secret == "" {
		var err error
		if secret, err = gateway.LoadOrCreateToken(path); err != nil {
			return nil, err
		}
	} else if err := gateway.WriteToken(path, secret); err != nil {
		return nil, fmt.Errorf("auth.token: %w", err)
	}
	list := []gateway.Token{{Secret: secret, Principal: gateway.Principal{Owner: cfg.Auth.Owner, Operator: true}}}
	if cfg.Auth.TokensFile != "" {
		more, err := gateway.ParseTokensFile(cfg.Auth.TokensFile, cfg.Auth.Owner)
		if err != nil {
			return nil, fmt.Errorf("auth.tokens_file: %w", err)
		}
		list = append(list, more...)
	}
	return gateway.NewTokens(list...)
}

// tlsConfigs builds the server's TLS and the TLS it dials clients back
// with: the same certificate, and the client CA (else the system's roots)
// to verify the clients' own certificates.
func tlsConfigs(c config.TLS) (server, client *tls.Config, err error) {
	cert, err := tls.LoadX509KeyPair(c.Cert, c.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: %w", err)
	}
	server = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	client = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if c.ClientCA != "" {
		pem, err := os.ReadFile(c.ClientCA)
		if err != nil {
			return nil, nil, fmt.Errorf("tls.client_ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("tls.client_ca: %s holds no PEM certificate", c.ClientCA)
		}
		server.ClientCAs, server.ClientAuth = pool, tls.RequireAndVerifyClientCert
		client.RootCAs = pool
	}
	return server, client, nil
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
