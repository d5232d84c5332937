{{/*
The router pod's terminationGracePeriodSeconds. On SIGTERM the router keeps serving for drain-seconds (/ready at 503
so that endpoints drop it), then gives in-flight requests and streams up to shutdown-timeout seconds, then stops its
watchers and connection pools. The grace period must cover all of that, or the kubelet's SIGKILL cuts streams the
router would have finished. Both settings are read as the router reads them, later winning: its defaults (5 and 60),
router.config (any key spelling), literal LLM_ROUTER_* values in router.env, router.extraArgs. 10 s more cover the
last step and the process exit. An explicit router.terminationGracePeriodSeconds below that is refused.
*/}}
{{- define "llm-router.routerTerminationGracePeriod" -}}
{{- $s := dict "drain-seconds" 5 "shutdown-timeout" 60 -}}
{{- range $key, $value := .Values.router.config -}}
{{- if hasKey $s (kebabcase $key) }}{{ $_ := set $s (kebabcase $key) $value }}{{ end -}}
{{- end -}}
{{- range .Values.router.env -}}
{{- $flag := .name | trimPrefix "LLM_ROUTER_" | lower | replace "_" "-" -}}
{{- if and (hasPrefix "LLM_ROUTER_" .name) (hasKey $s $flag) (hasKey . "value") }}{{ $_ := set $s $flag .value }}{{ end -}}
{{- end -}}
{{- $args := .Values.router.extraArgs -}}
{{- range $i, $arg := $args -}}
{{- range $flag := keys $s -}}
{{- if and (eq (toString $arg) (printf "--%s" $flag)) (lt (add1 $i) (len $args)) }}{{ $_ := set $s $flag (index $args (add1 $i)) }}{{ end -}}
{{- if hasPrefix (printf "--%s=" $flag) (toString $arg) }}{{ $_ := set $s $flag (trimPrefix (printf "--%s=" $flag) (toString $arg)) }}{{ end -}}
{{- end -}}
{{- end -}}
{{- $needed := add (ceil (index $s "drain-seconds")) (ceil (index $s "shutdown-timeout")) 10 -}}
{{- $given := .Values.router.terminationGracePeriodSeconds -}}
{{- if and (not (kindIs "invalid" $given)) (ne (toString $given) "") -}}
{{- if lt (int64 $given) $needed -}}
{{- fail (printf "router.terminationGracePeriodSeconds (%v) must cover drain-seconds (%v) + shutdown-timeout (%v) + 10 s: at least %d" $given (index $s "drain-seconds") (index $s "shutdown-timeout") $needed) -}}
{{- end -}}
{{- int64 $given -}}
{{- else -}}
{{- $needed -}}
{{- end -}}
{{- end -}}
