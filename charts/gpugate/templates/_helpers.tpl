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

{{/* What values.schema.json cannot say (one value against another). */}}
{{- define "gpugate.checkValues" -}}
{{- if and (eq .Values.certificates.mode "secret") (not .Values.certificates.caBundle) -}}
{{- fail "certificates.mode secret needs certificates.caBundle (base64 of the CA that signed the Secret's tls.crt; docs/operations.md, \"Install with Helm\")" -}}
{{- end -}}
{{- if and .Values.policy.existingConfigMap .Values.policy.inline -}}
{{- fail "policy: set existingConfigMap or inline, not both" -}}
{{- end -}}
{{- with .Values.prometheus -}}
{{- if and .bearerTokenFile .bearerTokenSecret.name -}}
{{- fail "prometheus: set bearerTokenFile or bearerTokenSecret.name, not both" -}}
{{- end -}}
{{- if and .ca.configMap .ca.secret -}}
{{- fail "prometheus.ca: set configMap or secret, not both" -}}
{{- end -}}
{{- if and (not .url) (or .bearerTokenFile .bearerTokenSecret.name .ca.configMap .ca.secret) -}}
{{- fail "prometheus: a token or a CA needs prometheus.url" -}}
{{- end -}}
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

{{/*
The CEL that tells whether a pod (its metadata m, its spec r) is gpugate's
business: what any of gpugate's rules (policy/decide.c) could deny, map or
charge. Written wide enough not to depend on the policy (`gpugate check`
refuses a flavor these would miss: a resource without a domain, a taint
under node.kubernetes.io/, a nodeSelector of kubernetes.io/os or /arch only;
and warns about a classLabel or gpusLabel outside gpugate.io/, to be listed
in webhook.extraLabelKeys). docs/operations.md, "What the webhooks are sent".
  m, r:     CEL paths of the metadata and the pod spec;
  mguard:   a CEL guard for m (a template's metadata may be absent);
  nodeName: when spec.nodeName counts (a pod names its node at creation;
            the scheduler's binding sets it later on every pod);
  extra:    webhook.extraLabelKeys.
*/}}
{{- define "gpugate.gpuPod" -}}
(({{ .mguard }}has({{ .m }}.labels) && {{ .m }}.labels.exists(k,
k.startsWith('gpugate.io/'){{ with .extra }} || k in {{ toJson . | replace "\"" "'" | replace "," ", " }}{{ end }})) ||
({{ .mguard }}has({{ .m }}.annotations) && {{ .m }}.annotations.exists(k,
k.startsWith('cdi.k8s.io/'))) ||
({{ .nodeName }} && has({{ .r }}.nodeName) && {{ .r }}.nodeName != '') ||
has({{ .r }}.resourceClaims) ||
(has({{ .r }}.nodeSelector) && {{ .r }}.nodeSelector.exists(k,
!(k in ['kubernetes.io/os', 'kubernetes.io/arch']))) ||
(has({{ .r }}.tolerations) && {{ .r }}.tolerations.exists(t, !has(t.key) ||
!t.key.startsWith('node.kubernetes.io/'))) ||
(has({{ .r }}.volumes) && {{ .r }}.volumes.exists(v, has(v.hostPath))) ||
((has({{ .r }}.initContainers) ? {{ .r }}.initContainers : []) +
{{ .r }}.containers).exists(c, (has(c.resources) &&
((has(c.resources.limits) && c.resources.limits.exists(n, n.contains('/'))) ||
(has(c.resources.requests) && c.resources.requests.exists(n, n.contains('/'))) ||
has(c.resources.claims))) ||
(has(c.env) && c.env.exists(e, e.name.startsWith('NVIDIA_'))) ||
(has(c.volumeMounts) && c.volumeMounts.exists(v,
v.mountPath.contains('nvidia-container-devices')))))
{{- end -}}

{{/* A Job (o: object, oldObject, or a CronJob's jobTemplate; oguard: a
guard for o.metadata) is gpugate's business: its labels, or its pod
template. */}}
{{- define "gpugate.gpuJob" -}}
(({{ .oguard }}has({{ .o }}.metadata.labels) && {{ .o }}.metadata.labels.exists(k,
k.startsWith('gpugate.io/'){{ with .extra }} || k in {{ toJson . | replace "\"" "'" | replace "," ", " }}{{ end }})) ||
{{ include "gpugate.gpuPod" (dict "m" (printf "%s.spec.template.metadata" .o) "mguard" (printf "has(%s.spec.template.metadata) && " .o) "r" (printf "%s.spec.template.spec" .o) "nodeName" .nodeName "extra" .extra) }})
{{- end -}}

{{/* The conditions of the webhooks: .ctx the root context, .kind one of
pods (Pods and Jobs at creation), validate (Pods and Jobs at creation and
update, their subresources, DRA claims), templates. */}}
{{- define "gpugate.gpuWork" -}}
{{- $x := .ctx.Values.webhook.extraLabelKeys -}}
{{- if eq .kind "pods" -}}
request.kind.kind == 'Job' ?
{{ include "gpugate.gpuJob" (dict "o" "object" "oguard" "" "nodeName" "true" "extra" $x) }} :
{{ include "gpugate.gpuPod" (dict "m" "object.metadata" "mguard" "" "r" "object.spec" "nodeName" "true" "extra" $x) }}
{{- else if eq .kind "validate" -}}
request.operation == 'DELETE' ||
(request.kind.kind != 'Pod' && request.kind.kind != 'Job') ||
(has(request.subResource) && request.subResource == 'ephemeralcontainers') ||
(request.kind.kind == 'Job' ?
{{ include "gpugate.gpuJob" (dict "o" "object" "oguard" "" "nodeName" "request.operation == 'CREATE'" "extra" $x) }} ||
(request.operation == 'UPDATE' &&
{{ include "gpugate.gpuJob" (dict "o" "oldObject" "oguard" "" "nodeName" "false" "extra" $x) }}) :
{{ include "gpugate.gpuPod" (dict "m" "object.metadata" "mguard" "" "r" "object.spec" "nodeName" "request.operation == 'CREATE'" "extra" $x) }} ||
(request.operation == 'UPDATE' &&
{{ include "gpugate.gpuPod" (dict "m" "oldObject.metadata" "mguard" "" "r" "oldObject.spec" "nodeName" "false" "extra" $x) }}))
{{- else -}}
(has(request.subResource) && request.subResource == 'scale') ||
(has(object.metadata.labels) && object.metadata.labels.exists(k,
k.startsWith('gpugate.io/'){{ with $x }} || k in {{ toJson . | replace "\"" "'" | replace "," ", " }}{{ end }})) ||
(request.kind.kind == 'CronJob' ?
{{ include "gpugate.gpuJob" (dict "o" "object.spec.jobTemplate" "oguard" "has(object.spec.jobTemplate.metadata) && " "nodeName" "true" "extra" $x) }} :
{{ include "gpugate.gpuPod" (dict "m" "object.spec.template.metadata" "mguard" "has(object.spec.template.metadata) && " "r" "object.spec.template.spec" "nodeName" "true" "extra" $x) }})
{{- end -}}
{{- end -}}
