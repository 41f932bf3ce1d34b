#!/usr/bin/env bash
# scripts/check-includes.sh - the layering of the tree, enforced (make test).
#
# Each folder may include the project headers of the folders listed for it
# (itself always) and no library header listed as forbidden for it.  The
# rules are the house plan of docs/internals.md ("The house"); a change
# that needs another edge changes this table and that section together.
#
#   scripts/check-includes.sh          check; one line per violation, exit 1
#
set -euo pipefail
cd "$(dirname "$0")/.."

# folder: the project folders it may include
declare -A MAY=(
  [base]=""
  [policy]="base"
  [codec]="base"
  [http]="base"
  [usage]="base policy"
  [certs]="base"
  [kube]="base codec usage certs"
  [metrics]="base policy usage"
  [webhook]="base policy codec usage http kube metrics"
  [report]="base policy codec usage kube webhook"
  [controllers]="base policy codec usage kube webhook report metrics"
  [daemon]="base policy codec usage http kube certs webhook report controllers metrics"
  [cli]="base policy codec usage http kube certs webhook report controllers metrics daemon"
)

# The I/O libraries, by the path of their headers.
IO_LIBS="jansson microhttpd gnutls openssl curl"
# folder: the library headers it must not include
declare -A MUST_NOT=(
  [base]="$IO_LIBS yaml cyaml"
  [policy]="$IO_LIBS"
  [codec]="microhttpd gnutls openssl curl"
  [http]="jansson openssl curl yaml cyaml"
  [usage]="$IO_LIBS yaml cyaml"
  [certs]="jansson microhttpd gnutls curl yaml cyaml"
  [kube]="microhttpd gnutls openssl yaml cyaml"
  [metrics]="$IO_LIBS yaml cyaml"
  [webhook]="microhttpd gnutls openssl curl yaml cyaml"
  [report]="microhttpd gnutls openssl curl yaml cyaml"
  [controllers]="microhttpd gnutls openssl curl yaml cyaml"
  [daemon]="microhttpd gnutls openssl curl yaml cyaml"
  [cli]="microhttpd gnutls openssl curl yaml cyaml"
)

# Files allowed a library their folder is not: the JSON of what a
# follower replica sends the leader (issue #32) names the policy's tenants
# and flavors, which only usage/ and above know, and is pure.
declare -A FILE_MAY_LIB=(
  [usage/leader-wire.h]="jansson"
  [usage/leader-wire.c]="jansson"
)

# header path -> library name ("gnutls/gnutls.h" -> gnutls)
lib_of() {
  case "$1" in
    jansson.h) echo jansson ;;
    microhttpd.h) echo microhttpd ;;
    gnutls/*) echo gnutls ;;
    openssl/*) echo openssl ;;
    curl/*) echo curl ;;
    yaml.h) echo yaml ;;
    cyaml/*) echo cyaml ;;
  esac
}

bad=0
for dir in "${!MAY[@]}"; do
  [ -d "$dir" ] || continue
  for f in "$dir"/*.c "$dir"/*.h; do
    [ -e "$f" ] || continue
    lineno=0
    while IFS= read -r line; do
      lineno=$((lineno + 1))
      case "$line" in
        '#include "'*)
          hdr=${line#'#include "'}; hdr=${hdr%%'"'*}
          top=${hdr%%/*}
          [ "$top" = "$dir" ] && continue
          case " ${MAY[$dir]} " in *" $top "*) continue ;; esac
          echo "$f:$lineno: $dir/ may not include \"$hdr\" (it may include: ${MAY[$dir]:-nothing but itself})"
          bad=1 ;;
        '#include <'*)
          hdr=${line#'#include <'}; hdr=${hdr%%'>'*}
          lib=$(lib_of "$hdr")
          [ -n "$lib" ] || continue
          case " ${FILE_MAY_LIB[$f]:-} " in *" $lib "*) continue ;; esac
          case " ${MUST_NOT[$dir]} " in
            *" $lib "*)
              echo "$f:$lineno: $dir/ must not include <$hdr> ($lib belongs to another layer)"
              bad=1 ;;
          esac ;;
      esac
    done < "$f"
  done
done
# A folder with C sources that the table does not know is a layer nobody
# placed.
for dir in $(ls -d */ | tr -d /); do
  case "$dir" in tests|bench|build) continue ;; esac
  ls "$dir"/*.c >/dev/null 2>&1 || continue
  [ -n "${MAY[$dir]+x}" ] || { echo "$dir/: a folder of C sources missing from scripts/check-includes.sh"; bad=1; }
done
[ $bad -eq 0 ] && echo "include rules: every folder keeps to its layer"
exit $bad
