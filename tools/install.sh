#!/bin/sh
# `make install` and `make uninstall`: foliod and folio, the systemd units, the sysusers and
# tmpfiles entries, the configuration file, man pages made from --help, bash and zsh completions,
# and the documentation, below DESTDIR and PREFIX. With no DESTDIR, as root and under systemd, it
# also creates the folio user and its directories and reloads systemd (unless SYSTEMD_SETUP=no);
# the data in /var/lib/folio is never touched, also not by uninstall.
#
#   tools/install.sh install|uninstall   (variables: see the Makefile)
set -eu
cd "$(dirname "$0")/.."
action=${1:?install or uninstall}
: "${PREFIX:=/usr/local}" "${SYSCONFDIR:=/etc}"
: "${BINDIR:=$PREFIX/bin}" "${LIBDIR:=$PREFIX/lib}" "${MANDIR:=$PREFIX/share/man}" "${DOCDIR:=$PREFIX/share/doc/folio}"
: "${UNITDIR:=$LIBDIR/systemd/system}" "${SYSUSERSDIR:=$LIBDIR/sysusers.d}" "${TMPFILESDIR:=$LIBDIR/tmpfiles.d}"
: "${BASHCOMPLETIONDIR:=$PREFIX/share/bash-completion/completions}" "${ZSHCOMPLETIONDIR:=$PREFIX/share/zsh/site-functions}"
: "${SWIFT:=swift}"
root=${DESTDIR:-}
config=$SYSCONFDIR/folio/foliod.conf
# SYSTEMD_SETUP=no leaves the running system alone (the install test, packagers).
live=false
if [ -z "$root" ] && [ "${SYSTEMD_SETUP:-yes}" != no ] && [ "$(id -u)" = 0 ] && [ -d /run/systemd/system ]; then live=true; fi

# The files this installs, in one place for both actions.
installed="$BINDIR/foliod $BINDIR/folio $UNITDIR/foliod.service $UNITDIR/foliod.socket
$SYSUSERSDIR/folio.conf $TMPFILESDIR/folio.conf $MANDIR/man8/foliod.8 $MANDIR/man1/folio.1
$BASHCOMPLETIONDIR/folio $BASHCOMPLETIONDIR/foliod $ZSHCOMPLETIONDIR/_folio
$DOCDIR/README.md $DOCDIR/PROTOCOL.md $DOCDIR/foliod.conf"

# Paths the shipped units and files name, rewritten for this PREFIX and SYSCONFDIR.
placed() {
    sed -e "s|/usr/local/bin/|$BINDIR/|g" -e "s|/usr/local/share/doc/folio|$DOCDIR|g" \
        -e "s|/etc/folio/foliod.conf|$config|g" "$1"
}

binaries() {
    if [ -n "${BINARIES:-}" ]; then
        echo "$BINARIES"
        return
    fi
    bin=.build/release
    if [ ! -x "$bin/foliod" ] || [ ! -x "$bin/folio" ] || [ -n "$(find Package.swift Sources -newer "$bin/foliod" | head -n 1)" ]; then
        if ! command -v "$SWIFT" >/dev/null 2>&1; then
            echo "install: the release build is missing or older than the sources, and '$SWIFT' is not on this PATH" >&2
            echo "install: run 'make build' as yourself first, then 'sudo make install'" >&2
            exit 1
        fi
        # Under sudo, build as the user who owns the tree, so .build stays theirs.
        if [ -n "${SUDO_USER:-}" ] && [ "$(id -u)" = 0 ]; then
            sudo -u "$SUDO_USER" "$(command -v "$SWIFT")" build -c release >&2
        else
            "$SWIFT" build -c release >&2
        fi
    fi
    echo "$bin"
}

case $action in
install)
    bin=$(binaries)
    install -d "$root$BINDIR" "$root$UNITDIR" "$root$SYSUSERSDIR" "$root$TMPFILESDIR" "$root$MANDIR/man1" \
        "$root$MANDIR/man8" "$root$BASHCOMPLETIONDIR" "$root$ZSHCOMPLETIONDIR" "$root$DOCDIR" "$root$SYSCONFDIR/folio"
    install -m 755 "$bin/foliod" "$bin/folio" "$root$BINDIR/"
    for unit in foliod.service foliod.socket; do
        placed "systemd/$unit" > "$root$UNITDIR/$unit"
        chmod 644 "$root$UNITDIR/$unit"
    done
    install -m 644 systemd/folio.sysusers "$root$SYSUSERSDIR/folio.conf"
    install -m 644 systemd/folio.tmpfiles "$root$TMPFILESDIR/folio.conf"
    tools/manpage "$bin/foliod" 8 "the Folio data daemon" > "$root$MANDIR/man8/foliod.8"
    SEE_ALSO="foliod(8)" tools/manpage "$bin/folio" 1 "the Folio command-line client" create get update delete batch \
        history links backlinks schema list count view events watch export verify backup stats hello metrics top \
        > "$root$MANDIR/man1/folio.1"
    chmod 644 "$root$MANDIR/man8/foliod.8" "$root$MANDIR/man1/folio.1"
    install -m 644 completions/folio.bash "$root$BASHCOMPLETIONDIR/folio"
    install -m 644 completions/folio.bash "$root$BASHCOMPLETIONDIR/foliod"
    install -m 644 completions/_folio "$root$ZSHCOMPLETIONDIR/_folio"
    install -m 644 README.md proto/PROTOCOL.md "$root$DOCDIR/"
    # The configuration shipped, for reference and so that uninstall can tell an edited one.
    placed systemd/foliod.conf > "$root$DOCDIR/foliod.conf"
    chmod 644 "$root$DOCDIR/foliod.conf"
    if [ -e "$root$config" ]; then
        echo "install: kept $root$config (the shipped one is $root$DOCDIR/foliod.conf)"
    else
        install -m 644 "$root$DOCDIR/foliod.conf" "$root$config"
    fi
    if $live; then
        systemd-sysusers "$SYSUSERSDIR/folio.conf"
        systemd-tmpfiles --create "$TMPFILESDIR/folio.conf"
        systemctl daemon-reload
        echo "install: done; start it with: systemctl enable --now foliod.socket"
        echo "install: users in group folio may write: usermod -aG folio NAME"
    fi
    ;;
uninstall)
    if $live; then systemctl disable --now foliod.socket foliod.service 2>/dev/null || true; fi
    if [ -e "$root$config" ] && [ -e "$root$DOCDIR/foliod.conf" ] && ! cmp -s "$root$config" "$root$DOCDIR/foliod.conf"; then
        echo "uninstall: kept $root$config, which was edited"
    else
        rm -f "$root$config"
        rmdir "$root$SYSCONFDIR/folio" 2>/dev/null || true
    fi
    for file in $installed; do rm -f "$root$file"; done
    rmdir "$root$DOCDIR" 2>/dev/null || true
    if $live; then
        systemctl daemon-reload
        echo "uninstall: done; the data in /var/lib/folio and the folio user are kept"
    fi
    ;;
*)
    echo "usage: $0 install|uninstall" >&2
    exit 64
    ;;
esac
