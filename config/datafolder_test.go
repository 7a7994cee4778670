package config

import "testing"

// The data folder defaults to the user's data home, outside the folders
// people work in.
func TestDataFolder(t *testing.T) {
	for _, c := range []struct {
		data    string
		environ []string
		want    string
	}{
		{"/srv/lemo", []string{"HOME=/home/ann", "XDG_DATA_HOME=/x"}, "/srv/lemo"},
		{"rel", []string{"HOME=/home/ann"}, "rel"},
		{"", []string{"HOME=/home/ann", "XDG_DATA_HOME=/home/ann/.data"}, "/home/ann/.data/lemo"},
		{"", []string{"HOME=/home/ann", "XDG_DATA_HOME=relative"}, "/home/ann/.local/share/lemo"},
		{"", []string{"HOME=/home/ann", "XDG_DATA_HOME="}, "/home/ann/.local/share/lemo"},
		{"", []string{"PATH=/bin"}, "lemo-data"},
		{"", []string{"HOME="}, "lemo-data"},
	} {
		if got := DataFolder(c.data, c.environ); got != c.want {
			t.Errorf("DataFolder(%q, %q) = %q, want %q", c.data, c.environ, got, c.want)
		}
	}
}
