#!/usr/bin/env bash
# build-kernel.sh - build a small x86_64 Linux kernel (bzImage) with CONFIG_USER_EVENTS=y
# for booting under qemu in this project's tests.
#
# Why: stock distribution kernels (Debian's 6.1 and 6.12 included) ship with
# "# CONFIG_USER_EVENTS is not set", so user_events cannot be tested natively.
# This rebuilds an equivalent of the project's test image: Debian's linux-source-6.12,
# `make tinyconfig`, merged with testbed/user-events.config (merge_config.sh -m),
# `make olddefconfig`, `make bzImage`. It writes the bzImage and its .config (as
# full.config, beside it).
#
# Usage: build-kernel.sh [OUTPUT] [--no-multi-format] [--jobs N] [--source DIR]
#                        [--suite SUITE] [--keep-work]
#   OUTPUT     where to write the bzImage (default: build/kernel/bzImage, or
#              build/kernel/bzImage-no-multi-format with --no-multi-format)
#   --no-multi-format  a kernel that refuses USER_EVENT_REG_MULTI_FORMAT with EINVAL, as
#              Linux 6.4 to 6.8 do: include/uapi/linux/user_events.h gets that header's
#              USER_EVENT_REG_MAX = 1U << 1 (6.12 has 1U << 2), and CONFIG_LOCALVERSION is
#              "-no-multi-format" so `uname -r` tells it apart; the .config is written as
#              full-no-multi-format.config. Tests run on both images: USER_EVENTS_KERNEL=A:B
#   --jobs N   parallel make jobs (default: nproc)
#   --source   use an already-extracted kernel tree (not modified: builds with O=; with
#              --no-multi-format, a hard-linked copy of it gets the header edit)
#   --suite    fetch linux-source-6.12 from this suite of the configured Debian mirror
#              (default: the configured suites, else trixie + bookworm-backports)
# Env: DEBIAN_MIRROR overrides the mirror found in /etc/apt; TMPDIR picks the work dir.
set -euo pipefail

OUT=""; JOBS=$(nproc 2>/dev/null || echo 2); SRC=""; SUITE=""; KEEP=0; NO_MULTI=0
PKG=linux-source-6.12
die() { echo "build-kernel: error: $*" >&2; exit 1; }
log() { echo "build-kernel: $*" >&2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --jobs) JOBS=${2:?--jobs needs N}; shift 2 ;;
    --jobs=*) JOBS=${1#*=}; shift ;;
    --source) SRC=${2:?--source needs DIR}; shift 2 ;;
    --suite) SUITE=${2:?--suite needs SUITE}; shift 2 ;;
    --keep-work) KEEP=1; shift ;;
    --no-multi-format) NO_MULTI=1; shift ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    -*) die "unknown option $1" ;;
    *) OUT=$1; shift ;;
  esac
done

if [ -z "$OUT" ]; then
  OUT=build/kernel/bzImage; [ "$NO_MULTI" = 1 ] && OUT=build/kernel/bzImage-no-multi-format
fi
case "$OUT" in /*) ;; *) OUT=$PWD/$OUT ;; esac
[ -z "$SRC" ] || SRC=$(cd "$SRC" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/build-kernel.XXXXXX")
if [ "$KEEP" = 1 ]; then log "work dir: $WORK"; else trap 'rm -rf "$WORK"' EXIT; fi
ROOT=0; [ "$(id -u)" = 0 ] && ROOT=1
HAVE_APT=0; command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null && HAVE_APT=1

# Kernel config fragment: testbed/user-events.config, beside this script (the same file as
# the shipped images' ../shared/kernel/user-events.config; tests/test_build_kernel_config.py
# fails if they differ). Copied into the work dir, since --no-multi-format appends to it.
FRAG_SRC=$(dirname "$(readlink -f "$0")")/user-events.config
[ -f "$FRAG_SRC" ] || die "$FRAG_SRC is missing (the config fragment this script builds with)"
FRAG=$WORK/user-events.config
cp "$FRAG_SRC" "$FRAG"

# Build dependencies.
DEPS="flex bison bc libelf-dev libssl-dev make gcc xz-utils"
if [ "$HAVE_APT" = 1 ]; then
  MISSING=""
  for p in $DEPS; do
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || MISSING="$MISSING $p"
  done
  [ "$ROOT" = 1 ] && { [ -n "$MISSING" ] || [ -z "$SRC" ]; } && apt-get update -qq
  if [ -n "$MISSING" ]; then
    [ "$ROOT" = 1 ] || die "missing build dependencies; run as root: apt-get install$MISSING"
    log "installing$MISSING"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $MISSING
  fi
else
  for c in flex bison bc make gcc xz; do command -v "$c" >/dev/null || die "needs $c (packages: $DEPS)"; done
fi

# The first configured mirror of the main Debian archive (from one-line or deb822 sources).
debian_mirror() {
  if [ -n "${DEBIAN_MIRROR:-}" ]; then echo "$DEBIAN_MIRROR"; return; fi
  { for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
      [ -f "$f" ] && sed -E 's/\[[^]]*\]//' "$f" | awk '$1 == "deb" { print $2, $3 }'
    done
    for f in /etc/apt/sources.list.d/*.sources; do
      [ -f "$f" ] && awk 'BEGIN { RS = "" } {
        delete v; k = ""; n = split($0, L, "\n")
        for (i = 1; i <= n; i++) {
          if (L[i] ~ /^#/) continue
          if (L[i] ~ /^[ \t]/) { v[k] = v[k] " " L[i]; continue }
          if (match(L[i], /^[A-Za-z-]+:/)) { k = tolower(substr(L[i], 1, RLENGTH - 1)); v[k] = substr(L[i], RLENGTH + 1) }
        }
        if (v["types"] !~ /(^|[ \t])deb([ \t]|$)/ || v["enabled"] ~ /no/) next
        nu = split(v["uris"], U, " "); ns = split(v["suites"], S, " ")
        for (a = 1; a <= nu; a++) for (b = 1; b <= ns; b++) print U[a], S[b]
      }' "$f"
    done
  } | awk '$2 ~ /^(buster|bullseye|bookworm|trixie|forky|sid|(old)*stable|testing|unstable)(-updates)?$/ && !n++ { print $1 }'
}

if [ -z "$SRC" ]; then
  [ "$HAVE_APT" = 1 ] || die "not a Debian system: pass --source DIR (an extracted Linux 6.12 tree)"
  mkdir -p "$WORK/dl"; chmod 755 "$WORK"; cd "$WORK/dl"
  [ "$ROOT" = 1 ] && id _apt >/dev/null 2>&1 && chown _apt "$WORK/dl"  # apt's download sandbox
  APT=(apt-get -q)
  CAND=$(apt-cache policy "$PKG" 2>/dev/null | awk '/Candidate:/ { print $2 }')
  if [ -n "$SUITE" ] || [ -z "$CAND" ] || [ "$CAND" = "(none)" ]; then
    MIRROR=$(debian_mirror); [ -n "$MIRROR" ] || die "no Debian mirror in /etc/apt; set DEBIAN_MIRROR"
    A=$WORK/apt; mkdir -p "$A/lists/partial" "$A/cache/archives/partial"
    KR=/usr/share/keyrings/debian-archive-keyring.gpg; OPT=""; [ -f "$KR" ] && OPT="[signed-by=$KR] "
    for s in ${SUITE:-trixie bookworm-backports}; do echo "deb $OPT$MIRROR $s main"; done > "$A/sources.list"
    log "adding suite(s) through $A/sources.list:"; cat "$A/sources.list" >&2
    APT+=(-o "Dir::Etc::sourcelist=$A/sources.list" -o Dir::Etc::sourceparts=-
          -o "Dir::State::Lists=$A/lists" -o "Dir::Cache=$A/cache")
    [ "$ROOT" = 1 ] && id _apt >/dev/null 2>&1 && chown _apt "$A/lists/partial"
    "${APT[@]}" update || log "warning: apt-get update reported errors"
  fi
  "${APT[@]}" download "$PKG"
  log "extracting $(basename "$WORK"/dl/${PKG}_*.deb)"
  dpkg-deb -x "$WORK"/dl/${PKG}_*.deb "$WORK/deb"
  tar -xJf "$WORK/deb/usr/src/$PKG.tar.xz" -C "$WORK"
  cd "$WORK"; rm -rf "$WORK/dl" "$WORK/deb"; SRC=$WORK/$PKG
fi
[ -f "$SRC/Makefile" ] && [ -x "$SRC/scripts/kconfig/merge_config.sh" ] || die "$SRC is not a kernel tree"

# --no-multi-format: the 6.4-6.8 value of USER_EVENT_REG_MAX, so that user_reg_get() answers
# EINVAL to USER_EVENT_REG_MULTI_FORMAT (1U << 1) exactly as those kernels do.
CONFIG_NAME=full.config
if [ "$NO_MULTI" = 1 ]; then
  if [ "$SRC" != "$WORK/$PKG" ]; then  # the caller's tree: edit a hard-linked copy
    log "copying $SRC (hard links) to edit its user_events.h"
    cp -al "$SRC" "$WORK/src" 2>/dev/null || cp -a "$SRC" "$WORK/src"
    SRC=$WORK/src
  fi
  H=$SRC/include/uapi/linux/user_events.h
  grep -Eq '^[[:space:]]*USER_EVENT_REG_MAX[[:space:]]*=[[:space:]]*1U << 2,' "$H" \
    || die "$H: no 'USER_EVENT_REG_MAX = 1U << 2,' line (not a 6.9+ tree?)"
  sed -i -E 's/^([[:space:]]*USER_EVENT_REG_MAX[[:space:]]*=[[:space:]]*)1U << 2,/\11U << 1,/' "$H"
  grep -Eq '^[[:space:]]*USER_EVENT_REG_MAX[[:space:]]*=[[:space:]]*1U << 1,' "$H" \
    || die "$H: the USER_EVENT_REG_MAX edit did not apply"
  log "$H: USER_EVENT_REG_MAX = 1U << 1 (MULTI_FORMAT refused with EINVAL)"
  echo 'CONFIG_LOCALVERSION="-no-multi-format"' >> "$FRAG"
  CONFIG_NAME=full-no-multi-format.config
fi

# Configure and build out of tree, so that the source tree stays untouched.
B=$WORK/obj; mkdir -p "$B"; MK=(make -C "$SRC" O="$B" ARCH=x86_64 -j"$JOBS")
log "building in $B with $JOBS job(s)"
"${MK[@]}" tinyconfig
(cd "$B" && ARCH=x86_64 "$SRC/scripts/kconfig/merge_config.sh" -m -O "$B" "$B/.config" "$FRAG")
"${MK[@]}" olddefconfig
grep -qx 'CONFIG_USER_EVENTS=y' "$B/.config" || die "CONFIG_USER_EVENTS=y is not in the final .config"
while read -r opt; do grep -qx "$opt" "$B/.config" || log "warning: $opt did not stick"; done < "$FRAG"
"${MK[@]}" bzImage

mkdir -p "$(dirname "$OUT")"
cp "$B/arch/x86/boot/bzImage" "$OUT"; cp "$B/.config" "$(dirname "$OUT")/$CONFIG_NAME"
echo "Built $(grep -m1 '^# Linux' "$B/.config" | sed 's/^# //; s/ Kernel Configuration//'): $OUT"
echo "  config: $(dirname "$OUT")/$CONFIG_NAME"
echo "Use it with: USER_EVENTS_KERNEL=$OUT python -m pytest"
