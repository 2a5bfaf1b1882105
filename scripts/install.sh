#!/bin/sh
# Install edge-broker as a systemd service on Debian / Raspberry Pi OS (README "Running as a service").
#
#   sudo scripts/install.sh [--prefix /opt/edge-broker] [--no-start] [--python python3]
#   sudo scripts/install.sh --uninstall [--purge]
#   scripts/install.sh --root DIR [--device-python /usr/bin/python3] ...   # an image's root
#
# Installs: a virtual environment under PREFIX/venv with edge-broker from this source tree,
# /etc/edge-broker/edge-broker.toml (commented defaults; an existing file is never overwritten),
# the edge-broker system user and group, /etc/systemd/system/edge-broker.service with PREFIX
# filled in; then systemctl daemon-reload, enable and start (unless --no-start).
# Running it again upgrades the package and the unit and keeps the config: it is idempotent.
# --uninstall stops and removes the service and PREFIX; --purge also removes /etc/edge-broker,
# /var/lib/edge-broker and the user.
# With --root DIR every path is under DIR, systemctl is not called, and the user is written to
# DIR/etc/passwd and DIR/etc/group when those files exist (otherwise skipped with a message).
# The venv is then made to run when DIR becomes the device's /: its scripts, symlinks and
# pyvenv.cfg name PREFIX/venv and the device's interpreter (--device-python, default
# /usr/bin/python3, which must be the same Python X.Y as --python). Ownership is applied with the
# numeric ids from DIR/etc/passwd when running as root, and always recorded in
# DIR/usr/lib/tmpfiles.d/edge-broker.conf, which systemd-tmpfiles applies on the device's boot.
# Extra pip options (e.g. an offline wheelhouse): EDGE_BROKER_PIP_ARGS="--no-index --find-links /media/wheels".
set -eu

PREFIX=/opt/edge-broker
ROOT=
START=1
UNINSTALL=0
PURGE=0
PYTHON=${PYTHON:-python3}
DEVICE_PYTHON=/usr/bin/python3
USER_UID=
USER_GID=
USER_NAME=edge-broker
SRC=$(cd "$(dirname "$0")/.." && pwd)

die() { echo "install.sh: $*" >&2; exit 2; }
say() { echo "install.sh: $*"; }
# A device path as this run writes it: under --root, the file under DIR (and the device's path).
at() { if [ -n "$ROOT" ]; then echo "$ROOT$1 (on the device: $1)"; else echo "$1"; fi; }

while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) [ $# -ge 2 ] || die "--prefix needs a directory"; PREFIX=$2; shift 2 ;;
        --prefix=*) PREFIX=${1#*=}; shift ;;
        --root) [ $# -ge 2 ] || die "--root needs a directory"; ROOT=$2; shift 2 ;;
        --root=*) ROOT=${1#*=}; shift ;;
        --python) [ $# -ge 2 ] || die "--python needs an interpreter"; PYTHON=$2; shift 2 ;;
        --device-python) [ $# -ge 2 ] || die "--device-python needs a path"; DEVICE_PYTHON=$2; shift 2 ;;
        --device-python=*) DEVICE_PYTHON=${1#*=}; shift ;;
        --no-start) START=0; shift ;;
        --uninstall) UNINSTALL=1; shift ;;
        --purge) PURGE=1; shift ;;
        -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done
case "$PREFIX" in /*) ;; *) die "--prefix must be an absolute path, not $PREFIX" ;; esac
case "$DEVICE_PYTHON" in /*) ;; *) die "--device-python must be an absolute path, not $DEVICE_PYTHON" ;; esac
[ "$PURGE" = 0 ] || [ "$UNINSTALL" = 1 ] || die "--purge goes with --uninstall"
if [ -n "$ROOT" ]; then
    mkdir -p "$ROOT"
    ROOT=$(cd "$ROOT" && pwd)
    [ "$ROOT" != / ] || ROOT=
fi
SYSTEMCTL=1
[ -z "$ROOT" ] || SYSTEMCTL=0
if [ "$SYSTEMCTL" = 1 ]; then
    [ "$(id -u)" = 0 ] || die "run as root (sudo), or use --root DIR"
    command -v systemctl >/dev/null 2>&1 || die "systemctl not found: this installer needs systemd"
fi

ETC=$ROOT/etc/edge-broker
CONF=$ETC/edge-broker.toml
UNIT=$ROOT/etc/systemd/system/edge-broker.service
STATE=$ROOT/var/lib/edge-broker
VENV=$ROOT$PREFIX/venv
TMPFILES=$ROOT/usr/lib/tmpfiles.d/edge-broker.conf

# -- the user ---------------------------------------------------------------------------------
add_user() {
    if [ -z "$ROOT" ]; then
        if ! getent group "$USER_NAME" >/dev/null; then groupadd --system "$USER_NAME"; fi
        if ! getent passwd "$USER_NAME" >/dev/null; then
            useradd --system --gid "$USER_NAME" --home-dir /var/lib/edge-broker --no-create-home \
                --shell /usr/sbin/nologin --comment "edge-broker MQTT broker" "$USER_NAME"
            say "created system user $USER_NAME"
        fi
        return
    fi
    if [ ! -f "$ROOT/etc/passwd" ] || [ ! -f "$ROOT/etc/group" ]; then
        say "no $ROOT/etc/passwd and $ROOT/etc/group: the $USER_NAME user is not created"
        return
    fi
    if ! grep -q "^$USER_NAME:" "$ROOT/etc/group"; then
        gid=$(free_id "$ROOT/etc/group")
        echo "$USER_NAME:x:$gid:" >> "$ROOT/etc/group"
    fi
    gid=$(grep "^$USER_NAME:" "$ROOT/etc/group" | cut -d: -f3)
    if ! grep -q "^$USER_NAME:" "$ROOT/etc/passwd"; then
        uid=$(free_id "$ROOT/etc/passwd")
        echo "$USER_NAME:x:$uid:$gid:edge-broker MQTT broker:/var/lib/edge-broker:/usr/sbin/nologin" >> "$ROOT/etc/passwd"
        say "added $USER_NAME ($uid:$gid) to $ROOT/etc/passwd"
    fi
    USER_UID=$(grep "^$USER_NAME:" "$ROOT/etc/passwd" | cut -d: -f3)
    USER_GID=$gid
}

# the lowest system id (100-999) not used in the id column of $1
free_id() {
    id=100
    while cut -d: -f3 "$1" | grep -qx "$id"; do id=$((id + 1)); done
    [ "$id" -le 999 ] || die "no free system id in $1"
    echo "$id"
}

remove_user() {
    if [ -z "$ROOT" ]; then
        if getent passwd "$USER_NAME" >/dev/null; then userdel "$USER_NAME"; fi
        if getent group "$USER_NAME" >/dev/null; then groupdel "$USER_NAME" 2>/dev/null || true; fi
        return
    fi
    for f in "$ROOT/etc/passwd" "$ROOT/etc/group"; do
        if [ -f "$f" ] && grep -q "^$USER_NAME:" "$f"; then
            grep -v "^$USER_NAME:" "$f" > "$f.tmp" || true
            cat "$f.tmp" > "$f" && rm -f "$f.tmp"
        fi
    done
}

# chown OWNER:GROUP PATH to the service user: by name on this system; in --root mode by the
# numeric ids of DIR/etc/passwd (names would resolve against the build host's users), as root
# only. Either way DIR/usr/lib/tmpfiles.d/edge-broker.conf records it for the device's boot.
owned() {
    if [ -z "$ROOT" ]; then chown "$@"; return; fi
    [ -n "$USER_UID" ] && [ "$(id -u)" = 0 ] || return 0
    spec=$(echo "$1" | sed "s/^root:/0:/; s/^$USER_NAME:/$USER_UID:/; s/:$USER_NAME\$/:$USER_GID/")
    chown "$spec" "$2"
}

# The venv was created under DIR: point everything that names a path at the device's paths.
relocate_venv() {
    grep -lF "$VENV" "$VENV"/bin/* 2>/dev/null | while read -r f; do
        [ -L "$f" ] || sed -i "s|$VENV|$PREFIX/venv|g" "$f"
    done
    for f in "$VENV"/bin/python*; do
        if [ -L "$f" ]; then
            case "$(readlink "$f")" in /*) ln -sfn "$DEVICE_PYTHON" "$f" ;; esac
        fi
    done
    version=$(sed -n 's/^version *= *//p' "$VENV/pyvenv.cfg")
    {
        echo "home = $(dirname "$DEVICE_PYTHON")"
        echo "include-system-site-packages = false"
        echo "version = $version"
    } > "$VENV/pyvenv.cfg"
    say "relocated $VENV to run as $PREFIX/venv on the device with $DEVICE_PYTHON"
}

# The venv's site-packages are lib/pythonX.Y of --python: the image's interpreter must be X.Y.
check_device_python() {
    xy=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    if [ -e "$ROOT$DEVICE_PYTHON" ] || [ -L "$ROOT$DEVICE_PYTHON" ]; then
        lib=$ROOT$(dirname "$(dirname "$DEVICE_PYTHON")")/lib/python$xy
        [ -d "$lib" ] || die "the image's $DEVICE_PYTHON is not Python $xy (no $lib): build with --python of the same version"
    else
        say "the image has no $DEVICE_PYTHON yet: it must be Python $xy (or pass --device-python)"
    fi
}

# -- uninstall --------------------------------------------------------------------------------
if [ "$UNINSTALL" = 1 ]; then
    if [ "$SYSTEMCTL" = 1 ]; then
        systemctl disable --now edge-broker.service 2>/dev/null || true
    fi
    rm -f "$UNIT" "$TMPFILES"
    [ "$SYSTEMCTL" = 0 ] || systemctl daemon-reload
    rm -rf "$ROOT$PREFIX"
    say "removed the service and $(at "$PREFIX")"
    if [ "$PURGE" = 1 ]; then
        rm -rf "$ETC" "$STATE"
        remove_user
        say "purged $ETC, $STATE and the $USER_NAME user"
    else
        say "kept $ETC and $STATE (--purge removes them)"
    fi
    exit 0
fi

# -- install ----------------------------------------------------------------------------------
[ -f "$SRC/pyproject.toml" ] || die "run this script from an edge-broker source tree ($SRC has no pyproject.toml)"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
    || die "$PYTHON is not Python 3.11 or newer (Debian 12 / Raspberry Pi OS bookworm have 3.11; or use --python)"
"$PYTHON" -c 'import venv, ensurepip' 2>/dev/null \
    || die "$PYTHON cannot create virtual environments: apt-get install python3-venv"

[ -z "$ROOT" ] || check_device_python
add_user
mkdir -p "$ROOT$PREFIX" "$ETC" "$STATE" "$(dirname "$UNIT")"
if [ ! -e "$VENV/pyvenv.cfg" ]; then
    "$PYTHON" -m venv "$VENV"
    say "created the virtual environment $(at "$PREFIX/venv")"
elif [ -n "$ROOT" ]; then
    "$PYTHON" -m venv --upgrade "$VENV"  # a relocated venv names the device's Python: back to --python
fi
# pip builds in the tree it is given: build from a copy, so the source tree stays untouched
# (no root-owned build/ in a checkout) and two installs at once do not share a build directory.
BUILD=$(mktemp -d)
trap 'rm -rf "$BUILD"' EXIT
cp "$SRC/pyproject.toml" "$SRC/README.md" "$BUILD/"
tar -C "$SRC" --exclude=__pycache__ -cf - edge_broker | tar -C "$BUILD" -xf -
# shellcheck disable=SC2086  # EDGE_BROKER_PIP_ARGS is a list of options
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check ${EDGE_BROKER_PIP_ARGS:-} "$BUILD"
say "installed $("$VENV/bin/edge-broker" --version) into $VENV"
[ -z "$ROOT" ] || relocate_venv

if [ -e "$CONF" ]; then
    say "kept the existing $CONF"
else
    install -m 0640 "$SRC/systemd/edge-broker.toml" "$CONF"
    owned "root:$USER_NAME" "$CONF"
    say "wrote the default config $CONF"
fi
chmod 0750 "$ETC" "$STATE"
owned "root:$USER_NAME" "$ETC"
owned "$USER_NAME:$USER_NAME" "$STATE"
mkdir -p "$(dirname "$TMPFILES")"
cat > "$TMPFILES" <<EOF
# edge-broker (scripts/install.sh): the service user reads its config and owns its state.
# 'z' only adjusts what exists; systemd-tmpfiles applies it at boot (for --root images).
z /etc/edge-broker 0750 root $USER_NAME -
z /etc/edge-broker/edge-broker.toml 0640 root $USER_NAME -
d /var/lib/edge-broker 0750 $USER_NAME $USER_NAME -
EOF
chmod 0644 "$TMPFILES"

# The documentation, laid out as in the source tree so that every relative link resolves:
# README.md links docs/*.md and the pipeline's README; the docs link each other. The unit's
# Documentation= names doc/docs/operations.md and doc/README.md. A re-run replaces the folder.
DOC=$ROOT$PREFIX/doc
rm -rf "$DOC"
mkdir -p "$DOC/docs" "$DOC/edge_broker/pipeline"
install -m 0644 "$SRC/README.md" "$DOC/"
install -m 0644 "$SRC"/docs/*.md "$DOC/docs/"
for pictures in "$SRC"/docs/*/; do  # the screenshots the pages show (docs/console/*.png)
  [ -d "$pictures" ] || continue
  mkdir -p "$DOC/docs/$(basename "$pictures")"
  install -m 0644 "$pictures"* "$DOC/docs/$(basename "$pictures")/"
done
install -m 0644 "$SRC/edge_broker/pipeline/README.md" "$DOC/edge_broker/pipeline/"
say "installed the documentation into $DOC ($(find "$DOC" -name '*.md' | wc -l) pages)"
sed "s|@PREFIX@|$PREFIX|g" "$SRC/systemd/edge-broker.service" > "$UNIT.tmp"
chmod 0644 "$UNIT.tmp"
mv "$UNIT.tmp" "$UNIT"
say "installed $UNIT"

if [ "$SYSTEMCTL" = 1 ]; then
    systemctl daemon-reload
    systemctl enable edge-broker.service
    if [ "$START" = 1 ]; then
        systemctl restart edge-broker.service
        say "started: systemctl status edge-broker; journalctl -u edge-broker"
    else
        say "enabled, not started (--no-start): systemctl start edge-broker"
    fi
else
    say "--root: systemctl not called; nothing was installed on this machine. Built under $ROOT:"
    for built in "$PREFIX/venv" "$PREFIX/doc" /etc/edge-broker/edge-broker.toml \
        /etc/systemd/system/edge-broker.service /usr/lib/tmpfiles.d/edge-broker.conf \
        /var/lib/edge-broker; do
        say "  $ROOT$built"
    done
    say "the image runs them from those paths without $ROOT; enable the unit there"
    say "(systemctl --root=$ROOT enable edge-broker.service, or on the device)"
fi
