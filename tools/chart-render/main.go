// chart-render prints a Helm chart rendered as `helm template` prints it, built from the libraries Helm's engine
// is built from (text/template, Sprig, go-yaml), for machines without helm. It covers what a chart without
// dependencies uses: values files, .Release, .Chart, .Capabilities, .Template, .Files.Get and .Files.GetBytes, and
// Helm's template functions. Not covered (an error or a missing function says so): subcharts, .helmignore, the other
// .Files methods (Glob, AsConfig, AsSecrets, Lines), --set, toToml, toYamlPretty.
//
//	chart-render [CHART] [-f VALUES]... [--release-name N] [--namespace NS] [--show-only templates/X.yaml]...
//	             [--kube-version v1.32.0] [--api-versions group/version]... [--json]
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
)

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

type options struct {
	chart       string
	valueFiles  stringList
	releaseName string
	namespace   string
	showOnly    stringList
	kubeVersion string
	extraAPIs   stringList
	jsonOutput  bool
	isUpgrade   bool
}

func parseArgs(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("chart-render", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Var(&o.valueFiles, "f", "values file over the chart's values.yaml; repeat for more (later wins)")
	fs.Var(&o.valueFiles, "values", "same as -f")
	fs.StringVar(&o.releaseName, "release-name", "llm-router", "release name (.Release.Name)")
	fs.StringVar(&o.namespace, "namespace", "default", "release namespace (.Release.Namespace)")
	fs.Var(&o.showOnly, "show-only", "only documents from templates matching this path, e.g. templates/rbac.yaml; repeatable")
	fs.StringVar(&o.kubeVersion, "kube-version", "v1.32.0", ".Capabilities.KubeVersion")
	fs.Var(&o.extraAPIs, "api-versions", "an API version .Capabilities.APIVersions.Has reports beyond the built-in ones; repeatable")
	fs.BoolVar(&o.isUpgrade, "is-upgrade", false, "set .Release.IsUpgrade instead of .Release.IsInstall")
	fs.BoolVar(&o.jsonOutput, "json", false, "print {manifest, documents: [{source, kind, name, text}]} instead of YAML")
	// the chart may stand before, between or after the flags
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
	if len(positional) > 1 {
		return nil, fmt.Errorf("one chart directory expected, got %q", positional)
	}
	if len(positional) == 0 {
		return nil, errors.New("the chart directory is missing")
	}
	o.chart = positional[0]
	return o, nil
}

// builtinAPIVersions are the group versions a current Kubernetes serves, for .Capabilities.APIVersions.Has.
var builtinAPIVersions = []string{
	"v1", "admissionregistration.k8s.io/v1", "apiextensions.k8s.io/v1", "apiregistration.k8s.io/v1", "apps/v1",
	"authentication.k8s.io/v1", "authorization.k8s.io/v1", "autoscaling/v1", "autoscaling/v2", "batch/v1",
	"certificates.k8s.io/v1", "coordination.k8s.io/v1", "discovery.k8s.io/v1", "events.k8s.io/v1",
	"flowcontrol.apiserver.k8s.io/v1", "networking.k8s.io/v1", "node.k8s.io/v1", "policy/v1",
	"rbac.authorization.k8s.io/v1", "scheduling.k8s.io/v1", "storage.k8s.io/v1",
}

// VersionSet and KubeVersion have the shape of Helm's chartutil types, so .Capabilities reads the same.
type VersionSet []string

func (v VersionSet) Has(apiVersion string) bool {
	for _, x := range v {
		if x == apiVersion {
			return true
		}
	}
	return false
}

type KubeVersion struct {
	Version string
	Major   string
	Minor   string
}

func (kv *KubeVersion) String() string { return kv.Version }

type Capabilities struct {
	KubeVersion KubeVersion
	APIVersions VersionSet
}

func parseKubeVersion(v string) (KubeVersion, error) {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return KubeVersion{}, fmt.Errorf("invalid kube version %q", v)
	}
	version := "v" + strings.Join(parts, ".")
	if len(parts) == 2 {
		version += ".0"
	}
	return KubeVersion{Version: version, Major: parts[0], Minor: parts[1]}, nil
}

type document struct {
	Source string `json:"source"`
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Text   string `json:"text"`
}

func run(o *options, stderr io.Writer) (string, error) {
	c, err := loadChart(o.chart)
	if err != nil {
		return "", err
	}
	user := map[string]interface{}{}
	for _, f := range o.valueFiles {
		vals, err := readValuesFile(f)
		if err != nil {
			return "", err
		}
		user = mergeMaps(user, vals)
	}
	kube, err := parseKubeVersion(o.kubeVersion)
	if err != nil {
		return "", err
	}
	warn := func(format string, args ...interface{}) { fmt.Fprintf(stderr, format+"\n", args...) }
	top := map[string]interface{}{
		"Chart":        c.Metadata,
		"Capabilities": &Capabilities{KubeVersion: kube, APIVersions: append(VersionSet(builtinAPIVersions), o.extraAPIs...)},
		"Release": map[string]interface{}{
			"Name":      o.releaseName,
			"Namespace": o.namespace,
			"IsUpgrade": o.isUpgrade,
			"IsInstall": !o.isUpgrade,
			"Revision":  1,
			"Service":   "Helm",
		},
		"Values": coalesce(warn, c.Metadata.Name, c.Values, user),
		"Files":  c.Files,
	}
	files, err := render(c, top)
	if err != nil {
		return "", err
	}
	// NOTES.txt is shown after an install, never applied
	for name := range files {
		if path.Base(name) == "NOTES.txt" {
			delete(files, name)
		}
	}
	generic, hooks, err := sortManifests(files)
	if err != nil {
		return "", err
	}
	all := append(generic, hooks...)
	if len(o.showOnly) > 0 {
		if all, err = selectTemplates(all, o.showOnly); err != nil {
			return "", err
		}
	}
	text := manifestText(all)
	if !o.jsonOutput {
		return text, nil
	}
	docs := make([]document, 0, len(all))
	for _, m := range all {
		docs = append(docs, document{Source: m.Source, Kind: m.Head.Kind, Name: m.name(), Text: m.Content})
	}
	out, err := json.Marshal(map[string]interface{}{"manifest": text, "documents": docs})
	return string(out) + "\n", err
}

func main() {
	o, err := parseArgs(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error: %s\n", err)
		os.Exit(2)
	}
	out, err := run(o, os.Stderr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error: %s\n", err)
		os.Exit(1)
	}
	os.Stdout.WriteString(out)
}
