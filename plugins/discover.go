package plugins

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gobtl/gobtl/internal/suggest"
)

// EnvPath lists directories searched for plugins, separated by ':' like
// $PATH, after the stack file's plugin_dir.
const EnvPath = "GOBTL_PLUGIN_PATH"

// DefaultDir is searched last, relative to the working directory: where
// `make plugins` puts the built-in policies' plugins in a checkout.
const DefaultDir = "bin/plugins"

// ExeDir and PrefixDir are searched relative to the directory of the
// running executable: plugins/ next to it (bin/plugins beside bin/gobtl
// in a checkout), and the install prefix's lib/gobtl/plugins (where
// `make install PREFIX=...` puts them beside PREFIX/bin/gobtl).
const (
	ExeDir    = "plugins"
	PrefixDir = "../lib/gobtl/plugins"
)

// executable is os.Executable, replaced by tests.
var executable = os.Executable

// Dir is a directory searched for plugins and why it is searched.
type Dir struct {
	Path string
	// Origin says where the directory comes from: "plugin_dir",
	// "$GOBTL_PLUGIN_PATH", "next to the executable", "install prefix",
	// "working directory".
	Origin string
}

// Search returns the directories searched for a plugin named in a policy
// block, in order: the block's plugin_dir (relative to the stack file's
// directory), each entry of $GOBTL_PLUGIN_PATH, plugins/ next to the
// running executable, the install prefix's lib/gobtl/plugins, then
// DefaultDir. So a stack works from any working directory with the
// plugins installed beside the command, and a checkout's bin/plugins is
// found by bin/gobtl wherever it runs.
func Search(pluginDir, configDir string) []Dir {
	var dirs []Dir
	if pluginDir != "" {
		dirs = append(dirs, Dir{resolve(pluginDir, configDir), "plugin_dir"})
	}
	for _, d := range filepath.SplitList(os.Getenv(EnvPath)) {
		if d != "" {
			dirs = append(dirs, Dir{d, "$" + EnvPath})
		}
	}
	if exe, err := executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		bin := filepath.Dir(exe)
		dirs = append(dirs, Dir{filepath.Join(bin, ExeDir), "next to the executable"},
			Dir{filepath.Clean(filepath.Join(bin, PrefixDir)), "install prefix"})
	}
	return Unique(append(dirs, Dir{DefaultDir, "working directory"}))
}

// Unique drops the directories that are an earlier one (bin/gobtl run
// from the top of a checkout: the executable's plugins/ is the working
// directory's bin/plugins).
func Unique(dirs []Dir) []Dir {
	var out []Dir
	seen := map[string]bool{}
	for _, d := range dirs {
		key := filepath.Clean(d.Path)
		if abs, err := filepath.Abs(d.Path); err == nil {
			key = abs
		}
		if !seen[key] {
			seen[key] = true
			out = append(out, d)
		}
	}
	return out
}

// SearchDirs is Search's paths.
func SearchDirs(pluginDir, configDir string) []string {
	var out []string
	for _, d := range Search(pluginDir, configDir) {
		out = append(out, d.Path)
	}
	return out
}

func resolve(path, base string) string {
	if filepath.IsAbs(path) || base == "" {
		return path
	}
	return filepath.Join(base, path)
}

// NotFoundError reports a plugin that is in none of the searched places.
type NotFoundError struct {
	Name     string
	Searched []string // every path tried, in order
	// Suggestion is the plugin in the searched directories whose name is
	// closest to Name, "" when none is close.
	Suggestion string
}

func (e *NotFoundError) Error() string {
	s := fmt.Sprintf("plugin %q not found; searched %s", e.Name, strings.Join(e.Searched, ", "))
	if e.Suggestion != "" {
		s += fmt.Sprintf(". Did you mean %q?", e.Suggestion)
	}
	return s
}

// Find returns the path of the plugin called name in the first of dirs
// that holds an executable file of that name.
func Find(name string, dirs []string) (string, error) {
	if name == "" || strings.ContainsRune(name, filepath.Separator) || name == "." || name == ".." {
		return "", fmt.Errorf("plugin name %q is not a file name (give a file with path = \"...\")", name)
	}
	var searched []string
	for _, d := range dirs {
		p := filepath.Join(d, name)
		searched = append(searched, p)
		if err := checkExecutable(p); err == nil {
			return p, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
	}
	nf := &NotFoundError{Name: name, Searched: searched}
	if cands, err := Candidates(dirs); err == nil {
		names := make([]string, len(cands))
		for i, c := range cands {
			names[i] = c.Name
		}
		nf.Suggestion = suggest.Nearest(name, names)
	}
	return "", nf
}

// checkExecutable reports why path cannot be a plugin executable.
func checkExecutable(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	if st.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not executable (chmod +x it)", path)
	}
	return nil
}

// Candidate is an executable found in a plugin directory.
type Candidate struct {
	Name string
	Path string
	// Shadowed is set when a directory earlier in the search order has a
	// file of the same name, which is the one a stack file gets.
	Shadowed bool
}

// Candidates lists the executables in dirs, in search order; directories
// that do not exist are skipped.
func Candidates(dirs []string) ([]Candidate, error) {
	var out []Candidate
	seen := map[string]bool{}
	for _, d := range dirs {
		ents, err := os.ReadDir(d)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
		for _, e := range ents {
			p := filepath.Join(d, e.Name())
			if checkExecutable(p) != nil {
				continue
			}
			out = append(out, Candidate{Name: e.Name(), Path: p, Shadowed: seen[e.Name()]})
			seen[e.Name()] = true
		}
	}
	return out, nil
}
