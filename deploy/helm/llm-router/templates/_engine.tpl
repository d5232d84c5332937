{{/*
Engine workloads. Each entry of .Values.engines becomes one Deployment (role standalone), or a prefill and a
decode Deployment (role pd). Probes: liveness on the engine's /health; startup and readiness on the
`llm-router probe` sidecar's /ready, which is 200 only once the engine lists the model (docs/operations.md).
*/}}

{{/* "standalone", or "prefill,decode" for a P/D pair */}}
{{- define "llm-router.engineRoles" -}}
{{- if eq (default "standalone" .role) "pd" -}}prefill,decode{{- else if eq (default "standalone" .role) "standalone" -}}standalone{{- else -}}
{{- fail (printf "engines[%s].role must be standalone or pd, not %s" .name .role) -}}
{{- end -}}
{{- end -}}

{{/* dict root engine role -> the workload name */}}
{{- define "llm-router.engineWorkloadName" -}}
{{- $name := printf "%s-%s" (include "llm-router.fullname" .root) .engine.name -}}
{{- if ne .role "standalone" -}}{{- $name = printf "%s-%s" $name .role -}}{{- end -}}
{{- $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* dict root engine -> the model name clients ask for */}}
{{- define "llm-router.servedModelName" -}}
{{- $e := .engine -}}
{{- $kind := default .root.Values.engineDefaults.engineKind $e.engineKind -}}
{{- if and (eq $kind "tgi") $e.servedModelName (ne $e.servedModelName $e.model) (ne $e.servedModelName (base $e.model)) -}}
{{- fail (printf "engines[%s]: TGI serves its model under --model-id; servedModelName must be %s or %s" $e.name $e.model (base $e.model)) -}}
{{- end -}}
{{- default $e.model $e.servedModelName -}}
{{- end -}}

{{/*
dict root engine -> the llm-router/lora-adapters value of an engine with adapters ("NAME=PATH,...", by name), else "".
Refused: adapters on TGI (llm-router loads them only through vLLM's and SGLang's runtime endpoints), a name
the router would not accept, that is a model's name (the model would win) or another engine's adapter, a path the
annotation cannot carry.
*/}}
{{- define "llm-router.loraAdapters" -}}
{{- $e := .engine -}}
{{- $adapters := (default (dict) $e.lora).adapters -}}
{{- if (default (dict) .root.Values.engineDefaults.lora).adapters -}}
{{- fail "engineDefaults.lora.adapters: adapters belong to one base model; declare them under engines[].lora.adapters" -}}
{{- end -}}
{{- if $adapters -}}
{{- if not (kindIs "map" $adapters) -}}{{- fail (printf "engines[%s].lora.adapters must map adapter names to paths" $e.name) -}}{{- end -}}
{{- $kind := default .root.Values.engineDefaults.engineKind $e.engineKind -}}
{{- if not (has $kind (list "vllm" "sglang")) -}}
{{- fail (printf "engines[%s]: LoRA adapters are only rendered for vllm and sglang (llm-router loads adapters through their runtime endpoints), not %s" $e.name $kind) -}}
{{- end -}}
{{- $models := list -}}
{{- $elsewhere := dict -}}
{{- range $other := .root.Values.engines -}}
{{- $models = append $models (include "llm-router.servedModelName" (dict "root" $.root "engine" $other)) -}}
{{- $theirs := (default (dict) $other.lora).adapters -}}
{{- if and (ne $other.name $e.name) (kindIs "map" $theirs) -}}
{{- range $n, $path := $theirs -}}{{- $_ := set $elsewhere $n $other.name -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- $pairs := list -}}
{{- range $name, $path := $adapters -}}
{{- if not (regexMatch "^[^\\s,=@]{1,512}$" $name) -}}
{{- fail (printf "engines[%s].lora.adapters: %q is not an adapter name (no blanks, commas, = or @)" $e.name $name) -}}
{{- end -}}
{{- if has $name $models -}}
{{- fail (printf "engines[%s].lora.adapters: %q is the name of a model; the router would route it to that model, never to the adapter" $e.name $name) -}}
{{- end -}}
{{- if hasKey $elsewhere $name -}}
{{- fail (printf "engines[%s].lora.adapters: %q is an adapter of engines[%s] too; an adapter has one base model" $e.name $name (get $elsewhere $name)) -}}
{{- end -}}
{{- $p := trim (toString (default "" $path)) -}}
{{- if or (not $p) (contains "," $p) -}}
{{- fail (printf "engines[%s].lora.adapters.%s needs a path without commas (what vLLM loads: a directory, a Hugging Face id)" $e.name $name) -}}
{{- end -}}
{{- $pairs = append $pairs (printf "%s=%s" $name $p) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}
{{- end -}}

{{/* dict root engine role -> a value: the role's own setting, else the engine's, else engineDefaults' (zero counts) */}}
{{- define "llm-router.engineSetting" -}}
{{- $v := index .root.Values.engineDefaults .key -}}
{{- if hasKey .engine .key -}}{{- $v = index .engine .key -}}{{- end -}}
{{- $unit := index .engine .role -}}
{{- if and $unit (hasKey $unit .key) -}}{{- $v = index $unit .key -}}{{- end -}}
{{- $v -}}
{{- end -}}

{{- define "llm-router.engine" -}}
{{- $root := .root -}}
{{- $e := .engine -}}
{{- $role := .role -}}
{{- $d := $root.Values.engineDefaults -}}
{{- $kind := default $d.engineKind $e.engineKind -}}
{{- if not (has $kind (list "vllm" "sglang" "tgi")) -}}{{- fail (printf "engines[%s].engineKind must be vllm, sglang or tgi" $e.name) -}}{{- end -}}
{{- if and (ne $role "standalone") (ne $kind "vllm") -}}{{- fail (printf "engines[%s]: role pd is only rendered for vllm" $e.name) -}}{{- end -}}
{{- $proto := $d.pd.protocol -}}
{{- if not (has $proto (list "llm-d-sidecar" "vllm-nixl")) -}}{{- fail (printf "engineDefaults.pd.protocol must be llm-d-sidecar or vllm-nixl, not %s" $proto) -}}{{- end -}}
{{- /* llm-d-sidecar: a decode engine sits behind the routing sidecar, which the router sends its traffic to */ -}}
{{- $behindSidecar := and (eq $role "decode") (eq $proto "llm-d-sidecar") -}}
{{- $name := include "llm-router.engineWorkloadName" . -}}
{{- $served := include "llm-router.servedModelName" . -}}
{{- $replicas := int (include "llm-router.engineSetting" (dict "root" $root "engine" $e "role" $role "key" "replicas")) -}}
{{- $gpus := int (include "llm-router.engineSetting" (dict "root" $root "engine" $e "role" $role "key" "gpus")) -}}
{{- $load := int (include "llm-router.engineSetting" (dict "root" $root "engine" $e "role" $role "key" "expectedLoadSeconds")) -}}
{{- $period := int $d.startupPeriodSeconds -}}
{{- /* failureThreshold x periodSeconds >= 2 x the expected load, rounded up */ -}}
{{- $failures := div (add (mul 2 $load) (sub $period 1)) $period -}}
{{- $enginePort := int $d.port -}}
{{- if $behindSidecar -}}{{- $enginePort = int $d.pd.decodeEnginePort -}}{{- end -}}
{{- $routerPort := $enginePort -}}
{{- if $behindSidecar -}}{{- $routerPort = int $d.pd.routingSidecar.port -}}{{- end -}}
{{- $probePort := int $root.Values.probeSidecar.port -}}
{{- $image := default (index $d.images $kind) $e.image -}}
{{- $resources := default $d.resources $e.resources -}}
{{- $weights := default $d.weights $e.weights -}}
{{- $cache := default $d.compileCache $e.compileCache -}}
{{- $adapters := include "llm-router.loraAdapters" . -}}
{{- $lora := default (dict) $e.lora -}}
{{- $loraDefaults := default (dict) $d.lora -}}
{{- $maxLoras := int (ternary $lora.maxLoras $loraDefaults.maxLoras (hasKey $lora "maxLoras")) -}}
{{- $maxLoraRank := int (ternary $lora.maxLoraRank $loraDefaults.maxLoraRank (hasKey $lora "maxLoraRank")) -}}
{{- if and $adapters (lt $maxLoras 1) -}}{{- fail (printf "engines[%s].lora.maxLoras must be 1 or more (adapters an engine runs at once)" $e.name) -}}{{- end -}}
{{- $userArgs := concat $d.extraArgs (default (list) $e.args) -}}
{{- /* otel: a vllm engine traces to the router's collector and continues the router's trace */ -}}
{{- $otel := $root.Values.otel -}}
{{- $otelEngine := and (eq $kind "vllm") $otel.endpoint $otel.engines -}}
{{- $blockSize := int (include "llm-router.engineSetting" (dict "root" $root "engine" $e "role" $role "key" "blockSize")) -}}
{{- /* kvaware: the engine publishes its KV-cache events; the router subscribes to them (one port per data-parallel rank) */ -}}
{{- $kvaware := eq (include "llm-router.routingLogic" $root) "kvaware" -}}
{{- $dp := int (include "llm-router.dataParallelSize" $userArgs) -}}
{{- $kv := dict -}}
{{- $kvConfig := "" -}}
{{- if $kvaware -}}
{{- if eq $kind "tgi" -}}
{{- fail (printf "engines[%s]: routing.logic kvaware routes on the engines' KV-cache events, which TGI does not publish; use vllm or sglang, or another routing.logic" $e.name) -}}
{{- end -}}
{{- range $a := $userArgs -}}
{{- $a = toString $a -}}
{{- range $f := list "--kv-events-config" "--no-enable-prefix-caching" "--disable-radix-cache" -}}
{{- if or (eq $a $f) (hasPrefix (printf "%s=" $f) $a) -}}
{{- fail (printf "engines[%s]: %s in the engine's args under routing.logic kvaware: the chart sets the KV-event config (routing.kvEvents) and needs prefix caching on" $e.name $f) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $kv = include "llm-router.kvEventPorts" (dict "root" $root "dp" $dp) | fromYaml -}}
{{- range $taken := list $enginePort $probePort $routerPort -}}
{{- if or (and (le (int $kv.port) $taken) (lt $taken (add (int $kv.port) $dp))) (and (le (int $kv.replay) $taken) (lt $taken (add (int $kv.replay) $dp))) -}}
{{- fail (printf "engines[%s]: port %d is both a KV-event port (routing.kvEvents) and the engine's, the probe sidecar's or the routing sidecar's" $e.name $taken) -}}
{{- end -}}
{{- end -}}
{{- $kvConfig = printf "{\"enable_kv_cache_events\":true,\"publisher\":\"zmq\",\"endpoint\":\"tcp://*:%d\",\"replay_endpoint\":\"tcp://*:%d\",\"topic\":\"\"}" (int $kv.port) (int $kv.replay) -}}
{{- end -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "llm-router.labels" $root | nindent 4 }}
    app.kubernetes.io/component: engine
    llm-router/pool: {{ include "llm-router.fullname" $root }}
    llm-router/engine: {{ $e.name }}
    llm-router/role: {{ $role }}
  annotations:
    # the router reads the model names from here (any replica count, zero included); the linter reads the load time
    llm-router/models: {{ $served | quote }}
    llm-router/expected-load-seconds: {{ $load | quote }}
    {{- if ne $role "standalone" }}
    # how the router serves this model's prefill/decode pair
    llm-router/pd-protocol: {{ $proto }}
    {{- end }}
    {{- if $adapters }}
    # LoRA adapters the router loads on this model's engines on demand (on both sides of a P/D pair)
    llm-router/lora-adapters: {{ $adapters | quote }}
    {{- end }}
spec:
  replicas: {{ $replicas }}
  selector:
    matchLabels:
      app.kubernetes.io/instance: {{ $root.Release.Name }}
      llm-router/engine: {{ $e.name }}
      llm-router/role: {{ $role }}
  template:
    metadata:
      labels:
        {{- include "llm-router.labels" $root | nindent 8 }}
        app.kubernetes.io/component: engine
        llm-router/pool: {{ include "llm-router.fullname" $root }}
        llm-router/engine: {{ $e.name }}
        llm-router/role: {{ $role }}
        {{- if ne $role "standalone" }}
        # the router (and llm-d's scheduler) read an engine's P/D role from this label
        llm-d.ai/role: {{ $role }}
        {{- end }}
      annotations:
        # where the router sends requests: the engine, or a decode pod's routing sidecar
        llm-router/port: {{ $routerPort | quote }}
        {{- if $behindSidecar }}
        # and where it probes: the engine itself, not the sidecar in front of it
        llm-router/probe-port: {{ $enginePort | quote }}
        {{- end }}
        {{- if $kvaware }}
        # where the router subscribes to the engine's KV-cache events (routing.logic kvaware) and asks for a replay
        llm-router/kv-events-port: {{ $kv.port | quote }}
        llm-router/kv-events-replay-port: {{ $kv.replay | quote }}
        {{- if gt $dp 1 }}
        # one publisher per data-parallel rank, on consecutive ports
        llm-router/kv-events-dp-size: {{ $dp | quote }}
        {{- end }}
        {{- end }}
    spec:
      terminationGracePeriodSeconds: {{ int $d.terminationGracePeriodSeconds }}
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with (default $d.nodeSelector $e.nodeSelector) }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with (default $d.tolerations $e.tolerations) }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- if and $weights.download $weights.download.enabled }}
      initContainers:
        # weights are fetched before the engine starts, so download time does not count against the startup probe
        - name: fetch-weights
          image: {{ default $image $weights.download.image }}
          command:
            - python3
            - -c
            - {{ printf "from huggingface_hub import snapshot_download; snapshot_download(%s)" (squote $e.model) | quote }}
          env:
            - name: HF_HOME
              value: {{ printf "%s/hf" $weights.mountPath | quote }}
            {{- with (default $d.env $e.env) }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          volumeMounts:
            - name: weights
              mountPath: {{ $weights.mountPath }}
      {{- end }}
      containers:
        - name: engine
          image: {{ $image }}
          {{- if eq $kind "vllm" }}
          command: ["vllm", "serve"]
          args:
            - {{ $e.model | quote }}
            - --served-model-name
            - {{ $served | quote }}
            - --port
            - {{ $enginePort | quote }}
            {{- if gt $gpus 1 }}
            - --tensor-parallel-size
            - {{ $gpus | quote }}
            {{- end }}
            {{- if ne $role "standalone" }}
            - --kv-transfer-config
            - {{ $d.pd.kvTransferConfig | quote }}
            {{- end }}
            {{- if gt $blockSize 0 }}
            - --block-size
            - {{ $blockSize | quote }}
            {{- end }}
            {{- if $kvaware }}
            # routing.logic kvaware: the prefix cache on, and the KV-cache events the router routes on
            - --enable-prefix-caching
            - --kv-events-config
            - {{ $kvConfig | quote }}
            {{- end }}
            {{- if $otelEngine }}
            # otel.engines: the engine's spans go to the router's collector, children of the router's engine call
            - --otlp-traces-endpoint
            - {{ $otel.endpoint | quote }}
            {{- end }}
            {{- if $adapters }}
            - --enable-lora
            - --max-loras
            - {{ $maxLoras | quote }}
            {{- if gt $maxLoraRank 0 }}
            - --max-lora-rank
            - {{ $maxLoraRank | quote }}
            {{- end }}
            {{- end }}
          {{- else if eq $kind "sglang" }}
          command: ["python3", "-m", "sglang.launch_server"]
          args:
            - --model-path
            - {{ $e.model | quote }}
            - --served-model-name
            - {{ $served | quote }}
            - --host
            - 0.0.0.0
            - --port
            - {{ $enginePort | quote }}
            {{- if gt $gpus 1 }}
            - --tp
            - {{ $gpus | quote }}
            {{- end }}
            {{- if gt $blockSize 0 }}
            - --page-size
            - {{ $blockSize | quote }}
            {{- end }}
            {{- if $kvaware }}
            # routing.logic kvaware: the KV-cache events the router routes on (SGLang's radix cache is on by default)
            - --kv-events-config
            - {{ $kvConfig | quote }}
            {{- end }}
            {{- if $adapters }}
            # runtime loads need LoRA on, and (no adapters given at start) the rank and target modules to size for
            - --enable-lora
            - --max-loras-per-batch
            - {{ $maxLoras | quote }}
            - --max-lora-rank
            - {{ ternary $maxLoraRank 16 (gt $maxLoraRank 0) | quote }}
            - --lora-target-modules
            - all
            {{- end }}
          {{- else }}
          command: ["text-generation-launcher"]
          args:
            - --model-id
            - {{ $e.model | quote }}
            - --port
            - {{ $enginePort | quote }}
            {{- if gt $gpus 1 }}
            - --num-shard
            - {{ $gpus | quote }}
            {{- end }}
          {{- end }}
            {{- range $userArgs }}
            - {{ . | quote }}
            {{- end }}
          {{- if or (default $d.env $e.env) $weights.mountPath (and $cache.enabled (eq $kind "vllm")) (and $adapters (eq $kind "vllm")) $otelEngine }}
          env:
            {{- if $weights.mountPath }}
            - name: HF_HOME
              value: {{ printf "%s/hf" $weights.mountPath | quote }}
            {{- end }}
            {{- if and $cache.enabled (eq $kind "vllm") }}
            - name: VLLM_CACHE_ROOT
              value: /cache/vllm
            {{- end }}
            {{- if and $adapters (eq $kind "vllm") }}
            # vLLM serves /v1/load_lora_adapter and /v1/unload_lora_adapter, the router's load and unload calls, only so
            - name: VLLM_ALLOW_RUNTIME_LORA_UPDATING
              value: "true"
            {{- end }}
            {{- if $otelEngine }}
            # vLLM's OpenTelemetry exporter (otel.*): its service name, and how it reaches the collector
            - name: OTEL_SERVICE_NAME
              value: {{ $name | quote }}
            {{- if hasSuffix "/v1/traces" $otel.endpoint }}
            - name: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL
              value: http/protobuf
            {{- else if not $otel.secure }}
            - name: OTEL_EXPORTER_OTLP_TRACES_INSECURE
              value: "true"
            {{- end }}
            {{- end }}
            {{- with (default $d.env $e.env) }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          {{- end }}
          ports:
            - name: engine
              containerPort: {{ $enginePort }}
              protocol: TCP
            {{- if $kvaware }}
            {{- range $r := until $dp }}
            - name: {{ ternary "kv-events" (printf "kv-events-%d" $r) (eq $dp 1) }}
              containerPort: {{ add (int $kv.port) $r }}
              protocol: TCP
            - name: {{ ternary "kv-replay" (printf "kv-replay-%d" $r) (eq $dp 1) }}
              containerPort: {{ add (int $kv.replay) $r }}
              protocol: TCP
            {{- end }}
            {{- end }}
          # liveness: the process answers; it starts only after the startup probe passed, so loading is never killed
          livenessProbe:
            httpGet:
              path: /health
              port: {{ $enginePort }}
            periodSeconds: 10
            timeoutSeconds: 5
            failureThreshold: 3
          # startup and readiness: the model is loaded and listed (the llm-router probe sidecar's /ready)
          startupProbe:
            httpGet:
              path: /ready
              port: {{ $probePort }}
            periodSeconds: {{ $period }}
            timeoutSeconds: 5
            failureThreshold: {{ $failures }}
          readinessProbe:
            httpGet:
              path: /ready
              port: {{ $probePort }}
            periodSeconds: 5
            timeoutSeconds: 5
            failureThreshold: 2
          {{- if or $resources (gt $gpus 0) }}
          resources:
            {{- with $resources.requests }}
            requests:
              {{- toYaml . | nindent 14 }}
            {{- end }}
            {{- if or $resources.limits (gt $gpus 0) }}
            limits:
              {{- with $resources.limits }}
              {{- toYaml . | nindent 14 }}
              {{- end }}
              {{- if gt $gpus 0 }}
              nvidia.com/gpu: {{ $gpus }}
              {{- end }}
            {{- end }}
          {{- end }}
          volumeMounts:
            - name: dshm
              mountPath: /dev/shm
            {{- if $cache.enabled }}
            - name: compile-cache
              mountPath: /cache
            {{- end }}
            {{- if $weights.mountPath }}
            - name: weights
              mountPath: {{ $weights.mountPath }}
            {{- end }}
        - name: readiness
          image: {{ include "llm-router.image" $root }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          args:
            - probe
            - --engine-url
            - {{ printf "http://127.0.0.1:%d" $enginePort | quote }}
            - --model
            - {{ $served | quote }}
            - --engine-kind
            - {{ $kind }}
            - --port
            - {{ $probePort | quote }}
            {{- if $root.Values.probeSidecar.warmup }}
            - --warmup
            {{- end }}
          ports:
            - name: ready
              containerPort: {{ $probePort }}
              protocol: TCP
          resources:
            {{- toYaml $root.Values.probeSidecar.resources | nindent 12 }}
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            runAsNonRoot: true
            runAsUser: 65532
            capabilities:
              drop: ["ALL"]
        {{- if $behindSidecar }}
        # P/D: clients reach the decode engine through this proxy, which runs the prefill call the router names first
        - name: routing-sidecar
          image: {{ $d.pd.routingSidecar.image }}
          args:
            - {{ printf "-port=%d" $routerPort | quote }}
            - {{ printf "-vllm-port=%d" $enginePort | quote }}
            {{- range $d.pd.routingSidecar.args }}
            - {{ . | quote }}
            {{- end }}
          ports:
            - name: proxy
              containerPort: {{ $routerPort }}
              protocol: TCP
        {{- end }}
      volumes:
        - name: dshm
          emptyDir:
            medium: Memory
            sizeLimit: {{ $d.shmSize }}
        {{- if $cache.enabled }}
        - name: compile-cache
          {{- if $cache.pvc }}
          persistentVolumeClaim:
            claimName: {{ $cache.pvc }}
          {{- else }}
          emptyDir:
            sizeLimit: {{ $cache.sizeLimit }}
          {{- end }}
        {{- end }}
        {{- if $weights.mountPath }}
        - name: weights
          {{- if $weights.pvc }}
          persistentVolumeClaim:
            claimName: {{ $weights.pvc }}
          {{- else }}
          emptyDir:
            sizeLimit: {{ $weights.sizeLimit }}
          {{- end }}
        {{- end }}
{{- end -}}

{{/*
dict root dp -> YAML {port, replay}: the first KV-event publisher port and the first replay port of an engine with
dp data-parallel ranks (rank r publishes on port + r and replays on replay + r, as vLLM and SGLang offset them).
routing.kvEvents.replayPort empty: port + dp, the next free port.
*/}}
{{- define "llm-router.kvEventPorts" -}}
{{- $kv := .root.Values.routing.kvEvents -}}
{{- $dp := int .dp -}}
{{- $port := int $kv.port -}}
{{- $replay := add $port $dp -}}
{{- if not (or (kindIs "invalid" $kv.replayPort) (eq (toString $kv.replayPort) "")) -}}{{- $replay = int $kv.replayPort -}}{{- end -}}
{{- if or (lt $port 1) (gt (add $port $dp -1) 65535) (lt $replay 1) (gt (add $replay $dp -1) 65535) -}}
{{- fail (printf "routing.kvEvents.port (%v) and replayPort (%v) must be port numbers" $kv.port $kv.replayPort) -}}
{{- end -}}
{{- if and (lt $port (add $replay $dp)) (lt $replay (add $port $dp)) -}}
{{- fail (printf "routing.kvEvents: the publisher ports %d-%d and the replay ports %d-%d overlap (one per data-parallel rank); set replayPort to %d or more, or leave it empty" $port (add $port $dp -1) $replay (add $replay $dp -1) (add $port $dp)) -}}
{{- end -}}
port: {{ $port }}
replay: {{ $replay }}
{{- end -}}

{{/* list of engine args -> the data-parallel size they set (vLLM --data-parallel-size/-dp, SGLang --dp-size/--dp), else 1 */}}
{{- define "llm-router.dataParallelSize" -}}
{{- $args := . -}}
{{- $dp := 1 -}}
{{- $flags := list "--data-parallel-size" "-dp" "--dp-size" "--dp" -}}
{{- range $i, $a := $args -}}
{{- $a = toString $a -}}
{{- if and (has $a $flags) (lt (add1 $i) (len $args)) }}{{ $dp = int (index $args (add1 $i)) }}{{ end -}}
{{- range $f := $flags -}}
{{- if hasPrefix (printf "%s=" $f) $a }}{{ $dp = int (trimPrefix (printf "%s=" $f) $a) }}{{ end -}}
{{- end -}}
{{- end -}}
{{- max $dp 1 -}}
{{- end -}}

{{/* dict root engine role -> YAML {engine, router, dp, kvPort, kvReplay}: where the engine listens, where the router sends its traffic, its KV-event ports */}}
{{- define "llm-router.enginePorts" -}}
{{- $d := .root.Values.engineDefaults -}}
{{- $behindSidecar := and (eq .role "decode") (eq $d.pd.protocol "llm-d-sidecar") -}}
{{- $engine := ternary (int $d.pd.decodeEnginePort) (int $d.port) $behindSidecar -}}
{{- $dp := int (include "llm-router.dataParallelSize" (concat $d.extraArgs (default (list) .engine.args))) -}}
{{- $kv := include "llm-router.kvEventPorts" (dict "root" .root "dp" $dp) | fromYaml -}}
engine: {{ $engine }}
router: {{ ternary (int $d.pd.routingSidecar.port) $engine $behindSidecar }}
dp: {{ $dp }}
kvPort: {{ $kv.port }}
kvReplay: {{ $kv.replay }}
{{- end -}}
