package config

// Storage configures the store's guards.
type Storage struct {
	// MinFreeMiB is the free-space floor of the data folder's filesystem:
	// below it the daemon accepts no new work (running Tasks go on), so the
	// store never runs the disk full (Badger crashes on a full disk).
	MinFreeMiB int `yaml:"min_free_mib" env:"LEMO_STORAGE_MIN_FREE_MIB" help:"free space (MiB) the data folder's filesystem must keep; below it new work is refused; 0 disables the guard"`
}
