{{/*
Names are fixed, as deploy/ (kustomize) names them and `wasm-controller-manager rbac`
binds them: a cluster runs one host install (its ClusterRoles are cluster-wide), and
an install moved from deploy/ to the chart keeps its Deployment's selector.
*/}}
{{- define "wcm.name" -}}
wasm-controller-manager
{{- end }}

{{/* The labels Helm's tooling expects, on every object. */}}
{{- define "wcm.chartLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The host's objects: its name as selector label, and the chart's. */}}
{{- define "wcm.labels" -}}
app.kubernetes.io/name: {{ include "wcm.name" . }}
{{ include "wcm.chartLabels" . }}
{{- end }}

{{/* Values that cannot work together fail the install, saying why. */}}
{{- define "wcm.validate" -}}
{{- if and .Values.plugins.images (gt (len .Values.plugins.configMaps) 0) -}}
{{- fail "plugins.configMaps and plugins.images cannot both be set: the host watches one plugins folder (set plugins.configMaps=[] to use images)" -}}
{{- end -}}
{{- if not (has .Values.leaderElection.mode (list "single" "per-plugin")) -}}
{{- fail (printf "leaderElection.mode is %q: it is single or per-plugin" .Values.leaderElection.mode) -}}
{{- end -}}
{{- if and .Values.rbac.create (ne .Values.rbac.namespace .Release.Namespace) -}}
{{- fail (printf "the rbac values are for namespace %s, the release is in %s: write them with `wasm-controller-manager rbac --output chart-values --namespace %s PLUGINS...`" .Values.rbac.namespace .Release.Namespace .Release.Namespace) -}}
{{- end -}}
{{- end }}

{{/* The host's image: pinned to image.digest when given (a tag pushed again is then
     no surprise), else image.tag, else the chart's appVersion. */}}
{{- define "wcm.image" -}}
{{- if .Values.image.digest -}}
{{- if not (regexMatch "^sha256:[0-9a-f]{64}$" .Values.image.digest) -}}
{{- fail (printf "image.digest is %q: it is sha256: and 64 hex digits" .Values.image.digest) -}}
{{- end -}}
{{ printf "%s@%s" .Values.image.repository .Values.image.digest | quote }}
{{- else -}}
{{ printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) | quote }}
{{- end -}}
{{- end }}

{{/* The host's arguments, as deploy/host/deployment.yaml has them for the defaults. */}}
{{- define "wcm.args" -}}
- run
- --plugins-dir=/plugins
- --compile-cache-dir=/var/cache/wasm-controller-manager/compiled
{{- if .Values.plugins.wasmPlugins.enabled }}
# WasmPlugins of the host's own namespace, pulled beside the compiled code.
- --wasm-plugin-namespace=$(POD_NAMESPACE)
- --pulled-plugins-dir=/var/cache/wasm-controller-manager/pulled
{{- end }}
# Both within the cache volume's sizeLimit (past it the Pod is evicted), with room for
# an entry being written.
- --compile-cache-max-mib={{ .Values.compileCache.maxMiB }}
{{- if .Values.plugins.wasmPlugins.enabled }}
- --pulled-plugins-max-mib={{ .Values.plugins.wasmPlugins.cacheMiB }}
{{- end }}
# Each plugin compiles in a child process, bounded; under the container's memory limit.
- --compile-max-memory-mib={{ .Values.compiler.maxMemoryMiB }}
- --compile-timeout={{ .Values.compiler.timeout }}
{{- if .Values.plugins.registryCAConfigMap }}
- --registry-ca-file=/etc/wcm-registry/ca.crt
{{- end }}
- --leader-elect
- --leader-elect-resource-namespace=$(POD_NAMESPACE)
{{- with .Values.leaderElection }}
{{- if eq .mode "per-plugin" }}
- --leader-elect-mode=per-plugin
{{- end }}
{{- with .leaseDuration }}
- --leader-elect-lease-duration={{ . }}
{{- end }}
{{- with .renewDeadline }}
- --leader-elect-renew-deadline={{ . }}
{{- end }}
{{- with .retryPeriod }}
- --leader-elect-retry-period={{ . }}
{{- end }}
{{- end }}
{{- range .Values.recording.plugins }}
- --record-plugin={{ . }}=/var/lib/wasm-controller-manager/transcripts/{{ . }}
{{- end }}
{{- if .Values.recording.plugins }}
- --record-max-mib={{ .Values.recording.maxMiB }}
{{- if .Values.recording.secrets }}
- --record-secrets
{{- end }}
{{- end }}
{{- if ne .Values.rbac.serviceAccountPrefix "wcm-plugin-" }}
- --plugin-service-account-prefix={{ .Values.rbac.serviceAccountPrefix }}
{{- end }}
- --shutdown-grace={{ .Values.shutdownGrace }}
- --log-format={{ .Values.logFormat }}
{{- with .Values.extraArgs }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Plugin images (docs/deploying.md#plugin-images): each image's init container installs
its plugins into a volume only it and the gathering mount; the host's own image then
gathers them into the plugins folder, refusing a file name two images both ship.
*/}}
{{- define "wcm.pluginImages" -}}
{{- $restricted := dict "allowPrivilegeEscalation" false "readOnlyRootFilesystem" true "capabilities" (dict "drop" (list "ALL")) -}}
initContainers:
{{- range $i, $ref := .Values.plugins.images }}
  - name: plugins-{{ $i }}
    image: {{ $ref | quote }}
    imagePullPolicy: IfNotPresent
    args: [-from, /wcm-plugins, -to, /plugins]
    volumeMounts: [{name: plugin-image-{{ $i }}, mountPath: /plugins}]
    resources: {requests: {cpu: 10m, memory: 16Mi}, limits: {memory: 64Mi}}
    securityContext: {{ toJson $restricted }}
{{- end }}
  - name: gather-plugins
    image: {{ include "wcm.image" . }}
    imagePullPolicy: {{ .Values.image.pullPolicy }}
    args:
      - gather-plugins
      - --to=/plugins
      {{- range $i, $_ := .Values.plugins.images }}
      - --from=/images/{{ $i }}
      {{- end }}
    volumeMounts:
      - {name: plugins, mountPath: /plugins}
      {{- range $i, $_ := .Values.plugins.images }}
      - {name: plugin-image-{{ $i }}, mountPath: /images/{{ $i }}, readOnly: true}
      {{- end }}
    resources: {requests: {cpu: 10m, memory: 16Mi}, limits: {memory: 64Mi}}
    securityContext: {{ toJson $restricted }}
{{- end }}
