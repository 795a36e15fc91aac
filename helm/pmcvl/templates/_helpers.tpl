{{/* Names, labels and the small pieces every template shares. */}}

{{- define "pmcvl.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* FULLNAME: the prefix of every object name. Kept to 40 characters so that suffixes like
"-ray-dashboard" and the names KubeRay derives from the RayCluster stay within 63. */}}
{{- define "pmcvl.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "pmcvl.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "pmcvl.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: pmcvl
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component: pass (dict "ctx" $ "component" "vllm"). */}}
{{- define "pmcvl.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pmcvl.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "pmcvl.componentLabels" -}}
{{ include "pmcvl.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* repository:tag of one entry of .Values.images. */}}
{{- define "pmcvl.image" -}}
{{- printf "%s:%s" .repository .tag -}}
{{- end -}}

{{/* imagePullSecrets of a pod spec, or nothing; use inside `with`. */}}
{{- define "pmcvl.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets -}}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end -}}
{{- end -}}

{{/* Pod security context: the shared one plus a component's user. */}}
{{- define "pmcvl.podSecurityContext" -}}
{{- toYaml (merge (deepCopy .component) (deepCopy .ctx.Values.podSecurityContext)) -}}
{{- end -}}

{{/* Container security context; init containers that only write a volume also get a
read-only root filesystem. */}}
{{- define "pmcvl.containerSecurityContext" -}}
{{- toYaml .Values.containerSecurityContext -}}
{{- end -}}

{{- define "pmcvl.initSecurityContext" -}}
{{- toYaml (merge (dict "readOnlyRootFilesystem" true) (deepCopy .Values.containerSecurityContext)) -}}
{{- end -}}

{{- define "pmcvl.rayClusterName" -}}
{{- include "pmcvl.fullname" . -}}
{{- end -}}

{{- define "pmcvl.rayDashboardService" -}}
{{- printf "%s-ray-dashboard" (include "pmcvl.fullname" .) -}}
{{- end -}}

{{- define "pmcvl.vllmName" -}}
{{- printf "%s-vllm" (include "pmcvl.fullname" .) -}}
{{- end -}}

{{- define "pmcvl.rayServiceAccount" -}}
{{- default (printf "%s-ray" (include "pmcvl.fullname" .)) .Values.ray.serviceAccount.name -}}
{{- end -}}

{{- define "pmcvl.airflowServiceAccount" -}}
{{- default (printf "%s-airflow" (include "pmcvl.fullname" .)) .Values.airflow.serviceAccount.name -}}
{{- end -}}

{{/* The Secret with AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, or "" when credentials come
from an IAM role. */}}
{{- define "pmcvl.s3SecretName" -}}
{{- if .Values.s3.existingSecret -}}
{{- .Values.s3.existingSecret -}}
{{- else if .Values.s3.accessKeyId -}}
{{- printf "%s-s3" (include "pmcvl.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "pmcvl.rayAuthSecretName" -}}
{{- default (printf "%s-ray-auth" (include "pmcvl.fullname" .)) .Values.ray.auth.existingSecret -}}
{{- end -}}

{{- define "pmcvl.envConfigMap" -}}
{{- printf "%s-env" (include "pmcvl.fullname" .) -}}
{{- end -}}

{{/* Environment of every container that talks to our bucket: region and credentials. The
endpoint goes into the pipeline config, not AWS_ENDPOINT_URL, which boto3 would also apply to
reads from the public PMC bucket. */}}
{{- define "pmcvl.s3Env" -}}
- name: AWS_DEFAULT_REGION
  value: {{ .Values.s3.region | quote }}
{{- with include "pmcvl.s3SecretName" . }}
- name: AWS_ACCESS_KEY_ID
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: AWS_ACCESS_KEY_ID
- name: AWS_SECRET_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: AWS_SECRET_ACCESS_KEY
{{- end }}
{{- end -}}

{{/* An init container copying `uri` into `dest` (a folder under `mount`, where the volume
is mounted, as in the main container) with fetch_s3.py:
(dict "ctx" $ "uri" "s3://..." "volume" "models" "mount" "/models" "dest" "/models/x" "anonymous" false) */}}
{{- define "pmcvl.fetchInitContainer" -}}
- name: fetch-{{ .volume }}
  image: {{ include "pmcvl.image" .ctx.Values.images.fetch }}
  imagePullPolicy: {{ .ctx.Values.images.fetch.pullPolicy }}
  args:
    - {{ .uri | quote }}
    - {{ .dest | quote }}
    {{- if .anonymous }}
    - --anonymous
    {{- end }}
  env:
    {{- include "pmcvl.s3Env" .ctx | nindent 4 }}
    {{- with .ctx.Values.s3.endpointUrl }}
    - name: AWS_ENDPOINT_URL
      value: {{ . | quote }}
    {{- end }}
  securityContext:
    {{- include "pmcvl.initSecurityContext" .ctx | nindent 4 }}
  resources:
    requests:
      cpu: 250m
      memory: 256Mi
    limits:
      memory: 1Gi
  volumeMounts:
    - name: {{ .volume }}
      mountPath: {{ .mount }}
{{- end -}}

{{/* The pmcvl config: what the chart derives, with .Values.pipeline.config over it. */}}
{{- define "pmcvl.pipelineConfig" -}}
{{- $v := .Values -}}
{{- $s3 := dict "region" $v.s3.region -}}
{{- with $v.s3.endpointUrl }}{{ $_ := set $s3 "endpoint_url" . }}{{ end -}}
{{- $root := printf "s3://%s/%s" $v.s3.bucket $v.s3.prefix -}}
{{- $t := $v.training -}}
{{- $claim := $t.storage.existingClaim | default (ternary (printf "%s-training" (include "pmcvl.fullname" .)) "" $t.storage.create) -}}
{{- $training := dict
  "image" (include "pmcvl.image" $v.images.trainer)
  "image_pull_policy" $v.images.trainer.pullPolicy
  "image_pull_secrets" $v.imagePullSecrets
  "namespace" .Release.Namespace
  "train" (dict "gpus" (int $t.gpus) "cpu" (toString $t.cpu) "memory" (toString $t.memory))
  "node_selector" $t.nodeSelector
  "tolerations" $t.tolerations
  "shm_size" (toString $t.shmSize)
  "volume_claim" ($claim | default nil)
  "output_uri" (printf "%s/training" $root)
  "s3_secret" (include "pmcvl.s3SecretName" . | default nil)
  "s3" (deepCopy $s3)
-}}
{{- $derived := dict
  "output" (dict "uri" (printf "%s/dataset" $root) "s3" (deepCopy $s3))
  "detector" (dict "weights" "/opt/pmcvl/models/panel-detector/yolo11n-panels.pt" "label_reader_weights" "/opt/pmcvl/models/label-reader/label-reader.pt")
  "classifier" (dict "weights" "/opt/pmcvl/models/modality-classifier/shufflenet-modality.pt")
  "longcap" (dict "enabled" $v.vllm.enabled)
  "training" $training
  "pipeline" (dict "autoscaling" (and $v.ray.enabled $v.ray.autoscaler.enabled))
-}}
{{- if $v.vllm.enabled -}}
{{- $_ := set $derived.longcap "base_url" (printf "http://%s:%v" (include "pmcvl.vllmName" .) $v.vllm.service.port) -}}
{{- $_ := set $derived.longcap "model" $v.vllm.model.servedName -}}
{{- end -}}
{{- toYaml (mergeOverwrite $derived (deepCopy $v.pipeline.config)) -}}
{{- end -}}

{{/* Ray token auth for every Ray process (head, workers, autoscaler): the same Secret that
Airflow's pods read to call the job API. Off: say so, since Ray 2.60 defaults to token auth. */}}
{{- define "pmcvl.rayAuthEnv" -}}
{{- if .Values.ray.auth.enabled -}}
- name: RAY_AUTH_MODE
  value: token
- name: RAY_AUTH_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ include "pmcvl.rayAuthSecretName" . }}
      key: token
{{- else -}}
- name: RAY_AUTH_MODE
  value: disabled
{{- end -}}
{{- end -}}

{{/* The labels ray_jobs/training/k8s_job.py puts on training and evaluation pods. */}}
{{- define "pmcvl.trainerSelector" -}}
matchLabels:
  app.kubernetes.io/name: pmcvl
matchExpressions:
  - key: app.kubernetes.io/component
    operator: In
    values: [clip-train, clip-eval]
{{- end -}}
