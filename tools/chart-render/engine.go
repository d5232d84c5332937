package main

// The template engine, arranged as Helm's pkg/engine arranges text/template and Sprig: one template set holding
// every file of the chart, missingkey=zero, Sprig without env/expandenv, Helm's own functions (include, tpl,
// required, fail, toYaml, ...), partials (_*.tpl) parsed but not rendered, and "<no value>" erased from output.

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
)

// Helm wraps the messages of required and fail in these markers so that the error it reports is the message
// alone, prefixed by where it was raised.
const (
	warnStart = "HELM_ERR_START"
	warnEnd   = "HELM_ERR_END"
	// include calls of one name nested deeper than this are a runaway recursion
	maxIncludeDepth = 1000
)

var warnRegex = regexp.MustCompile(warnStart + `((?s).*)` + warnEnd)

func warnWrap(msg string) string { return warnStart + msg + warnEnd }

// funcMap is Sprig's text functions less the two that read the environment, plus Helm's additions.
// include and tpl are bound to a template set later (bindTemplateFuncs).
func funcMap() template.FuncMap {
	f := sprig.TxtFuncMap()
	delete(f, "env")
	delete(f, "expandenv")
	extra := template.FuncMap{
		"toYaml":        toYAML,
		"fromYaml":      fromYAML,
		"fromYamlArray": fromYAMLArray,
		"toJson":        toJSON,
		"fromJson":      fromJSON,
		"fromJsonArray": fromJSONArray,
		"required": func(msg string, val interface{}) (interface{}, error) {
			if s, isString := val.(string); val == nil || (isString && s == "") {
				return val, errors.New(warnWrap(msg))
			}
			return val, nil
		},
		"fail": func(msg string) (string, error) { return "", errors.New(warnWrap(msg)) },
		// helm template has no cluster to look objects up in: lookup finds nothing
		"lookup": func(string, string, string, string) (map[string]interface{}, error) {
			return map[string]interface{}{}, nil
		},
		// Helm answers no DNS query unless --enable-dns
		"getHostByName": func(string) string { return "" },
		"include":       func(string, interface{}) (string, error) { return "", errors.New("include is not bound") },
		"tpl":           func(string, interface{}) (string, error) { return "", errors.New("tpl is not bound") },
	}
	for k, v := range extra {
		f[k] = v
	}
	return f
}

// toYAML is Helm's: sigs.k8s.io/yaml's Marshal, the trailing newline trimmed, errors swallowed into "".
func toYAML(v interface{}) string {
	data, err := yamlMarshal(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(data), "\n")
}

// fromYAML parses into a map; a parse error becomes m["Error"], as in Helm.
func fromYAML(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := yamlUnmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func fromYAMLArray(s string) []interface{} {
	a := []interface{}{}
	if err := yamlUnmarshal([]byte(s), &a); err != nil {
		a = []interface{}{err.Error()}
	}
	return a
}

func toJSON(v interface{}) string {
	data, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(data)
}

func fromJSON(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func fromJSONArray(s string) []interface{} {
	a := []interface{}{}
	if err := json.Unmarshal([]byte(s), &a); err != nil {
		a = []interface{}{err.Error()}
	}
	return a
}

// bindTemplateFuncs gives t its own include and tpl, so that both see the templates defined in t.
func bindTemplateFuncs(t *template.Template, included map[string]int) {
	t.Funcs(template.FuncMap{
		"include": func(name string, data interface{}) (string, error) {
			if included[name] > maxIncludeDepth {
				return "", fmt.Errorf("rendering template has a nested reference name: %s: unable to execute template", name)
			}
			included[name]++
			defer func() { included[name]-- }()
			var buf strings.Builder
			err := t.ExecuteTemplate(&buf, name, data)
			return buf.String(), err
		},
		// tpl renders a string as a template against vals, in a copy of the set so that its defines stay local
		"tpl": func(text string, vals interface{}) (string, error) {
			clone, err := t.Clone()
			if err != nil {
				return "", fmt.Errorf("cannot clone template: %w", err)
			}
			// Clone does not carry the missingkey option over (golang/go#43022)
			clone.Option("missingkey=zero")
			bindTemplateFuncs(clone, included)
			parsed, err := clone.New(t.Name()).Parse(text)
			if err != nil {
				return "", fmt.Errorf("cannot parse template %q: %w", text, err)
			}
			var buf strings.Builder
			if err := parsed.Execute(&buf, vals); err != nil {
				return "", fmt.Errorf("error during tpl function execution for %q: %w", text, err)
			}
			return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
		},
	})
}

// byPathLen is Helm's parse order: deeper paths first, then names in reverse order, so that when two files
// define one name, the same definition wins as in Helm.
func parseOrder(names []string) []string {
	out := append([]string(nil), names...)
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		ca, cb := strings.Count(a, "/"), strings.Count(b, "/")
		if ca != cb {
			return ca > cb
		}
		return a > b
	})
	return out
}

// render executes every template of the chart that is not a partial, each with top plus .Template.
func render(c *Chart, top map[string]interface{}) (rendered map[string]string, err error) {
	// a panic inside a template function is an error of the render, as in Helm
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("rendering template failed: %v", r)
		}
	}()
	t := template.New("gotpl")
	t.Option("missingkey=zero")
	t.Funcs(funcMap())
	bindTemplateFuncs(t, map[string]int{})

	sources := map[string]string{}
	names := make([]string, 0, len(c.Templates))
	for _, f := range c.Templates {
		name := c.templatePath(f.Name)
		sources[name] = f.Data
		names = append(names, name)
	}
	order := parseOrder(names)
	for _, name := range order {
		if _, err := t.New(name).Parse(sources[name]); err != nil {
			return nil, parseError(name, err)
		}
	}
	basePath := c.templatePath("templates")
	rendered = map[string]string{}
	for _, name := range order {
		if strings.HasPrefix(path.Base(name), "_") {
			continue
		}
		vals := make(map[string]interface{}, len(top)+1)
		for k, v := range top {
			vals[k] = v
		}
		vals["Template"] = map[string]interface{}{"Name": name, "BasePath": basePath}
		var buf strings.Builder
		if err := t.ExecuteTemplate(&buf, name, vals); err != nil {
			return nil, execError(name, err)
		}
		// missingkey=zero still prints "<no value>" for a missing key of a map of interface{}
		rendered[name] = strings.ReplaceAll(buf.String(), "<no value>", "")
	}
	return rendered, nil
}

// parseError and execError shorten text/template's messages the way Helm does:
// "parse error at (chart/templates/x.yaml:3): ..." and "execution error at (chart/templates/x.yaml:3:8): <fail message>".
func parseError(name string, err error) error {
	tokens := strings.Split(err.Error(), ": ")
	if len(tokens) == 1 {
		return fmt.Errorf("parse error in (%s): %w", name, err)
	}
	return fmt.Errorf("parse error at (%s): %s", tokens[1], tokens[len(tokens)-1])
}

func execError(name string, err error) error {
	var exec template.ExecError
	if !errors.As(err, &exec) {
		return err
	}
	tokens := strings.SplitN(err.Error(), ": ", 3)
	if len(tokens) != 3 {
		return fmt.Errorf("execution error in (%s): %w", name, err)
	}
	if parts := warnRegex.FindStringSubmatch(tokens[2]); len(parts) >= 2 {
		return fmt.Errorf("execution error at (%s): %s", tokens[1], parts[1])
	}
	return err
}
