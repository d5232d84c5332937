package main

// Values the way Helm reads and combines them. Helm parses YAML with sigs.k8s.io/yaml: go-yaml v2 first, then a
// round trip through encoding/json, so every number in .Values is a float64 and every key a string. Neither
// library is packaged for Debian, so the round trip is done here with the same two steps.

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"gopkg.in/yaml.v2"
)

// yamlToJSON converts a YAML document to JSON the way sigs.k8s.io/yaml does: map keys become strings.
func yamlToJSON(data []byte) ([]byte, error) {
	var obj interface{}
	if err := yaml.Unmarshal(data, &obj); err != nil {
		return nil, err
	}
	jsonable, err := jsonable(obj)
	if err != nil {
		return nil, err
	}
	return json.Marshal(jsonable)
}

func jsonable(v interface{}) (interface{}, error) {
	switch t := v.(type) {
	case map[interface{}]interface{}:
		out := make(map[string]interface{}, len(t))
		for k, val := range t {
			key, err := jsonKey(k)
			if err != nil {
				return nil, err
			}
			if out[key], err = jsonable(val); err != nil {
				return nil, err
			}
		}
		return out, nil
	case []interface{}:
		out := make([]interface{}, len(t))
		for i, val := range t {
			var err error
			if out[i], err = jsonable(val); err != nil {
				return nil, err
			}
		}
		return out, nil
	default:
		return v, nil
	}
}

func jsonKey(k interface{}) (string, error) {
	switch t := k.(type) {
	case string:
		return t, nil
	case int:
		return strconv.Itoa(t), nil
	case int64:
		return strconv.FormatInt(t, 10), nil
	case uint64:
		return strconv.FormatUint(t, 10), nil
	case float64:
		return strconv.FormatFloat(t, 'g', -1, 32), nil
	case bool:
		return strconv.FormatBool(t), nil
	default:
		return "", fmt.Errorf("unsupported map key of type %T: %v", k, k)
	}
}

// yamlUnmarshal decodes YAML into out through JSON, as sigs.k8s.io/yaml.Unmarshal does (no UseNumber: float64).
func yamlUnmarshal(data []byte, out interface{}) error {
	j, err := yamlToJSON(data)
	if err != nil {
		return err
	}
	return json.Unmarshal(j, out)
}

// yamlMarshal encodes v as sigs.k8s.io/yaml.Marshal does: JSON first (so json tags and float64s apply), then that
// JSON re-read by go-yaml and written as YAML, which quotes every string YAML 1.1 would read as something else
// ("yes", "on", "8000").
func yamlMarshal(v interface{}) ([]byte, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var obj interface{}
	if err := yaml.Unmarshal(j, &obj); err != nil {
		return nil, err
	}
	return yaml.Marshal(obj)
}

// readValuesFile is chartutil.ReadValuesFile: an empty file is an empty map.
func readValuesFile(file string) (map[string]interface{}, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	vals := map[string]interface{}{}
	if err := yamlUnmarshal(data, &vals); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if vals == nil {
		vals = map[string]interface{}{}
	}
	return vals, nil
}

// mergeMaps combines the -f files, later over earlier, as `helm template` does before the chart's defaults
// come in: maps merge key by key, anything else (a null too) replaces.
func mergeMaps(a, b map[string]interface{}) map[string]interface{} {
	out := make(map[string]interface{}, len(a))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		if bv, ok := v.(map[string]interface{}); ok {
			if av, ok := out[k].(map[string]interface{}); ok {
				out[k] = mergeMaps(av, bv)
				continue
			}
		}
		out[k] = v
	}
	return out
}

type warnFn func(format string, args ...interface{})

// coalesce lays the chart's values.yaml under the user's values (chartutil.CoalesceValues for a chart without
// dependencies): user values win, maps merge, and a user null deletes the chart's default.
func coalesce(warn warnFn, chartName string, chartValues, user map[string]interface{}) map[string]interface{} {
	defaults := deepCopy(chartValues).(map[string]interface{})
	v := deepCopy(user).(map[string]interface{})
	for key, val := range defaults {
		value, ok := v[key]
		if !ok {
			v[key] = val
			continue
		}
		if value == nil {
			delete(v, key)
		} else if dest, ok := value.(map[string]interface{}); ok {
			if src, ok := val.(map[string]interface{}); ok {
				coalesceTables(warn, dest, src, chartName+"."+key)
			} else if val != nil {
				warn("warning: skipped value for %s.%s: Not a table.", chartName, key)
			}
		}
	}
	return v
}

// coalesceTables merges the chart's table src under the user's table dst (chartutil.coalesceTablesFullKey).
func coalesceTables(warn warnFn, dst, src map[string]interface{}, prefix string) {
	// a null the user gives for a key the chart also leaves null stays; one over a chart default removes it
	srcNonNil := map[string]bool{}
	for key, val := range src {
		if val != nil {
			srcNonNil[key] = true
		}
	}
	for key, val := range dst {
		if val == nil {
			src[key] = nil
		}
	}
	for key, val := range src {
		fullKey := prefix + "." + key
		dv, ok := dst[key]
		switch {
		case ok && dv == nil && srcNonNil[key]:
			delete(dst, key)
		case !ok:
			dst[key] = val
		case isTable(val):
			if isTable(dv) {
				coalesceTables(warn, dv.(map[string]interface{}), val.(map[string]interface{}), fullKey)
			} else {
				warn("warning: cannot overwrite table with non table for %s (%v)", fullKey, val)
			}
		case isTable(dv) && val != nil:
			warn("warning: destination for %s is a table. Ignoring non-table value (%v)", fullKey, val)
		}
	}
}

func isTable(v interface{}) bool {
	_, ok := v.(map[string]interface{})
	return ok
}

// deepCopy copies what JSON decoding produces (maps, slices, scalars), so that merging never edits its inputs.
func deepCopy(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		out := make(map[string]interface{}, len(t))
		for k, val := range t {
			out[k] = deepCopy(val)
		}
		return out
	case []interface{}:
		out := make([]interface{}, len(t))
		for i, val := range t {
			out[i] = deepCopy(val)
		}
		return out
	default:
		return v
	}
}
