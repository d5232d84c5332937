package main

// From rendered files to `helm template` output, following Helm's releaseutil: files in name order, each split
// into documents, empty documents dropped, hooks set apart, documents sorted by kind in Helm's install order
// (stable: same-kind documents keep their order; unknown kinds last, by kind name), each printed under
// "---\n# Source: <template>".

import (
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

type simpleHead struct {
	Version  string `json:"apiVersion"`
	Kind     string `json:"kind,omitempty"`
	Metadata *struct {
		Name        string            `json:"name"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata,omitempty"`
}

type manifest struct {
	// Source is the template that produced it: llm-router/templates/router.yaml
	Source  string
	Content string
	Head    simpleHead
}

func (m manifest) name() string {
	if m.Head.Metadata == nil {
		return ""
	}
	return m.Head.Metadata.Name
}

// installOrder is releaseutil.InstallOrder.
var installOrder = []string{
	"PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange", "PodSecurityPolicy",
	"PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList", "ConfigMap", "StorageClass", "PersistentVolume",
	"PersistentVolumeClaim", "CustomResourceDefinition", "ClusterRole", "ClusterRoleList", "ClusterRoleBinding",
	"ClusterRoleBindingList", "Role", "RoleList", "RoleBinding", "RoleBindingList", "Service", "DaemonSet", "Pod",
	"ReplicationController", "ReplicaSet", "Deployment", "HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob",
	"IngressClass", "Ingress", "APIService", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
}

// hookEvents are the helm.sh/hook values Helm knows; a document with another value is skipped, as Helm does.
var hookEvents = map[string]bool{
	"pre-install": true, "post-install": true, "pre-delete": true, "post-delete": true, "pre-upgrade": true,
	"post-upgrade": true, "pre-rollback": true, "post-rollback": true, "test": true, "test-success": true,
}

var documentSeparator = regexp.MustCompile("(?:^|\\s*\n)---\\s*")

func splitDocuments(file string) []string {
	var docs []string
	for _, d := range documentSeparator.Split(strings.TrimSpace(file), -1) {
		if d != "" {
			docs = append(docs, strings.TrimSpace(d))
		}
	}
	return docs
}

// sortManifests returns the documents to apply and the hooks, each in Helm's order.
func sortManifests(files map[string]string) (generic, hooks []manifest, err error) {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if strings.TrimSpace(files[p]) == "" {
			continue
		}
		for _, doc := range splitDocuments(files[p]) {
			m := manifest{Source: p, Content: doc}
			if err := yamlUnmarshal([]byte(doc), &m.Head); err != nil {
				return nil, nil, fmt.Errorf("YAML parse error on %s: %w", p, err)
			}
			hook, isHook := "", false
			if m.Head.Metadata != nil {
				hook, isHook = m.Head.Metadata.Annotations["helm.sh/hook"]
			}
			if !isHook {
				generic = append(generic, m)
				continue
			}
			known := true
			for _, event := range strings.Split(hook, ",") {
				known = known && hookEvents[strings.ToLower(strings.TrimSpace(event))]
			}
			if known {
				hooks = append(hooks, m)
			}
		}
	}
	return sortByKind(generic), sortByKind(hooks), nil
}

func sortByKind(ms []manifest) []manifest {
	rank := make(map[string]int, len(installOrder))
	for i, k := range installOrder {
		rank[k] = i
	}
	sort.SliceStable(ms, func(i, j int) bool {
		a, aok := rank[ms[i].Head.Kind]
		b, bok := rank[ms[j].Head.Kind]
		switch {
		case !aok && !bok:
			return ms[i].Head.Kind < ms[j].Head.Kind
		case !aok:
			return false
		case !bok:
			return true
		default:
			return a < b
		}
	})
	return ms
}

// selectTemplates is `helm template --show-only`: for each pattern in turn, the documents whose template path
// (without the chart name) matches it as a file glob; a pattern that matches nothing is an error.
func selectTemplates(ms []manifest, patterns []string) ([]manifest, error) {
	var out []manifest
	for _, pattern := range patterns {
		found := false
		for _, m := range ms {
			rel := m.Source[strings.Index(m.Source, "/")+1:]
			if ok, _ := filepath.Match(filepath.ToSlash(pattern), rel); ok {
				out = append(out, m)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("could not find template %s in chart", pattern)
		}
	}
	return out, nil
}

func manifestText(ms []manifest) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Source, m.Content)
	}
	return b.String()
}
