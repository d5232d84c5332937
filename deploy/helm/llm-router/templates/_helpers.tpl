{{/* Names and labels shared by every template. */}}

{{- define "llm-router.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "llm-router.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "llm-router.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "llm-router.labels" -}}
helm.sh/chart: {{ include "llm-router.chart" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: llm-router
{{- end -}}

{{- define "llm-router.routerSelectorLabels" -}}
app.kubernetes.io/name: {{ include "llm-router.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: router
{{- end -}}

{{/* The router pods' selector as a label selector string (the KEDA scaler finds its peers with it). */}}
{{- define "llm-router.routerSelector" -}}
{{- $terms := list -}}
{{- range $k, $v := include "llm-router.routerSelectorLabels" . | fromYaml -}}
{{- $terms = append $terms (printf "%s=%s" $k $v) -}}
{{- end -}}
{{- join "," $terms -}}
{{- end -}}

{{- define "llm-router.routerLabels" -}}
{{ include "llm-router.labels" . }}
app.kubernetes.io/name: {{ include "llm-router.name" . }}
app.kubernetes.io/component: router
{{- end -}}

{{- define "llm-router.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "llm-router.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "llm-router.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Namespace the router watches: its own unless router.discovery.namespace says otherwise. */}}
{{- define "llm-router.watchNamespace" -}}
{{- default .Release.Namespace .Values.router.discovery.namespace -}}
{{- end -}}

{{/* The label selector the router discovers engines with: every engine of the pool, prefill ones included (P/D). */}}
{{- define "llm-router.engineSelector" -}}
{{- $terms := list (printf "llm-router/pool=%s" (include "llm-router.fullname" .)) -}}
{{- with .Values.router.discovery.labelSelector -}}
{{- $terms = append $terms . -}}
{{- end -}}
{{- join "," $terms -}}
{{- end -}}

{{/*
The router's --routing-logic, which the engines are rendered from (kvaware: KV-cache events). routing.logic when set;
a routing-logic that router.config, router.env or router.extraArgs also sets must then agree with it. Empty (values
files from before routing.logic): what the router reads from those, flags winning as in the router, else roundrobin.
*/}}
{{- define "llm-router.routingLogic" -}}
{{- $given := toString (default "" .Values.routing.logic) -}}
{{- /* [where, value], lowest precedence first: config file, env, flags */ -}}
{{- $elsewhere := list -}}
{{- range $key, $value := .Values.router.config -}}
{{- if eq (kebabcase $key) "routing-logic" }}{{ $elsewhere = append $elsewhere (list (printf "router.config.%s" $key) $value) }}{{ end -}}
{{- end -}}
{{- range .Values.router.env -}}
{{- if and (eq .name "LLM_ROUTER_ROUTING_LOGIC") (hasKey . "value") }}{{ $elsewhere = append $elsewhere (list "router.env LLM_ROUTER_ROUTING_LOGIC" .value) }}{{ end -}}
{{- end -}}
{{- $args := .Values.router.extraArgs -}}
{{- range $i, $arg := $args -}}
{{- if and (eq (toString $arg) "--routing-logic") (lt (add1 $i) (len $args)) }}{{ $elsewhere = append $elsewhere (list "router.extraArgs --routing-logic" (index $args (add1 $i))) }}{{ end -}}
{{- if hasPrefix "--routing-logic=" (toString $arg) }}{{ $elsewhere = append $elsewhere (list "router.extraArgs --routing-logic" (trimPrefix "--routing-logic=" (toString $arg))) }}{{ end -}}
{{- end -}}
{{- $logic := $given -}}
{{- if $given -}}
{{- range $elsewhere -}}
{{- if ne (toString (index . 1)) $given -}}
{{- fail (printf "%s is %v but routing.logic is %s: set routing.logic only (the engines are rendered from it)" (index . 0) (index . 1) $given) -}}
{{- end -}}
{{- end -}}
{{- else if $elsewhere -}}
{{- $logic = toString (index (last $elsewhere) 1) -}}
{{- else -}}
{{- $logic = "roundrobin" -}}
{{- end -}}
{{- $valid := list "roundrobin" "least-load" "session" "prefixaware" "kvaware" -}}
{{- if not (has $logic $valid) -}}
{{- fail (printf "routing.logic must be one of %s, not %q" (join ", " $valid) $logic) -}}
{{- end -}}
{{- $logic -}}
{{- end -}}

{{/* router.adminPort as a number, 0 when unset */}}
{{- define "llm-router.adminPort" -}}
{{- $p := .Values.router.adminPort -}}
{{- if or (kindIs "invalid" $p) (eq (toString $p) "") -}}0{{- else -}}
{{- $n := int $p -}}
{{- if or (lt $n 1) (gt $n 65535) -}}{{- fail (printf "router.adminPort must be a port number (1-65535), not %v" $p) -}}{{- end -}}
{{- if eq $n (int .Values.router.port) -}}{{- fail (printf "router.adminPort (%d) must differ from router.port" $n) -}}{{- end -}}
{{- if and .Values.keda.enabled (eq .Values.keda.flavour "external-push") (eq $n (int .Values.keda.scalerPort)) -}}
{{- fail (printf "router.adminPort (%d) must differ from keda.scalerPort" $n) -}}
{{- end -}}
{{- $n -}}
{{- end -}}
{{- end -}}

{{/* router.workers as a number (at least 1) */}}
{{- define "llm-router.workers" -}}
{{- $w := 1 -}}
{{- if not (or (kindIs "invalid" .Values.router.workers) (eq (toString .Values.router.workers) "")) }}{{ $w = int .Values.router.workers }}{{ end -}}
{{- if lt $w 1 -}}{{- fail (printf "router.workers must be 1 or more, not %v" .Values.router.workers) -}}{{- end -}}
{{- $w -}}
{{- end -}}

{{/*
The router container's resources: router.resources, with requests.cpu = workers x cpuPerWorker unless
router.resources.requests.cpu is set. cpuPerWorker in millicores ("500m") or cores ("1", "0.5").
*/}}
{{- define "llm-router.routerResources" -}}
{{- $r := deepCopy (default (dict) .Values.router.resources) -}}
{{- $requests := default (dict) $r.requests -}}
{{- if not $requests.cpu -}}
{{- $per := toString .Values.router.cpuPerWorker -}}
{{- $milli := 0 -}}
{{- if hasSuffix "m" $per -}}{{- $milli = int (trimSuffix "m" $per) -}}{{- else -}}{{- $milli = int (mulf (float64 $per) 1000) -}}{{- end -}}
{{- if lt $milli 1 -}}{{- fail (printf "router.cpuPerWorker must be a CPU quantity such as 500m or 1, not %q" $per) -}}{{- end -}}
{{- $total := mul $milli (int (include "llm-router.workers" .)) -}}
{{- $_ := set $requests "cpu" (ternary (toString (div $total 1000)) (printf "%dm" $total) (eq (mod $total 1000) 0)) -}}
{{- $_ = set $r "requests" $requests -}}
{{- end -}}
{{- toYaml $r -}}
{{- end -}}

{{/*
The settings of the router's config file that it applies while it runs (the flags marked `live` in
src/router/config/router-flags.ts, and their other spellings): a change of them reaches the pods through the mounted
ConfigMap, without a restart (docs/operations.md, "Live configuration").
*/}}
{{- define "llm-router.liveSettings" -}}
static-backends static-models static-backend-kv-events static-backend-kv-replay static-backend-roles
static-aliases known-models k8s-known-models lora-adapters routing-logic session-key prefix-block-chars
prefix-balance-epsilon allow-routing-header rate-limit-rps rate-limit-burst trusted-proxies
max-concurrent-requests flow-queue-depth-threshold flow-kv-cache-threshold flow-metrics-staleness-ms
flow-queue-timeout flow-max-requests flow-max-bytes flow-band-max-requests flow-band-max-bytes
request-stats-window static-backend-health-checks static-backend-health-check-interval static-model-types
request-rewriter feature-gates
{{- end -}}

{{/*
The pod template's checksum/config: the config file's settings that only a restart applies, so that a change of them
rolls the router pods and a change of the live ones does not. Whether KV-cache events are used (routing logic kvaware,
or allow-routing-header) counts too: the router sets them up at start-up only.
*/}}
{{- define "llm-router.restartConfigChecksum" -}}
{{- $live := splitList " " (regexReplaceAll "\\s+" (include "llm-router.liveSettings" .) " ") -}}
{{- $kvEvents := eq (include "llm-router.routingLogic" .) "kvaware" -}}
{{- range $key, $value := .Values.router.config -}}
{{- if and (eq (kebabcase $key) "allow-routing-header") (eq (toString $value) "true") }}{{ $kvEvents = true }}{{ end -}}
{{- end -}}
{{- $restart := dict "kv-events" $kvEvents -}}
{{- range $key, $value := .Values.router.config -}}
{{- if not (has (kebabcase $key) $live) }}{{ $_ := set $restart (kebabcase $key) $value }}{{ end -}}
{{- end -}}
{{- toYaml $restart | sha256sum -}}
{{- end -}}
