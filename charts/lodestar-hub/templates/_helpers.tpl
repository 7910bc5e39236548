{{- define "lodestar.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "lodestar.serviceAccountName" -}}
{{- default (include "lodestar.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "lodestar.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "lodestar.labels" -}}
{{ include "lodestar.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "lodestar.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- /* The debug API is served by the hub-wide release only: its APIService is the hub's. */ -}}
{{- define "lodestar.debug" -}}
{{- if and .Values.debug.enabled .Values.hubWide }}true{{ end -}}
{{- end -}}
