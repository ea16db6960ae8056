// Command install-plugins delivers the plugins of a plugin image into a volume of
// its own. It is the entrypoint of the images scripts/plugin-image.sh builds, run as
// an init container; the host's own image then gathers every image's volume into
// the plugins folder (wasm-controller-manager gather-plugins), so no image writes
// another's plugins:
//
//	install-plugins -from /wcm-plugins -to /plugins
//
// Each *.wasm file of -from is copied to a temporary name in -to, synced, and renamed
// into place, so a reader never sees half a file. A name already in -to (left by an
// earlier run of the same init container) is replaced and said so. It prints one line
// per plugin: its name, size and SHA-256, the same digest the host's /plugins
// endpoint shows.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	from := flag.String("from", "/wcm-plugins", "the image's plugins folder")
	to := flag.String("to", "/plugins", "the host's plugins folder (a shared volume)")
	flag.Parse()
	if err := run(*from, *to); err != nil {
		fmt.Fprintln(os.Stderr, "install-plugins:", err)
		os.Exit(1)
	}
}

func run(from, to string) error {
	names, err := pluginFiles(from)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return fmt.Errorf("%s holds no *.wasm file: nothing to install", from)
	}
	for _, name := range names {
		_, err := os.Stat(filepath.Join(to, name))
		replaced := err == nil
		size, digest, err := install(filepath.Join(from, name), to, name)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		note := ""
		if replaced {
			note = " (replaced the file an earlier run installed)"
		}
		fmt.Printf("installed %s: %d bytes, sha256 %s%s\n", name, size, digest, note)
	}
	return nil
}

// pluginFiles lists the regular *.wasm files of dir, sorted.
func pluginFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".wasm") && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// install copies src to dir/name through a hidden temporary file (the host ignores
// hidden files) and renames it into place once it is whole and synced.
func install(src, dir, name string) (int64, string, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, "", err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(dir, "."+name+".*")
	if err != nil {
		return 0, "", err
	}
	hash := sha256.New()
	size, err := io.Copy(io.MultiWriter(tmp, hash), in)
	err = errors.Join(err, tmp.Chmod(0o644), tmp.Sync(), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return 0, "", err
	}
	return size, hex.EncodeToString(hash.Sum(nil)), nil
}
