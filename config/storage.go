package config

// Storage configures the store's guards.
type Storage struct {
	// MinFreeMiB is the free-space floor of the data folder's filesystem:
	// below it the daemon accepts no new work (running Tasks go on). The
	// store keeps its own, smaller headroom beside it (persistence.
	// ErrDiskFull): below that running Tasks pause until space is freed.
	MinFreeMiB int `yaml:"min_free_mib" env:"LEMO_STORAGE_MIN_FREE_MIB" help:"free space (MiB) the data folder's filesystem must keep; below it new work is refused; 0 disables the guard"`
}
