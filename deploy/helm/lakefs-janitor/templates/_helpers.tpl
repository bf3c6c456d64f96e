{{/* Names and labels. */}}
{{- define "janitor.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "janitor.fullname" -}}
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

{{- define "janitor.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "janitor.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "janitor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "janitor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Selector labels of one component: (dict "ctx" $ "component" "receiver") */}}
{{- define "janitor.componentSelector" -}}
{{ include "janitor.selectorLabels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "janitor.componentLabels" -}}
{{ include "janitor.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "janitor.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "janitor.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "janitor.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "janitor.sparkOnKubernetes" -}}
{{- if hasPrefix "k8s://" .Values.spark.master }}true{{ end -}}
{{- end -}}

{{/* The GC's Spark driver in a pod of its own (spark-submit --deploy-mode cluster) rather than in the worker. */}}
{{- define "janitor.sparkClusterMode" -}}
{{- if and (include "janitor.sparkOnKubernetes" .) (eq .Values.spark.kubernetes.deployMode "cluster") }}true{{ end -}}
{{- end -}}

{{- define "janitor.driverServiceAccountName" -}}
{{- if .Values.spark.kubernetes.driver.serviceAccount.create -}}
{{- default (printf "%s-spark-driver" (include "janitor.fullname" .)) .Values.spark.kubernetes.driver.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.spark.kubernetes.driver.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Environment variable -> key in existingSecret, for every setting the chart takes from the Secret. */}}
{{- define "janitor.secretEnv" -}}
{{- $env := dict "LAKEFS_JANITOR_LAKEFS__ACCESS_KEY_ID" .Values.secretKeys.lakefsAccessKeyId "LAKEFS_JANITOR_LAKEFS__SECRET_ACCESS_KEY" .Values.secretKeys.lakefsSecretAccessKey -}}
{{- if .Values.secretKeys.redisUrl -}}
{{- $_ := set $env "LAKEFS_JANITOR_REDIS_URL" .Values.secretKeys.redisUrl -}}
{{- end -}}
{{- if .Values.secretKeys.s3AccessKeyId -}}
{{- $_ := set $env "LAKEFS_JANITOR_GC__S3_ACCESS_KEY_ID" .Values.secretKeys.s3AccessKeyId -}}
{{- end -}}
{{- if .Values.secretKeys.s3SecretAccessKey -}}
{{- $_ := set $env "LAKEFS_JANITOR_GC__S3_SECRET_ACCESS_KEY" .Values.secretKeys.s3SecretAccessKey -}}
{{- end -}}
{{- range $name, $key := .Values.extraSecretEnv -}}
{{- $_ := set $env $name $key -}}
{{- end -}}
{{- toJson $env -}}
{{- end -}}

{{- define "janitor.sparkNamespace" -}}
{{- default .Release.Namespace .Values.spark.kubernetes.namespace -}}
{{- end -}}

{{- define "janitor.executorServiceAccountName" -}}
{{- if .Values.spark.kubernetes.serviceAccount.create -}}
{{- default (printf "%s-spark-executor" (include "janitor.fullname" .)) .Values.spark.kubernetes.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.spark.kubernetes.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "janitor.redisUrl" -}}
{{- if .Values.redis.url -}}
{{- .Values.redis.url -}}
{{- else if .Values.redis.bundled.enabled -}}
{{- printf "redis://%s-redis:6379/0" (include "janitor.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* Checks that fail the install with a message rather than render something that cannot work. */}}
{{- define "janitor.validate" -}}
{{- if not .Values.lakefs.endpointUrl -}}
{{- fail "set lakefs.endpointUrl: the lakeFS server's URL as the janitor's pods reach it (e.g. http://lakefs.lakefs.svc.cluster.local)" -}}
{{- end -}}
{{- if not .Values.existingSecret -}}
{{- fail "set existingSecret: the name of a Secret holding the webhook secret and the lakeFS keys (see the chart's README)" -}}
{{- end -}}
{{- if and (not .Values.secretKeys.redisUrl) (not .Values.redis.url) (not .Values.redis.bundled.enabled) -}}
{{- fail "a Redis is needed: set redis.url (or secretKeys.redisUrl), or redis.bundled.enabled=true to try it out" -}}
{{- end -}}
{{- if and .Values.redis.url .Values.redis.bundled.enabled -}}
{{- fail "set either redis.url or redis.bundled.enabled, not both" -}}
{{- end -}}
{{- $config := .Values.config | default dict -}}
{{- if hasKey $config "webhook_secret" -}}
{{- fail "config.webhook_secret: secrets never go into the ConfigMap; put it in existingSecret under secretKeys.webhookSecret" -}}
{{- end -}}
{{- if hasKey ($config.lakefs | default dict) "secret_access_key" -}}
{{- fail "config.lakefs.secret_access_key: secrets never go into the ConfigMap; put it in existingSecret under secretKeys.lakefsSecretAccessKey" -}}
{{- end -}}
{{- range $key := list "s3_secret_access_key" "s3_access_key_id" "azure_account_key" "azure_connection_string" -}}
{{- if hasKey ($config.gc | default dict) $key -}}
{{- fail (printf "config.gc.%s: secrets never go into the ConfigMap; put it in existingSecret (secretKeys, extraSecretEnv)" $key) -}}
{{- end -}}
{{- end -}}
{{- if hasKey ($config.lakefs | default dict) "access_key_id" -}}
{{- fail "config.lakefs.access_key_id: the lakeFS keys come from existingSecret (secretKeys.lakefsAccessKeyId)" -}}
{{- end -}}
{{- range $key := list "redis_url" "broker_url" -}}
{{- if and (hasKey $config $key) (contains "@" (toString (index $config $key))) -}}
{{- fail (printf "config.%s carries a password: put the URL in existingSecret under secretKeys.redisUrl" $key) -}}
{{- end -}}
{{- end -}}
{{- if hasKey $config "redis_sentinel_password" -}}
{{- fail "config.redis_sentinel_password: secrets never go into the ConfigMap; pass LAKEFS_JANITOR_REDIS_SENTINEL_PASSWORD through extraSecretEnv" -}}
{{- end -}}
{{- if hasKey $config "spark" -}}
{{- fail "config.spark: set the Spark engine through the chart's spark values (spark.master, spark.conf)" -}}
{{- end -}}
{{- if not (has .Values.spark.kubernetes.deployMode (list "client" "cluster")) -}}
{{- fail (printf "spark.kubernetes.deployMode: client (the driver in the worker pod) or cluster (a driver pod per run), not %q" .Values.spark.kubernetes.deployMode) -}}
{{- end -}}
{{- if and (eq .Values.spark.kubernetes.deployMode "cluster") (not (include "janitor.sparkOnKubernetes" .)) -}}
{{- fail "spark.kubernetes.deployMode cluster runs the driver as a Kubernetes pod: set spark.master to k8s://https://kubernetes.default.svc:443" -}}
{{- end -}}
{{- end -}}

{{/* The settings file: config, plus what the chart decides itself. Never a secret. */}}
{{- define "janitor.settingsFile" -}}
{{- $config := deepCopy (.Values.config | default dict) -}}
{{- $_ := set $config "worker_metrics_addr" "0.0.0.0" -}}
{{- $spark := dict -}}
{{- if .Values.spark.master -}}
{{- $_ := set $spark "master" .Values.spark.master -}}
{{- end -}}
{{- $conf := dict -}}
{{- if include "janitor.sparkOnKubernetes" . -}}
{{- $k := .Values.spark.kubernetes -}}
{{- $_ := set $conf "spark.kubernetes.namespace" (include "janitor.sparkNamespace" .) -}}
{{- $_ := set $conf "spark.kubernetes.container.image" (default (include "janitor.image" .) $k.executorImage) -}}
{{- $_ := set $conf "spark.kubernetes.container.image.pullPolicy" .Values.image.pullPolicy -}}
{{- $_ := set $conf "spark.kubernetes.authenticate.executor.serviceAccountName" (include "janitor.executorServiceAccountName" .) -}}
{{- $_ := set $conf "spark.kubernetes.executor.podTemplateFile" "/etc/lakefs-janitor/spark/executor-pod.yaml" -}}
{{- $_ := set $conf "spark.kubernetes.executor.podNamePrefix" (printf "%s-gc" (include "janitor.fullname" . | trunc 40 | trimSuffix "-")) -}}
{{- if include "janitor.sparkClusterMode" . -}}
{{- $d := $k.driver -}}
{{- $_ := set $spark "deploy_mode" "cluster" -}}
{{- $_ := set $conf "spark.submit.deployMode" "cluster" -}}
{{- $_ := set $conf "spark.kubernetes.authenticate.driver.serviceAccountName" (include "janitor.driverServiceAccountName" .) -}}
{{- $_ := set $conf "spark.kubernetes.driver.podTemplateFile" "/etc/lakefs-janitor/spark/driver-pod.yaml" -}}
{{- $_ := set $conf "spark.driver.cores" (toString $d.cores) -}}
{{- $_ := set $conf "spark.driver.memory" (toString $d.memory) -}}
{{- $_ := set $conf "spark.driver.memoryOverhead" (toString $d.memoryOverhead) -}}
{{- /* the driver pod's credentials: from existingSecret, never in a ConfigMap (workers/gc/submit.py) */ -}}
{{- range $name, $key := (include "janitor.secretEnv" . | fromJson) -}}
{{- $_ := set $conf (printf "spark.kubernetes.driver.secretKeyRef.%s" $name) (printf "%s:%s" $.Values.existingSecret $key) -}}
{{- end -}}
{{- else -}}
{{- $_ := set $conf "spark.submit.deployMode" "client" -}}
{{- end -}}
{{- $_ := set $conf "spark.executor.instances" (toString $k.executorInstances) -}}
{{- $_ := set $conf "spark.executor.cores" (toString $k.executorCores) -}}
{{- $_ := set $conf "spark.executor.memory" (toString $k.executorMemory) -}}
{{- $_ := set $conf "spark.driver.port" (toString $k.driverPort) -}}
{{- $_ := set $conf "spark.blockManager.port" (toString $k.blockManagerPort) -}}
{{- end -}}
{{- range $key, $value := .Values.spark.conf -}}
{{- $_ := set $conf $key (toString $value) -}}
{{- end -}}
{{- if $conf -}}
{{- $_ := set $spark "conf" $conf -}}
{{- end -}}
{{- if $spark -}}
{{- $_ := set $config "spark" $spark -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}

{{/* Environment shared by the receiver, the worker and beat. */}}
{{- define "janitor.env" -}}
- name: LAKEFS_JANITOR_CONFIG
  value: /etc/lakefs-janitor/config.yaml
- name: LAKEFS_JANITOR_LAKEFS__ENDPOINT_URL
  value: {{ .Values.lakefs.endpointUrl | quote }}
- name: LAKEFS_JANITOR_LAKEFS__ACCESS_KEY_ID
  valueFrom:
    secretKeyRef: {name: {{ .Values.existingSecret | quote }}, key: {{ .Values.secretKeys.lakefsAccessKeyId | quote }}}
- name: LAKEFS_JANITOR_LAKEFS__SECRET_ACCESS_KEY
  valueFrom:
    secretKeyRef: {name: {{ .Values.existingSecret | quote }}, key: {{ .Values.secretKeys.lakefsSecretAccessKey | quote }}}
- name: LAKEFS_JANITOR_WEBHOOK_SECRET
  valueFrom:
    secretKeyRef: {name: {{ .Values.existingSecret | quote }}, key: {{ .Values.secretKeys.webhookSecret | quote }}}
{{- if .Values.secretKeys.redisUrl }}
- name: LAKEFS_JANITOR_REDIS_URL
  valueFrom:
    secretKeyRef: {name: {{ .Values.existingSecret | quote }}, key: {{ .Values.secretKeys.redisUrl | quote }}}
{{- else }}
- name: LAKEFS_JANITOR_REDIS_URL
  value: {{ include "janitor.redisUrl" . | quote }}
{{- end }}
{{- if .Values.secretKeys.s3AccessKeyId }}
- name: LAKEFS_JANITOR_GC__S3_ACCESS_KEY_ID
  valueFrom:
    secretKeyRef: {name: {{ .Values.existingSecret | quote }}, key: {{ .Values.secretKeys.s3AccessKeyId | quote }}}
{{- end }}
{{- if .Values.secretKeys.s3SecretAccessKey }}
- name: LAKEFS_JANITOR_GC__S3_SECRET_ACCESS_KEY
  valueFrom:
    secretKeyRef: {name: {{ .Values.existingSecret | quote }}, key: {{ .Values.secretKeys.s3SecretAccessKey | quote }}}
{{- end }}
{{- range $name, $key := .Values.extraSecretEnv }}
- name: {{ $name }}
  valueFrom:
    secretKeyRef: {name: {{ $.Values.existingSecret | quote }}, key: {{ $key | quote }}}
{{- end }}
- name: LAKECTL_CONFIG_FILE
  value: /dev/null
- name: HOME
  value: /tmp
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Pod-level fields shared by every janitor pod: (dict "ctx" $ "component" "worker" "values" .Values.worker) */}}
{{- define "janitor.podMeta" -}}
labels:
  {{- include "janitor.componentLabels" (dict "ctx" .ctx "component" .component) | nindent 2 }}
  {{- with .ctx.Values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
annotations:
  checksum/config: {{ include "janitor.settingsFile" .ctx | sha256sum }}
  {{- with .ctx.Values.podAnnotations }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end -}}

{{- define "janitor.podSpecCommon" -}}
serviceAccountName: {{ include "janitor.serviceAccountName" .ctx }}
{{- if and (eq .component "worker") (include "janitor.sparkOnKubernetes" .ctx) }}
automountServiceAccountToken: true  # the driver of Spark jobs creates executor pods
{{- else }}
automountServiceAccountToken: false
{{- end }}
securityContext:
  {{- toYaml .ctx.Values.podSecurityContext | nindent 2 }}
{{- with .ctx.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "janitor.volumeMounts" -}}
- name: config
  mountPath: /etc/lakefs-janitor
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- end -}}

{{- define "janitor.volumes" -}}
- name: config
  configMap:
    name: {{ include "janitor.fullname" . }}
    items:
      - {key: config.yaml, path: config.yaml}
      {{- if include "janitor.sparkOnKubernetes" . }}
      - {key: executor-pod.yaml, path: spark/executor-pod.yaml}
      {{- end }}
      {{- if include "janitor.sparkClusterMode" . }}
      - {key: driver-pod.yaml, path: spark/driver-pod.yaml}
      {{- end }}
- name: tmp
  emptyDir: {}
{{- end -}}
