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
