{{/* The prefix of every object's name. */}}
{{- define "canopy.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else if contains "canopy" .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-canopy" .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object; "component" is root, region or edge. */}}
{{- define "canopy.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
{{ include "canopy.selectorLabels" . }}
{{- end -}}

{{/* The labels that select a component's pods. */}}
{{- define "canopy.selectorLabels" -}}
app.kubernetes.io/name: canopy
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- if .relay }}
canopy.dev/relay: {{ .relay }}
{{- end }}
{{- end -}}

{{- define "canopy.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* Names of the root's objects. */}}
{{- define "canopy.root" -}}{{ include "canopy.fullname" . }}-root{{- end -}}
{{- define "canopy.rootPeers" -}}{{ include "canopy.fullname" . }}-root-peers{{- end -}}
{{- define "canopy.rootLink" -}}{{ include "canopy.fullname" . }}-root-link{{- end -}}
{{- define "canopy.edgeServiceAccount" -}}
{{- .Values.edge.serviceAccount.name | default (printf "%s-edge" (include "canopy.fullname" .)) -}}
{{- end -}}

{{/* The root's link Service, host:port: the default parent of a region. */}}
{{- define "canopy.rootLinkAddr" -}}
{{ include "canopy.rootLink" . }}.{{ .Release.Namespace }}.svc:{{ .Values.root.link.port }}
{{- end -}}

{{/* Every relay runs as a non-root user on a read-only root file system. */}}
{{- define "canopy.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "canopy.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end -}}

{{/* The flags every relay gets. */}}
{{- define "canopy.commonArgs" -}}
- --log-level={{ .Values.logLevel }}
- --log-format={{ .Values.logFormat }}
- --data-dir=/var/lib/canopy
{{- end -}}

{{/* Probes of a region or an edge on its status endpoint (HTTP). */}}
{{- define "canopy.childProbes" -}}
livenessProbe:
  httpGet: {path: /healthz, port: status}
  periodSeconds: 10
  failureThreshold: 6
readinessProbe:
  httpGet: {path: /readyz, port: status}
  periodSeconds: 5
{{- end -}}

{{/* Scheduling and pod settings of a component's values (.v). */}}
{{- define "canopy.scheduling" -}}
{{- with .v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .v.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .ctx.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
