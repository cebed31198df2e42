{{/* The release's name prefix of every object. */}}
{{- define "herald.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The chart's ServiceAccount, or when it makes none the given one (else the namespace's default). */}}
{{- define "herald.serviceAccountName" -}}
{{- .Values.serviceAccount.name | default (ternary (include "herald.fullname" .) "default" .Values.serviceAccount.create) -}}
{{- end -}}

{{/* (list root name): the objects' name of one component. */}}
{{- define "herald.componentName" -}}
{{- printf "%s-%s" (include "herald.fullname" (index . 0)) (index . 1) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* (list root name): the labels that select one component's pods ("" for the release's). */}}
{{- define "herald.selectorLabels" -}}
app.kubernetes.io/name: {{ (index . 0).Chart.Name }}
app.kubernetes.io/instance: {{ (index . 0).Release.Name }}
{{- with index . 1 }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{- end -}}

{{- define "herald.labels" -}}
{{ include "herald.selectorLabels" . }}
app.kubernetes.io/version: {{ (index . 0).Chart.AppVersion | quote }}
app.kubernetes.io/part-of: herald
app.kubernetes.io/managed-by: {{ (index . 0).Release.Service }}
helm.sh/chart: {{ printf "%s-%s" (index . 0).Chart.Name (index . 0).Chart.Version }}
{{- end -}}

{{/*
(list base override) -> JSON: override merged into base. Maps merge key by key; anything else,
false and 0 included, replaces (sprig's mergeOverwrite would keep the default over a false or 0).
*/}}
{{- define "herald.merge" -}}
{{- $merged := deepCopy (index . 0) -}}
{{- range $key, $value := index . 1 -}}
{{- $current := get $merged $key -}}
{{- if and (kindIs "map" $value) (kindIs "map" $current) -}}
{{- $_ := set $merged $key (include "herald.merge" (list $current $value) | fromJson) -}}
{{- else -}}
{{- $_ := set $merged $key $value -}}
{{- end -}}
{{- end -}}
{{- toJson $merged -}}
{{- end -}}

{{/* (list root name) -> JSON: one component's settings, `default` merged with its entry. */}}
{{- define "herald.component" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- include "herald.merge" (list $root.Values.default (index $root.Values.components $name)) -}}
{{- end -}}

{{/* (dict "c" component): how a probe reaches the process. */}}
{{- define "herald.probeHandler" -}}
{{- if eq .c.probes.type "grpc" -}}
grpc:
  port: {{ .c.port }}
{{- else if eq .c.probes.type "http" -}}
httpGet:
  path: {{ (and .readiness .c.probes.readinessPath) | default .c.probes.path }}
  port: {{ .c.protocol }}
{{- else -}}
tcpSocket:
  port: {{ .c.protocol }}
{{- end -}}
{{- end -}}

{{/* (list ports protocol...): NetworkPolicy ports, each port with each protocol. */}}
{{- define "herald.policyPorts" -}}
{{- $rules := list -}}
{{- range $protocol := rest . -}}
{{- range index $ 0 -}}
{{- $rules = append $rules (dict "port" . "protocol" $protocol) -}}
{{- end -}}
{{- end -}}
{{- toYaml $rules -}}
{{- end -}}

{{/* (list "to"|"from" peers ports): one NetworkPolicy rule; no peers means any address. */}}
{{- define "herald.rule" -}}
- ports:
    {{- include "herald.policyPorts" (list (index . 2) "TCP") | nindent 4 }}
  {{- with index . 1 }}
  {{ index $ 0 }}:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}
