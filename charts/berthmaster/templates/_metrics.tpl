{{/*
How the scheduler and the operator serve /metrics, /healthz and /readyz (metrics.serving;
docs/observability.md): "authenticated" is kube-scheduler's secure port (HTTPS, TokenReview and
SubjectAccessReview by the API server); "plain" is HTTP without authentication, bound to the
pod's IP, behind metrics.networkPolicy. Each helper takes (list $ <port>).
*/}}

{{- define "berthmaster.metrics.authenticated" -}}
{{- if eq .Values.metrics.serving "authenticated" }}true{{ end -}}
{{- end -}}

{{/* The container arguments of the serving mode. */}}
{{- define "berthmaster.metrics.args" -}}
{{- $root := index . 0 -}}
{{- $port := index . 1 -}}
{{- $m := $root.Values.metrics -}}
{{- if include "berthmaster.metrics.authenticated" $root }}
- --secure-port={{ $port }}
- --bind-address=0.0.0.0
- --metrics-bind-address=
- --authorization-always-allow-paths={{ join "," $m.alwaysAllowPaths }}
{{- if $m.tls.secretName }}
- --tls-cert-file=/etc/berthmaster-tls/tls.crt
- --tls-private-key-file=/etc/berthmaster-tls/tls.key
{{- end }}
{{- else }}
- --metrics-bind-address=$(POD_IP):{{ $port }}
{{- end }}
{{- end -}}

{{/* The pod IP the plain endpoint binds to. */}}
{{- define "berthmaster.metrics.env" -}}
{{- if not (include "berthmaster.metrics.authenticated" .) }}
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
{{- end }}
{{- end -}}

{{/* The probes' scheme: the kubelet does not check the certificate of an HTTPS probe. */}}
{{- define "berthmaster.metrics.probeScheme" -}}
{{- if include "berthmaster.metrics.authenticated" . }}
scheme: HTTPS
{{- end }}
{{- end -}}

{{- define "berthmaster.metrics.volumeMounts" -}}
{{- if and (include "berthmaster.metrics.authenticated" .) .Values.metrics.tls.secretName }}
- name: metrics-tls
  mountPath: /etc/berthmaster-tls
  readOnly: true
{{- end }}
{{- end -}}

{{- define "berthmaster.metrics.volumes" -}}
{{- if and (include "berthmaster.metrics.authenticated" .) .Values.metrics.tls.secretName }}
- name: metrics-tls
  secret:
    secretName: {{ .Values.metrics.tls.secretName }}
{{- end }}
{{- end -}}
