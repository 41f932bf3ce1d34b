{{/* Object names: the release name ("gpugate" gives the names manifests/ uses). */}}
{{- define "gpugate.fullname" -}}
{{- .Release.Name | trunc 55 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object (and of the pod template). */}}
{{- define "gpugate.labels" -}}
app.kubernetes.io/name: gpugate
app.kubernetes.io/part-of: gpugate
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The webhook server's pods. */}}
{{- define "gpugate.selectorLabels" -}}
app.kubernetes.io/name: gpugate
app.kubernetes.io/component: webhook-server
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "gpugate.tlsSecret" -}}
{{- include "gpugate.fullname" . }}-tls
{{- end -}}

{{- define "gpugate.policyConfigMap" -}}
{{- if .Values.policy.existingConfigMap -}}
{{- .Values.policy.existingConfigMap -}}
{{- else -}}
{{- include "gpugate.fullname" . }}-policy
{{- end -}}
{{- end -}}

{{/* The serving certificate's DNS names: the Service's. */}}
{{- define "gpugate.dnsNames" -}}
- {{ include "gpugate.fullname" . }}.{{ .Release.Namespace }}.svc
- {{ include "gpugate.fullname" . }}.{{ .Release.Namespace }}.svc.cluster.local
{{- end -}}

{{- define "gpugate.checkValues" -}}
{{- if not (has .Values.certificates.mode (list "secret" "certManager")) -}}
{{- fail (printf "certificates.mode must be secret or certManager, not %q" .Values.certificates.mode) -}}
{{- end -}}
{{- if and (eq .Values.certificates.mode "secret") (not .Values.certificates.caBundle) -}}
{{- fail "certificates.mode secret needs certificates.caBundle (base64 of the CA that signed the Secret's tls.crt; docs/operations.md, \"Install with Helm\")" -}}
{{- end -}}
{{- if and .Values.policy.existingConfigMap .Values.policy.inline -}}
{{- fail "policy: set existingConfigMap or inline, not both" -}}
{{- end -}}
{{- if not (has .Values.webhook.failurePolicy (list "Fail" "Ignore")) -}}
{{- fail (printf "webhook.failurePolicy must be Fail or Ignore, not %q" .Values.webhook.failurePolicy) -}}
{{- end -}}
{{- if not (has .Values.usageStore (list "shared" "memory")) -}}
{{- fail (printf "usageStore must be shared or memory, not %q" .Values.usageStore) -}}
{{- end -}}
{{- end -}}

{{/* Both webhooks' namespaceSelector. */}}
{{- define "gpugate.namespaceSelector" -}}
namespaceSelector:
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values: {{ concat (list "kube-system" .Release.Namespace) .Values.webhook.excludeNamespaces | uniq | toJson }}
    {{- with .Values.webhook.namespaceSelectorExpressions }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end -}}

{{/* A webhook's clientConfig: the Service, and the caBundle in secret mode. */}}
{{- define "gpugate.clientConfig" -}}
clientConfig:
  service:
    namespace: {{ .ctx.Release.Namespace }}
    name: {{ include "gpugate.fullname" .ctx }}
    path: {{ .path }}
    port: 443
  {{- if eq .ctx.Values.certificates.mode "secret" }}
  caBundle: {{ .ctx.Values.certificates.caBundle }}
  {{- end }}
{{- end -}}
