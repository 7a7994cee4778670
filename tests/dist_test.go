package tests

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The release archive is what is tested, not the build tree: make dist
// builds the archives into a temporary folder, the checksums are checked,
// this machine's archive is unpacked and its binary runs end to end — lemo
// version, lemo serve on a fresh data folder with the packed example
// configuration, one Task through the packed binary's own client, and a
// SIGTERM that ends it with status 0.
func TestReleaseArchive(t *testing.T) {
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skipf("release archives are built for linux/amd64 and linux/arm64, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	if _, err := exec.LookPath("make"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("make is not installed")
		}
		t.Skip("make is not installed")
	}
	const version = "v9.8.7-e2e"
	const commit = "0123456789abcdef0123456789abcdef01234567"
	out := filepath.Join(t.TempDir(), "dist")
	start := time.Now()
	build := exec.Command("make", "-C", "..", "dist", "DIST="+out, "VERSION="+version, "COMMIT="+commit)
	build.Env = cleanEnv()
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make dist: %v\n%s", err, b)
	}
	t.Logf("make dist took %v", time.Since(start).Round(time.Second))

	// Both archives and a checksum file that matches them.
	want := []string{"lemo-" + version + "-linux-amd64.tar.gz", "lemo-" + version + "-linux-arm64.tar.gz"}
	sums := readSums(t, filepath.Join(out, "SHA256SUMS"))
	if got := slices.Sorted(maps.Keys(sums)); !slices.Equal(got, want) {
		t.Fatalf("SHA256SUMS lists %v, want %v", got, want)
	}
	for name, sum := range sums {
		if got := fileSHA256(t, filepath.Join(out, name)); got != sum {
			t.Fatalf("%s: sha256 %s, SHA256SUMS says %s", name, got, sum)
		}
	}

	// This machine's archive holds the binary, the README, the LICENSE
	// and the example production files, in one folder.
	name := "lemo-" + version + "-linux-" + runtime.GOARCH
	dir := t.TempDir()
	files := unpack(t, filepath.Join(out, name+".tar.gz"), dir)
	if wantFiles := []string{name + "/LICENSE", name + "/README.md", name + "/lemo", name + "/lemo.service", name + "/lemo.yaml"}; !slices.Equal(files, wantFiles) {
		t.Fatalf("archive holds %v, want %v", files, wantFiles)
	}
	root := filepath.Join(dir, name)
	bin := filepath.Join(root, "lemo")
	checkStatic(t, bin)

	// lemo version: version, commit, Go version, API protocol.
	b, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("lemo version: %v\n%s", err, b)
	}
	for _, w := range []string{"lemo " + version + "\n", "commit " + commit + "\n", runtime.Version() + " linux/" + runtime.GOARCH + "\n", "api protocol 1\n"} {
		if !strings.Contains(string(b), w) {
			t.Errorf("lemo version lacks %q:\n%s", w, b)
		}
	}

	// lemo serve from the archive, with its example configuration (the
	// data folder and addresses overridden for a test).
	data := filepath.Join(t.TempDir(), "data")
	d := launchDaemon(t, bin, data, "--config", filepath.Join(root, "lemo.yaml"), "--http-listen", "127.0.0.1:0")
	select {
	case <-d.ready:
	case <-d.done:
		t.Fatalf("the packed lemo serve exited: %v\n%s", d.err, d.logs())
	case <-time.After(30 * time.Second):
		t.Fatalf("the packed lemo serve did not start:\n%s", d.logs())
	}
	addr := httpAddr(t, d)
	if code, _ := httpGet(t, addr, "/readyz"); code != 200 {
		t.Fatalf("/readyz = %d", code)
	}
	run := exec.Command(bin, "run", "--private-workspace", "--model", "fake/echo", "hi from the archive")
	run.Env = cleanEnv("LEMO_DATA=" + data)
	b, err = run.CombinedOutput()
	if err != nil || !strings.Contains(string(b), "echo: hi from the archive") || !strings.Contains(string(b), "[finished: answered]") {
		t.Fatalf("lemo run with the packed binary: %v\n%s", err, b)
	}
	d.stopWith(syscall.SIGTERM)
	if _, err := os.Stat(filepath.Join(data, "daemon.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("daemon.json left after a clean exit: %v", err)
	}
	if !strings.Contains(d.logs(), `"message":"stopped"`) {
		t.Fatalf("no clean stop in the log:\n%s", d.logs())
	}
}

func readSums(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 {
			t.Fatalf("SHA256SUMS line %q", sc.Text())
		}
		out[name] = sum
	}
	return out
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// unpack extracts a .tar.gz into dir and returns its regular files, sorted.
// Entries must be owned by root and stay inside dir.
func unpack(t *testing.T, archive, dir string) []string {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var files []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || !filepath.IsLocal(h.Name) {
			t.Fatalf("archive entry %s: uid %d gid %d", h.Name, h.Uid, h.Gid)
		}
		p := filepath.Join(dir, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			w, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_EXCL, os.FileMode(h.Mode).Perm())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(w, tr); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			files = append(files, strings.TrimPrefix(h.Name, "./"))
		default:
			t.Fatalf("archive entry %s of type %c", h.Name, h.Typeflag)
		}
	}
	slices.Sort(files)
	return files
}

// checkStatic fails unless bin is an executable ELF with no interpreter and
// no shared libraries.
func checkStatic(t *testing.T, bin string) {
	t.Helper()
	fi, err := os.Stat(bin)
	if err != nil || fi.Mode().Perm()&0o111 == 0 {
		t.Fatalf("%s: %v, mode %v: want an executable", bin, err, fi.Mode())
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatalf("%s has a program interpreter: it is dynamically linked", bin)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Fatalf("%s needs shared libraries %v", bin, libs)
	}
}
