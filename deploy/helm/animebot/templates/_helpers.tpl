{{/* The bot's name: the release's, or release-animebot when the release's name lacks "animebot". */}}
{{- define "animebot.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 56 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 56 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 56 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Every object's labels; `name` is the object's own name, as in deploy/kubernetes. */}}
{{- define "animebot.labels" -}}
{{ include "animebot.selector" . }}
app.kubernetes.io/part-of: animebot
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{- define "animebot.selector" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{- define "animebot.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The workers' image: the bot's, unless workers.imageTag holds them at another release (an
upgrade, workers first: docs/operations.md, "Helm"). */}}
{{- define "animebot.workerImage" -}}
{{ .Values.image.repository }}:{{ .Values.workers.imageTag | default .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "animebot.scaledOut" -}}
{{- if gt (int .Values.workers.replicas) 0 }}true{{ end -}}
{{- end -}}

{{/* The Secret holding the token: the operator's, or the chart's. */}}
{{- define "animebot.tokenSecret" -}}
{{- if .Values.token.existingSecret -}}
{{- .Values.token.existingSecret -}}
{{- else -}}
{{- $_ := required "set token.existingSecret (a Secret holding the token) or token.value (the token from @BotFather)" .Values.token.value -}}
{{- include "animebot.fullname" . -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding Redis's password: redis.existingSecret, else token.existingSecret (unless
redis.password is given), else the chart's. */}}
{{- define "animebot.redisSecret" -}}
{{- if .Values.redis.existingSecret -}}
{{- .Values.redis.existingSecret -}}
{{- else if and .Values.token.existingSecret (not .Values.redis.password) -}}
{{- .Values.token.existingSecret -}}
{{- else -}}
{{- include "animebot.fullname" . -}}
{{- end -}}
{{- end -}}

{{/* ANIMEBOT_BROKER_URL, the password put in by Kubernetes from $(REDIS_PASSWORD). */}}
{{- define "animebot.brokerUrl" -}}
{{- if .Values.redis.url -}}
{{- $url := urlParse .Values.redis.url -}}
{{- if not (has $url.scheme (list "redis" "rediss")) -}}
{{- fail (printf "redis.url must be a redis:// or rediss:// URL, not %q" .Values.redis.url) -}}
{{- end -}}
{{- if $url.userinfo -}}
{{- fail "redis.url must not hold the password: put it in a Secret (redis.existingSecret) or redis.password" -}}
{{- end -}}
{{- printf "%s://:$(REDIS_PASSWORD)@%s%s" $url.scheme $url.host ($url.path | default "/0") -}}
{{- if $url.query }}?{{ $url.query }}{{ end -}}
{{- else -}}
{{- printf "redis://:$(REDIS_PASSWORD)@%s-redis:6379/0" (include "animebot.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* The env a pod gets from a map of settings, refusing those the chart sets itself. */}}
{{- define "animebot.extraEnv" -}}
{{- range $name, $value := . -}}
{{- if has $name (list "TELEGRAM_BOT_TOKEN" "REDIS_PASSWORD" "ANIMEBOT_BROKER_URL" "ANIMEBOT_HOME" "ANIMEBOT_STOP_WAIT" "ANIMEBOT_WEBAPP_URL") -}}
{{- fail (printf "%s is set by the chart (see values.yaml: token, redis, bot.stopWait, webapp), not through env" $name) -}}
{{- end -}}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{ end -}}
{{- end -}}

{{/* A pod's placement: the component's own, else the chart-wide values. */}}
{{- define "animebot.placement" -}}
{{- with .own.nodeSelector | default .all.nodeSelector -}}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{ end -}}
{{- with .own.tolerations | default .all.tolerations -}}
tolerations:
  {{- toYaml . | nindent 2 }}
{{ end -}}
{{- with .own.affinity | default .all.affinity -}}
affinity:
  {{- toYaml . | nindent 2 }}
{{ end -}}
{{- with .all.imagePullSecrets -}}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{ end -}}
{{- end -}}

{{/* Restarts the pods when the chart's Secret changes, as kustomize's hashed Secret name does. */}}
{{- define "animebot.secretChecksum" -}}
{{- if or (not .Values.token.existingSecret) (and (include "animebot.scaledOut" .) (eq (include "animebot.redisSecret" .) (include "animebot.fullname" .))) -}}
checksum/secret: {{ printf "%s\n%s" .Values.token.value .Values.redis.password | sha256sum }}
{{- end -}}
{{- end -}}
