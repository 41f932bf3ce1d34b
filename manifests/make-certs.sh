#!/usr/bin/env bash
# make-certs.sh - install gpugate in the safe order, and manage its TLS
# certificates (Secret gpugate/gpugate-tls and the webhooks' caBundle).
#
# Usage: manifests/make-certs.sh COMMAND [OPTIONS]
#
# Commands:
#   install     first install, or re-install: issue a serving certificate,
#               create/update the Secret, apply everything but the webhook
#               configurations, wait until the Deployment is ready, then
#               register the webhooks with the caBundle and check that the
#               apiserver can call gpugate (a dry-run Pod).
#   rotate      issue a new serving certificate from the same CA and update
#               the Secret; the caBundle does not change. gpugate reloads
#               it when the kubelet updates the volume (about a minute).
#   ca-rotate   start a CA rotation: a new CA; caBundle = old CA + new CA;
#               then a serving certificate from the new CA in the Secret.
#   ca-finish   finish it, once every replica serves the new certificate:
#               caBundle = new CA only.
#   bundle      print the caBundle the webhooks should carry.
#   uninstall   remove the webhook configurations FIRST, then the rest.
#
# Options:
#   --pki DIR          where ca.key, ca.crt, tls.key, tls.crt live (default
#                      $GPUGATE_PKI_DIR, else ~/.local/share/gpugate/pki).
#                      ca.key never leaves this directory: keep it safe and
#                      keep it (losing it means a CA rotation).
#   -k, --kustomize DIR  the kustomization to apply (default: this
#                      directory; point it at your overlay)
#   --gpugate BIN      the gpugate binary that issues certificates (default
#                      $GPUGATE, else build/gpugate of this repository, else
#                      gpugate on PATH)
#   --kubectl BIN      (default $KUBECTL, else kubectl)
#   --context NAME     kubectl context
#   --days N           serving certificate validity, 1..3650 (default 365)
#   --timeout SECONDS  how long to wait for the Deployment (default 300)
#   --smoke-namespace NS  namespace of the dry-run check (default default)
#   --no-wait          register the webhooks without waiting for the
#                      Deployment, and without the smoke test (DANGEROUS:
#                      with failurePolicy Fail, Pods and Jobs cannot be
#                      created until gpugate is ready; for clusters without
#                      nodes, e.g. manifest tests)
#   -h, --help
#
# Needs kubectl (1.27+) and the gpugate binary (for `gpugate certs`); no jq,
# yq or openssl. The namespace, Service, Secret and configuration names are
# fixed (gpugate, gpugate, gpugate-tls, gpugate).

set -euo pipefail

prog=make-certs.sh
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)

NS=gpugate
SVC=gpugate
SECRET=gpugate-tls
DEPLOY=gpugate
CONFIG=gpugate
WEBHOOK_SEL=app.kubernetes.io/component=admission-webhook
NS_SEL=kubernetes.io/metadata.name=$NS
DNS_NAMES=("$SVC.$NS.svc" "$SVC.$NS.svc.cluster.local")

log() { printf '%s: %s\n' "$prog" "$*" >&2; }
die() {
    printf '%s: ERROR: %s\n' "$prog" "$*" >&2
    exit 1
}
usage() {
    sed -n '2,/^$/{s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
    exit "${1:-2}"
}

pki=${GPUGATE_PKI_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/gpugate/pki}
kdir=$here
gpugate_bin=${GPUGATE:-}
kubectl_bin=${KUBECTL:-kubectl}
context=
days=365
timeout=300
smoke_ns=default
wait_ready=1

cmd=${1:-}
[[ -n $cmd ]] || usage 2
shift
case $cmd in -h | --help | help) usage 0 ;; esac
while (($#)); do
    case $1 in
        --pki) pki=${2:?--pki needs a directory}; shift 2 ;;
        -k | --kustomize) kdir=${2:?--kustomize needs a directory}; shift 2 ;;
        --gpugate) gpugate_bin=${2:?}; shift 2 ;;
        --kubectl) kubectl_bin=${2:?}; shift 2 ;;
        --context) context=${2:?}; shift 2 ;;
        --days) days=${2:?}; shift 2 ;;
        --timeout) timeout=${2:?}; shift 2 ;;
        --smoke-namespace) smoke_ns=${2:?}; shift 2 ;;
        --no-wait) wait_ready=0; shift ;;
        -h | --help) usage 0 ;;
        *) log "unknown option: $1"; usage 2 ;;
    esac
done
[[ $days =~ ^[0-9]+$ ]] || die "--days must be a whole number"
[[ $timeout =~ ^[0-9]+$ ]] || die "--timeout must be a whole number of seconds"

k() {
    if [[ -n $context ]]; then
        "$kubectl_bin" --context "$context" "$@"
    else
        "$kubectl_bin" "$@"
    fi
}

tmp=$(mktemp -d)
trap 'rm -rf -- "$tmp"' EXIT

find_gpugate() {
    if [[ -z $gpugate_bin ]]; then
        if [[ -x $here/../build/gpugate ]]; then
            gpugate_bin=$here/../build/gpugate
        elif command -v gpugate >/dev/null; then
            gpugate_bin=$(command -v gpugate)
        else
            die "no gpugate binary: run make, or pass --gpugate BIN"
        fi
    fi
    [[ -x $gpugate_bin ]] || die "$gpugate_bin is not executable"
}

# The caBundle: base64 (one line) of the CA certificate(s) the apiserver
# must trust. During a CA rotation, the previous CA and the new one.
bundle_pem() {
    if [[ -f $pki/ca-previous.crt ]]; then
        cat -- "$pki/ca-previous.crt" "$pki/ca.crt"
    else
        cat -- "$pki/ca.crt"
    fi
}
bundle_b64() { bundle_pem | base64 | tr -d '\n'; }

# issue [--new-ca]: a serving certificate for the Service's DNS names,
# signed by the CA in $pki (made once, then reused).
issue() {
    local args=(certs --out "$pki" --days "$days") n
    for n in "${DNS_NAMES[@]}"; do args+=(--dns "$n"); done
    "$gpugate_bin" "${args[@]}" "$@" >/dev/null
    chmod 700 "$pki"
    log "serving certificate for ${DNS_NAMES[*]} written to $pki (valid $days days)"
}

# create_or_replace FILE: create the object(s), or replace them whole.
create_or_replace() {
    if k get -f "$1" -o name >/dev/null 2>&1; then
        k replace -f "$1"
    else
        k create -f "$1"
    fi
}

put_secret() {
    bundle_pem >"$tmp/ca.crt"
    # Not `kubectl apply`: it would copy the private key into the
    # last-applied-configuration annotation.
    k -n "$NS" create secret generic "$SECRET" --type=kubernetes.io/tls \
        --from-file=tls.crt="$pki/tls.crt" --from-file=tls.key="$pki/tls.key" \
        --from-file=ca.crt="$tmp/ca.crt" --dry-run=client -o yaml |
        k label --local -f - -o yaml \
            app.kubernetes.io/name=gpugate app.kubernetes.io/part-of=gpugate \
            >"$tmp/secret.yaml"
    create_or_replace "$tmp/secret.yaml"
    rm -f -- "$tmp/secret.yaml"
}

# register_webhooks: create or replace both webhook configurations as the
# kustomization declares them, with caBundle set on every webhook, in one
# write each (never a moment without caBundle).
#
# The objects carry the last-applied-configuration annotation of the
# kustomization *without* caBundle (as `kubectl apply --dry-run=client`
# computes it), so a later `kubectl apply -k` never removes the caBundle: it
# only deletes fields that were in the last applied configuration. They are
# written with --raw because `kubectl create` and `kubectl replace` would
# rewrite that annotation to include the caBundle.
register_webhooks() {
    local b64 kind res names i ops n rv
    b64=$(bundle_b64)
    for kind in MutatingWebhookConfiguration ValidatingWebhookConfiguration; do
        res=$(printf '%s' "$kind" | tr '[:upper:]' '[:lower:]')s
        k apply -k "$kdir" -l "$WEBHOOK_SEL" --dry-run=client \
            -o jsonpath="{.items[?(@.kind==\"$kind\")]}" >"$tmp/$kind.json"
        [[ -s $tmp/$kind.json ]] || die "$kdir declares no $kind labelled $WEBHOOK_SEL"
        names=$(k apply -k "$kdir" -l "$WEBHOOK_SEL" --dry-run=client \
            -o jsonpath="{.items[?(@.kind==\"$kind\")].webhooks[*].name}")
        read -r -a names <<<"$names"
        n=${#names[@]}
        ((n > 0)) || die "$kind has no webhooks"
        ops=
        for ((i = 0; i < n; i++)); do
            ops+="${ops:+,}{\"op\":\"add\",\"path\":\"/webhooks/$i/clientConfig/caBundle\",\"value\":\"$b64\"}"
        done
        if rv=$(k get "$res" "$CONFIG" -o jsonpath='{.metadata.resourceVersion}' 2>/dev/null); then
            ops+=",{\"op\":\"add\",\"path\":\"/metadata/resourceVersion\",\"value\":\"$rv\"}"
            k patch --local -f "$tmp/$kind.json" --type=json -p "[$ops]" -o json >"$tmp/$kind.ca.json"
            k replace --raw "/apis/admissionregistration.k8s.io/v1/$res/$CONFIG" \
                -f "$tmp/$kind.ca.json" >/dev/null
            log "$kind $CONFIG replaced, caBundle set on ${names[*]}"
        else
            k patch --local -f "$tmp/$kind.json" --type=json -p "[$ops]" -o json >"$tmp/$kind.ca.json"
            k create --raw "/apis/admissionregistration.k8s.io/v1/$res" \
                -f "$tmp/$kind.ca.json" >/dev/null
            log "$kind $CONFIG created, caBundle set on ${names[*]}"
        fi
    done
}

webhooks_exist() {
    k get mutatingwebhookconfiguration "$CONFIG" >/dev/null 2>&1 ||
        k get validatingwebhookconfiguration "$CONFIG" >/dev/null 2>&1
}

# smoke: a dry-run Pod with an unknown class must come back with gpugate's
# answer (a denial or a warning that mentions gpugate). Dry runs reserve
# nothing. Returns 0 confirmed, 1 the apiserver cannot call gpugate,
# 2 inconclusive (webhook not called: excluded namespace, renamed class
# label, or the apiserver has not seen the configuration yet).
smoke() {
    local out deadline=$((SECONDS + 30)) rc=2
    while :; do
        if out=$(k -n "$smoke_ns" run gpugate-smoke-test --restart=Never \
            --image=registry.k8s.io/pause:3.10 \
            --labels=gpugate.io/class=gpugate-smoke-test-no-such-class \
            --dry-run=server -o name 2>&1); then
            [[ $out == *gpugate:* ]] && rc=0 || rc=2
        elif [[ $out == *'failed calling webhook "'*'.gpugate.io"'* ]]; then
            rc=1
        elif [[ $out == *gpugate:* ]]; then
            rc=0
        else
            rc=2
        fi
        ((rc == 0)) && { log "smoke test: the apiserver called gpugate: ${out//$'\n'/ }"; return 0; }
        ((SECONDS >= deadline)) && break
        sleep 2
    done
    log "smoke test: ${out//$'\n'/ }"
    return "$rc"
}

wait_deployment() {
    if ((wait_ready == 0)); then
        log "WARNING: --no-wait: not waiting for deployment/$DEPLOY; Pods and Jobs in"
        log "WARNING: tenant namespaces cannot be created until it is ready"
        return 0
    fi
    log "waiting up to ${timeout}s for deployment/$DEPLOY (readiness: certificate valid, usage synced)"
    if ! k -n "$NS" rollout status "deployment/$DEPLOY" --timeout="${timeout}s"; then
        log "deployment/$DEPLOY is not ready; the webhooks were NOT registered. Look at:"
        log "  kubectl -n $NS get pods,events; kubectl -n $NS logs deploy/$DEPLOY"
        exit 1
    fi
}

cmd_install() {
    local existed=0
    find_gpugate
    if [[ -f $kdir/policy.yaml ]]; then
        "$gpugate_bin" check "$kdir/policy.yaml" >/dev/null 2>"$tmp/check.err" ||
            { cat "$tmp/check.err" >&2; die "the policy $kdir/policy.yaml is invalid"; }
    else
        log "no $kdir/policy.yaml (an overlay?): check your policy with gpugate check"
    fi
    issue
    log "1/5 namespace"
    k apply -k "$kdir" -l "$NS_SEL"
    log "2/5 Secret $NS/$SECRET"
    put_secret
    log "3/5 everything but the webhook configurations"
    k apply -k "$kdir" -l "app.kubernetes.io/component!=${WEBHOOK_SEL#*=}"
    log "4/5 deployment ready"
    wait_deployment
    log "5/5 webhook configurations with caBundle"
    webhooks_exist && existed=1
    register_webhooks
    # Now everything is as declared; later `kubectl apply -k` keeps caBundle.
    k apply -k "$kdir"
    # gpugate cannot answer before the Deployment is ready: with --no-wait a
    # smoke test would fail and take the webhooks away again, undoing what
    # --no-wait asked for.
    if ((wait_ready == 0)); then
        log "--no-wait: no smoke test (gpugate cannot answer until deployment/$DEPLOY is"
        log "ready); then check it as docs/operations.md, \"Checking an install\", shows"
        log "installed, not verified"
        return 0
    fi
    local rc=0
    smoke || rc=$?
    case $rc in
        0) log "installed" ;;
        1)
            if ((existed == 0)); then
                log "the apiserver cannot call gpugate: removing the webhook configurations again"
                k delete mutatingwebhookconfiguration "$CONFIG" --ignore-not-found
                k delete validatingwebhookconfiguration "$CONFIG" --ignore-not-found
            else
                log "the apiserver cannot call gpugate, and Pod/Job creation in tenant"
                log "namespaces fails. Fix it, or remove the webhooks at once:"
                log "  kubectl delete mutatingwebhookconfiguration,validatingwebhookconfiguration $CONFIG"
            fi
            log "common causes: a firewall between the control plane and the nodes' port 8443,"
            log "a caBundle that does not match the Secret, a NetworkPolicy in $NS"
            exit 1
            ;;
        *) log "installed, but the smoke test was inconclusive (see above)" ;;
    esac
}

cmd_rotate() {
    find_gpugate
    [[ -f $pki/ca.crt && -f $pki/ca.key ]] || die "no CA in $pki (wrong --pki?); a new CA would break the installed caBundle"
    issue
    # caBundle first (a no-op unless a CA rotation was interrupted), then
    # the certificate it must trust.
    if webhooks_exist; then register_webhooks; fi
    put_secret
    log "Secret updated: each replica reloads the certificate when the kubelet updates"
    log "its volume (about a minute); watch gpugate_certificate_expiry_seconds"
}

cmd_ca_rotate() {
    find_gpugate
    [[ -f $pki/ca.crt && -f $pki/ca.key ]] || die "no CA in $pki (wrong --pki?)"
    [[ ! -f $pki/ca-previous.crt ]] ||
        die "a CA rotation is already in progress ($pki/ca-previous.crt): run ca-finish first"
    webhooks_exist || die "no webhook configurations: use install"
    # 1. The apiservers trust old and new CA before anything serves the new one.
    cp -p -- "$pki/ca.crt" "$pki/ca-previous.crt"
    cp -p -- "$pki/ca.key" "$pki/ca-previous.key"
    issue --new-ca
    register_webhooks
    log "caBundle now trusts the previous and the new CA; letting the apiservers see it"
    sleep 10
    # 2. The serving certificate from the new CA.
    put_secret
    log "Secret updated with a certificate from the new CA. When every replica has"
    log "reloaded it (about a minute; gpugate_certificate_expiry_seconds changes, log"
    log "line msg=\"certificate reloaded\"), run: $prog ca-finish --pki $pki"
}

cmd_ca_finish() {
    [[ -f $pki/ca-previous.crt ]] || die "no CA rotation in progress in $pki"
    local stamp
    stamp=$(date -u +%Y%m%dT%H%M%SZ)
    mv -- "$pki/ca-previous.crt" "$pki/ca-retired-$stamp.crt"
    [[ -f $pki/ca-previous.key ]] && mv -- "$pki/ca-previous.key" "$pki/ca-retired-$stamp.key"
    # Uninstalled mid-rotation: registering Fail-closed webhooks with
    # nothing behind them would stop every Pod creation.
    if ! webhooks_exist; then
        log "no webhook configurations (uninstalled?): the rotation is finished in $pki only;"
        log "the next install uses the new CA. The old one is in $pki/ca-retired-$stamp.*"
        return 0
    fi
    register_webhooks
    put_secret
    log "caBundle now trusts the new CA only; the old one is in $pki/ca-retired-$stamp.*"
}

cmd_bundle() {
    [[ -f $pki/ca.crt ]] || die "no CA in $pki"
    bundle_b64
    echo
}

cmd_uninstall() {
    # Webhooks first: with failurePolicy Fail, webhooks whose server is gone
    # block Pod and Job creation cluster-wide.
    k delete mutatingwebhookconfiguration "$CONFIG" --ignore-not-found
    k delete validatingwebhookconfiguration "$CONFIG" --ignore-not-found
    k delete -k "$kdir" --ignore-not-found
    log "uninstalled (the namespace deletion also removed the Secret); $pki is kept"
}

case $cmd in
    install) cmd_install ;;
    rotate) cmd_rotate ;;
    ca-rotate) cmd_ca_rotate ;;
    ca-finish) cmd_ca_finish ;;
    bundle) cmd_bundle ;;
    uninstall) cmd_uninstall ;;
    *) log "unknown command: $cmd"; usage 2 ;;
esac
