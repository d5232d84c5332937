package main

// Loading a chart directory as Helm's loader does for a chart without dependencies: Chart.yaml becomes .Chart,
// values.yaml the defaults, every file below templates/ a template named <chart>/templates/<path>, and every other
// file .Files (a symbolic link is read through, as Helm's loader does).

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
)

// Maintainer and Metadata carry Chart.yaml's fields under the names templates use (.Chart.Name, .Chart.AppVersion).
type Maintainer struct {
	Name  string `json:"name,omitempty"`
	Email string `json:"email,omitempty"`
	URL   string `json:"url,omitempty"`
}

type Metadata struct {
	Name         string            `json:"name,omitempty"`
	Home         string            `json:"home,omitempty"`
	Sources      []string          `json:"sources,omitempty"`
	Version      string            `json:"version,omitempty"`
	Description  string            `json:"description,omitempty"`
	Keywords     []string          `json:"keywords,omitempty"`
	Maintainers  []*Maintainer     `json:"maintainers,omitempty"`
	Icon         string            `json:"icon,omitempty"`
	APIVersion   string            `json:"apiVersion,omitempty"`
	Condition    string            `json:"condition,omitempty"`
	Tags         string            `json:"tags,omitempty"`
	AppVersion   string            `json:"appVersion,omitempty"`
	Deprecated   bool              `json:"deprecated,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	KubeVersion  string            `json:"kubeVersion,omitempty"`
	Type         string            `json:"type,omitempty"`
	Dependencies []interface{}     `json:"dependencies,omitempty"`
}

type templateFile struct {
	// Name is relative to the chart: templates/router.yaml
	Name string
	Data string
}

// Files is .Files: the chart's other files by their path in the chart (dashboards/x.json).
type Files map[string][]byte

// Get is Helm's .Files.Get: the file's text, "" when there is no such file.
func (f Files) Get(name string) string { return string(f[name]) }

// GetBytes is Helm's .Files.GetBytes.
func (f Files) GetBytes(name string) []byte { return f[name] }

type Chart struct {
	Metadata  *Metadata
	Values    map[string]interface{}
	Templates []templateFile
	Files     Files
}

func loadChart(dir string) (*Chart, error) {
	data, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return nil, fmt.Errorf("%s is not a chart: %w", dir, err)
	}
	meta := &Metadata{}
	if err := yamlUnmarshal(data, meta); err != nil {
		return nil, fmt.Errorf("cannot load Chart.yaml: %w", err)
	}
	if meta.APIVersion == "" || meta.Name == "" || meta.Version == "" {
		return nil, errors.New("validation: Chart.yaml needs apiVersion, name and version")
	}
	// subcharts change values scoping and template sets; this renderer does not do them, so it says so
	if len(meta.Dependencies) > 0 {
		return nil, errors.New("chart dependencies are not supported by this renderer")
	}
	if _, err := os.Stat(filepath.Join(dir, "charts")); err == nil {
		return nil, errors.New("charts/ (subcharts) is not supported by this renderer")
	}
	c := &Chart{Metadata: meta, Values: map[string]interface{}{}}
	if _, err := os.Stat(filepath.Join(dir, "values.yaml")); err == nil {
		if c.Values, err = readValuesFile(filepath.Join(dir, "values.yaml")); err != nil {
			return nil, err
		}
	}
	root := filepath.Join(dir, "templates")
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		body, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		c.Templates = append(c.Templates, templateFile{Name: filepath.ToSlash(rel), Data: string(body)})
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	sort.Slice(c.Templates, func(i, j int) bool { return c.Templates[i].Name < c.Templates[j].Name })
	if c.Files, err = loadFiles(dir); err != nil {
		return nil, err
	}
	return c, nil
}

// loadFiles reads every file that is not the chart's metadata, its values or a template. .helmignore is not read here, so a
// chart that has one is refused rather than given files Helm would leave out.
func loadFiles(dir string) (Files, error) {
	files := Files{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "templates" {
				return filepath.SkipDir
			}
			return nil
		}
		switch rel {
		case ".helmignore":
			return errors.New(".helmignore is not supported by this renderer")
		// Helm's loader gives these their own places, never .Files
		case "Chart.yaml", "Chart.lock", "values.yaml", "values.schema.json", "requirements.yaml", "requirements.lock":
			return nil
		}
		body, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files[rel] = body
		return nil
	})
	return files, err
}

// templatePath is the name a template has in the engine and in `# Source:` lines.
func (c *Chart) templatePath(name string) string {
	return path.Join(c.Metadata.Name, name)
}
