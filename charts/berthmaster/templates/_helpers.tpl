{{/*
Names, labels and shared pod fragments. Every object carries the app.kubernetes.io labels;
selectors use only name, instance and component (labels that never change on upgrade).
*/}}

{{- define "berthmaster.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "berthmaster.fullname" -}}
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

{{/* <fullname>-<component>, for objects of one component. Call with (list $ "scheduler"). */}}
{{- define "berthmaster.componentName" -}}
{{- $root := index . 0 -}}
{{- printf "%s-%s" (include "berthmaster.fullname" $root | trunc 50 | trimSuffix "-") (index . 1) -}}
{{- end -}}

{{- define "berthmaster.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "berthmaster.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: berthmaster
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Labels of one component's objects. Call with (list $ "scheduler"). */}}
{{- define "berthmaster.componentLabels" -}}
{{ include "berthmaster.labels" (index . 0) }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "berthmaster.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "berthmaster.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{/* repository@digest when image.digest is set (a digest pins exactly), else repository:tag. */}}
{{- define "berthmaster.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The ServiceAccount a component runs as. Call with (list $ "scheduler"). */}}
{{- define "berthmaster.serviceAccountName" -}}
{{- $root := index . 0 -}}
{{- $sa := (index $root.Values (index . 1)).serviceAccount -}}
{{- if $sa.create -}}
{{- default (include "berthmaster.componentName" .) $sa.name -}}
{{- else if $sa.name -}}
{{- $sa.name -}}
{{- else -}}
{{- /* Never fall back to the namespace's "default" account: the chart would bind its roles to it. */ -}}
{{- fail (printf "%s.serviceAccount.create is false but %s.serviceAccount.name is empty: set it to the existing ServiceAccount the %s runs as." (index . 1) (index . 1) (index . 1)) -}}
{{- end -}}
{{- end -}}

{{/*
extraArgs as container arguments: a map renders --key=value (sorted by key; "" gives the bare
--key), a list renders its items verbatim. Call with the component's values.
*/}}
{{- define "berthmaster.extraArgs" -}}
{{- if kindIs "map" .extraArgs }}
{{- range $key, $value := .extraArgs }}
{{- if eq (toString $value) "" }}
- {{ printf "--%s" $key | quote }}
{{- else }}
- {{ printf "--%s=%v" $key $value | quote }}
{{- end }}
{{- end }}
{{- else }}
{{- range .extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
"true" when the operator runs this capability: operator.enabled, and operator.capabilities is
empty (all) or names it. Call with (list $ "machines").
*/}}
{{- define "berthmaster.operator.runs" -}}
{{- $o := (index . 0).Values.operator -}}
{{- if and $o.enabled (or (empty $o.capabilities) (has (index . 1) $o.capabilities)) -}}
true
{{- end -}}
{{- end -}}

{{/*
The admissionregistration.k8s.io version for the ValidatingAdmissionPolicy: v1, GA since 1.30,
on every version Chart.yaml's kubeVersion admits.
*/}}
{{- define "berthmaster.admissionPolicyVersion" -}}
admissionregistration.k8s.io/v1
{{- end -}}

{{/*
A probe: the chart's (a dict) with the component's override (livenessProbe/readinessProbe
values) merged over it. Call with (list $default $override).
*/}}
{{- define "berthmaster.probe" -}}
{{- toYaml (mergeOverwrite (deepCopy (index . 0)) (deepCopy (default dict (index . 1)))) }}
{{- end -}}

{{/* An httpGet probe action on the metrics port's scheme. Call with (list $ path port). */}}
{{- define "berthmaster.probeGet" -}}
{{- $get := dict "path" (index . 1) "port" (index . 2) }}
{{- if include "berthmaster.metrics.authenticated" (index . 0) }}
{{- $_ := set $get "scheme" "HTTPS" }}
{{- end }}
{{- toYaml $get }}
{{- end -}}

{{/* The restricted-profile container fragment shared by every container. */}}
{{- define "berthmaster.containerSecurity" -}}
securityContext:
  {{- toYaml .Values.containerSecurityContext | nindent 2 }}
{{- end -}}

{{/* Pod-level fields shared by the scheduler and the operator. Call with (list $ $component). */}}
{{- define "berthmaster.podCommon" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $component.priorityClassName | default $root.Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
securityContext:
  {{- toYaml $root.Values.podSecurityContext | nindent 2 }}
{{- with $component.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $component.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $component.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $component.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The Downward API variables every component reads (its namespace and its own name). */}}
{{- define "berthmaster.podEnv" -}}
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- end -}}

{{/* The Policy file's JSON text (scheduler.policy; empty when none is set). */}}
{{- define "berthmaster.scheduler.policy" -}}
{{- with .Values.scheduler.policy -}}
{{- toPrettyJson . -}}
{{- end -}}
{{- end -}}

{{/*
The KubeSchedulerConfiguration's YAML text (scheduler.config; empty when none is set). A
profile without schedulerName gets scheduler.name, and a configuration without profiles one
such profile (the default plugins), so that --scheduler-name, which kube-scheduler's precedence
ignores beside --config, is never needed.
*/}}
{{- define "berthmaster.scheduler.config" -}}
{{- with .Values.scheduler.config -}}
{{- $config := deepCopy . -}}
{{- $profiles := list -}}
{{- range $profile := ($config.profiles | default (list dict)) -}}
{{- $profile = deepCopy $profile -}}
{{- if not $profile.schedulerName -}}
{{- $_ := set $profile "schedulerName" $.Values.scheduler.name -}}
{{- end -}}
{{- $profiles = append $profiles $profile -}}
{{- end -}}
{{- $_ := set $config "profiles" $profiles -}}
{{- toYaml $config -}}
{{- end -}}
{{- end -}}

{{/* Refuse a Policy and a KubeSchedulerConfiguration together, as the scheduler does. */}}
{{- define "berthmaster.scheduler.checkConfig" -}}
{{- if and .Values.scheduler.policy .Values.scheduler.config -}}
{{- fail "scheduler.policy and scheduler.config are both set, but the scheduler runs one of them: unset one (berthmaster policy convert FILE writes a Policy as a KubeSchedulerConfiguration)." -}}
{{- end -}}
{{- end -}}
