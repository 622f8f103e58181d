package plugins

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// EnvPath lists directories searched for plugins, separated by ':' like
// $PATH, after the stack file's plugin_dir and before DefaultDir.
const EnvPath = "GOBTL_PLUGIN_PATH"

// DefaultDir is searched last, relative to the working directory: where
// `make plugins` puts the built-in policies' plugins.
const DefaultDir = "bin/plugins"

// SearchDirs returns the directories searched for a plugin named in a
// policy block, in order: the block's plugin_dir (relative to the stack
// file's directory), each entry of $GOBTL_PLUGIN_PATH, then DefaultDir.
func SearchDirs(pluginDir, configDir string) []string {
	var dirs []string
	if pluginDir != "" {
		dirs = append(dirs, resolve(pluginDir, configDir))
	}
	for _, d := range filepath.SplitList(os.Getenv(EnvPath)) {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	return append(dirs, DefaultDir)
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
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("plugin %q not found; searched %s", e.Name, strings.Join(e.Searched, ", "))
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
	return "", &NotFoundError{Name: name, Searched: searched}
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
