#!/bin/sh
# deploy/install.sh -- production install of tablesense from its wheel (docs/install.md, step by step).
#
#   sudo sh install.sh [--prefix /opt/tablesense] [--python python3] [--find-links DIR] WHEEL
#   sh install.sh --destdir /tmp/stage WHEEL        # stage under a directory (tests; needs no root)
#
# What it does, in order (each step is also written out by hand in docs/install.md):
#   1. checks Python >= 3.11 and the wheel file;
#   2. creates the virtual environment PREFIX/venv (kept on an upgrade) and installs the wheel into it
#      with its dependencies (from the package index, or only from --find-links DIR for a controller
#      without network access);
#   3. installs the systemd units (tablesense@.service, tablesense-signage@.service)
#      into /etc/systemd/system and the udev rule into /etc/udev/rules.d, from the installed package;
#   4. creates /etc/tablesense (table configs; the example configs go to /etc/tablesense/examples) and
#      /etc/credstore (mode 0700: the secrets systemd hands the units with LoadCredential=);
#   5. on a running systemd (and without --destdir): systemctl daemon-reload, udevadm control --reload.
# It never overwrites a table config or a credential, and never enables or starts a unit: write the
# config, check it, then `systemctl enable --now tablesense@TABLE` (docs/install.md).
#
# --destdir DIR puts every file below DIR (the venv in DIR/opt/tablesense/venv, the units in
# DIR/etc/systemd/system ...) as a package build would; the paths written into the units stay the real
# ones (PREFIX). A staged venv only runs from where it was made.
set -eu

prefix=/opt/tablesense
destdir=${DESTDIR:-}
python=python3
find_links=
wheel=

die() { echo "install.sh: $*" >&2; exit 2; }
step() { echo "install.sh: $*"; }

while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) [ $# -ge 2 ] || die "--prefix needs a directory"; prefix=$2; shift 2 ;;
    --destdir) [ $# -ge 2 ] || die "--destdir needs a directory"; destdir=$2; shift 2 ;;
    --python) [ $# -ge 2 ] || die "--python needs an interpreter"; python=$2; shift 2 ;;
    --find-links) [ $# -ge 2 ] || die "--find-links needs a directory"; find_links=$2; shift 2 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) [ -z "$wheel" ] || die "one wheel only (got $wheel and $1)"; wheel=$1; shift ;;
  esac
done

# 1. checks
[ -n "$wheel" ] || die "usage: install.sh [--prefix DIR] [--destdir DIR] [--python PY] [--find-links DIR] WHEEL"
[ -f "$wheel" ] || die "no such wheel: $wheel"
case "$wheel" in *.whl) ;; *) die "$wheel is not a wheel (.whl); build one with: python3 -m pip wheel --no-deps -w dist ." ;; esac
case "$prefix" in /*) ;; *) die "--prefix must be an absolute path, got $prefix" ;; esac
command -v "$python" >/dev/null 2>&1 || die "$python not found (tablesense needs Python 3.11 or newer)"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || die "$("$python" -V 2>&1) is too old: tablesense needs Python 3.11 or newer"
if [ -z "$destdir" ] && [ "$(id -u)" != 0 ]; then
  die "run as root (or stage with --destdir DIR)"
fi

# 2. the virtual environment and the wheel
venv="$destdir$prefix/venv"
if [ -x "$venv/bin/python" ]; then
  step "upgrading the virtual environment $venv"
else
  step "creating the virtual environment $venv"
  "$python" -m venv "$venv"
fi
set -- --disable-pip-version-check --no-input
[ -z "$find_links" ] || set -- "$@" --no-index --find-links "$find_links"
step "installing $(basename "$wheel") and its dependencies (about a minute)"
"$venv/bin/python" -m pip install "$@" --upgrade "$wheel"
# the same version again (a rebuilt wheel): replace tablesense itself, leave the dependencies
"$venv/bin/python" -m pip install "$@" --quiet --no-deps --force-reinstall "$wheel"
version=$("$venv/bin/tablesense" --version)
data=$("$venv/bin/python" -c 'from tablesense.daemon.resources import data_path; print(data_path("deploy"))')

# 3. units and udev rule, from the installed package
units="$destdir/etc/systemd/system"
mkdir -p "$units" "$destdir/etc/udev/rules.d"
for unit in tablesense@.service tablesense-signage@.service; do
  sed "s#/opt/tablesense#$prefix#g" "$data/systemd/$unit" > "$units/$unit.tmp"
  chmod 0644 "$units/$unit.tmp"
  mv "$units/$unit.tmp" "$units/$unit"
done
install -m 0644 "$data/udev/70-tablesense.rules" "$destdir/etc/udev/rules.d/70-tablesense.rules"
step "installed the units tablesense@.service, tablesense-signage@.service and the udev rule"

# 4. configuration and credential directories
install -d -m 0755 "$destdir/etc/tablesense" "$destdir/etc/tablesense/examples"
install -m 0644 "$data"/examples/*.toml "$destdir/etc/tablesense/examples/"
install -d -m 0700 "$destdir/etc/credstore"
step "example configs in /etc/tablesense/examples; secrets go to /etc/credstore (mode 0700)"

# 5. tell systemd and udev (only on the live system)
if [ -z "$destdir" ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload
  udevadm control --reload || true
fi
step "done: $version in $prefix/venv; next: docs/install.md steps 4 to 6 (table config, secrets, enable)"
