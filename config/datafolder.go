package config

import (
	"path/filepath"
	"strings"
)

// DataFolder returns the data folder that data names: data itself when
// set, else the user's data home as the XDG base directory specification
// names it, $XDG_DATA_HOME/lemo (an absolute XDG_DATA_HOME only, as the
// specification asks), else $HOME/.local/share/lemo, else ./lemo-data
// when there is no home (a service without HOME). environ is as
// os.Environ returns it.
//
// The data folder lives outside the folders people work in, so that
// lemo run can make the current folder a Task's workspace: the workspace
// policy refuses a folder that contains the data folder (its tools could
// read the token).
func DataFolder(data string, environ []string) string {
	if data != "" {
		return data
	}
	var xdg, home string
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		switch name {
		case "XDG_DATA_HOME":
			xdg = value
		case "HOME":
			home = value
		}
	}
	switch {
	case filepath.IsAbs(xdg):
		return filepath.Join(xdg, "lemo")
	case filepath.IsAbs(home):
		return filepath.Join(home, ".local", "share", "lemo")
	}
	return "lemo-data"
}
