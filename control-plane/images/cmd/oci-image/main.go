// Command oci-image builds a container image tarball from files on disk, without a
// container engine: one layer holding the given files, a config with the entrypoint,
// user, environment and working directory, written as an image archive that
// `ctr images import` (and `docker load`, `podman load`) accept.
//
//	oci-image -out pause.tar -tag wcm.local/pause:1 -entrypoint /pause -add ./pause=/pause:0755
package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// list is a repeatable string flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

// file is one file of the layer: where it comes from, where it goes, its mode.
type file struct {
	src, dst string
	mode     int64
}

func main() {
	var adds, envs, dirs list
	out := flag.String("out", "", "where to write the image archive")
	tag := flag.String("tag", "", "the image reference, e.g. wcm.local/pause:1")
	entrypoint := flag.String("entrypoint", "", "entrypoint as a JSON array, or one path")
	cmd := flag.String("cmd", "", "default arguments (CMD) as a JSON array")
	user := flag.String("user", "", "user (and group) to run as, e.g. 65532:65532")
	workdir := flag.String("workdir", "/", "working directory")
	flag.Var(&adds, "add", "SRC=DST[:MODE] (octal), repeatable")
	flag.Var(&envs, "env", "KEY=VALUE, repeatable")
	flag.Var(&dirs, "dir", "DST[:MODE] an empty directory, repeatable")
	flag.Parse()
	if err := run(*out, *tag, *entrypoint, *cmd, *user, *workdir, adds, envs, dirs); err != nil {
		fmt.Fprintln(os.Stderr, "oci-image:", err)
		os.Exit(1)
	}
}

func run(out, tag, entrypoint, args, user, workdir string, adds, envs, dirs []string) error {
	if out == "" || tag == "" {
		return fmt.Errorf("-out and -tag are required")
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("tag %q: %w", tag, err)
	}
	files, err := parseFiles(adds)
	if err != nil {
		return err
	}
	layerBytes, err := layerTar(files, dirs)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	})
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cmd, err := parseCommand("entrypoint", entrypoint)
	if err != nil {
		return err
	}
	defaults, err := parseCommand("cmd", args)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cfg.Config = v1.Config{Entrypoint: cmd, Cmd: defaults, User: user, Env: envs, WorkingDir: workdir}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	return tarball.WriteToFile(out, ref, img)
}

// parseCommand reads an entrypoint or CMD: a JSON array, or one path.
func parseCommand(what, s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	if strings.HasPrefix(s, "[") {
		var cmd []string
		if err := json.Unmarshal([]byte(s), &cmd); err != nil {
			return nil, fmt.Errorf("%s %q: %w", what, s, err)
		}
		return cmd, nil
	}
	return []string{s}, nil
}

func parseFiles(adds []string) ([]file, error) {
	var files []file
	for _, a := range adds {
		src, dst, ok := strings.Cut(a, "=")
		if !ok {
			return nil, fmt.Errorf("-add %q: expected SRC=DST[:MODE]", a)
		}
		mode := int64(0o644)
		if d, m, ok := strings.Cut(dst, ":"); ok {
			parsed, err := strconv.ParseInt(m, 8, 32)
			if err != nil {
				return nil, fmt.Errorf("-add %q: mode %q: %w", a, m, err)
			}
			dst, mode = d, parsed
		}
		files = append(files, file{src: src, dst: path.Clean("/" + dst), mode: mode})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].dst < files[j].dst })
	return files, nil
}

// layerTar writes the layer: parent directories first, then each file, owned by root,
// with a fixed time, so the same inputs give the same layer.
func layerTar(files []file, dirs []string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	made := map[string]bool{}
	mkdir := func(dir string, mode int64) error {
		if dir == "/" || made[dir] {
			return nil
		}
		made[dir] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(dir, "/") + "/",
			Mode: mode, ModTime: epoch})
	}
	parents := func(p string) error {
		var chain []string
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			chain = append([]string{d}, chain...)
		}
		for _, d := range chain {
			if err := mkdir(d, 0o755); err != nil {
				return err
			}
		}
		return nil
	}
	for _, d := range dirs {
		dst, mode := d, int64(0o755)
		if p, m, ok := strings.Cut(d, ":"); ok {
			parsed, err := strconv.ParseInt(m, 8, 32)
			if err != nil {
				return nil, fmt.Errorf("-dir %q: %w", d, err)
			}
			dst, mode = p, parsed
		}
		dst = path.Clean("/" + dst)
		if err := parents(dst); err != nil {
			return nil, err
		}
		if err := mkdir(dst, mode); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		data, err := os.ReadFile(f.src)
		if err != nil {
			return nil, err
		}
		if err := parents(f.dst); err != nil {
			return nil, err
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f.dst, "/"),
			Mode: f.mode, Size: int64(len(data)), ModTime: epoch}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
