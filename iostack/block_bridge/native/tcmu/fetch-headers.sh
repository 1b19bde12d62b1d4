#!/bin/sh
# Puts tcmu-runner's headers (tcmu-runner.h and what it includes) into DEST.
# Debian ships tcmu-runner and libtcmu.so.2 but no headers; its source
# package has them. A private apt configuration (the system's own archives
# as deb-src entries, its own lists and cache under DEST) fetches the source
# without touching the system's apt setup. Idempotent: does nothing if the
# headers are there.
set -eu
dest=${1:?usage: fetch-headers.sh DEST}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
[ -f "$dest/tcmu-runner.h" ] && [ -f "$dest/libtcmu_priv.h" ] && exit 0

version=$(dpkg-query -W -f='${source:Version}' tcmu-runner 2>/dev/null || true)
[ -n "$version" ] || { echo "fetch-headers: tcmu-runner is not installed" >&2; exit 1; }

apt="$dest/apt"
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/sources.list.d" "$dest/src"
# The same archives (mirror, suites, keys) the system installs binaries from.
: > "$apt/sources.list"
for list in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$list" ] && sed -n 's/^deb /deb-src /p' "$list" >> "$apt/sources.list"
done
for sources in /etc/apt/sources.list.d/*.sources; do
    [ -f "$sources" ] && sed 's/^Types:.*/Types: deb-src/' "$sources" \
        > "$apt/sources.list.d/$(basename "$sources")"
done
set -- -o Dir::Etc::SourceList="$apt/sources.list" -o Dir::Etc::SourceParts="$apt/sources.list.d" \
       -o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt/cache" -o APT::Sandbox::User=root
apt-get -qq "$@" update
(cd "$dest/src" && apt-get -qq "$@" source --download-only "tcmu=$version")
tarball=$(ls "$dest"/src/tcmu_*.orig.tar.* | head -n 1)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xf "$tarball" -C "$tmp"
top=$(ls -d "$tmp"/*/ | head -n 1)
# Everything tcmu-runner.h and libtcmu_priv.h pull in lives at the top and in ccan/.
cp "$top"/*.h "$dest/"
cp -r "$top/ccan" "$dest/"
# The generated version header is not in the tarball.
[ -f "$dest/version.h" ] || echo "#define TCMUR_VERSION \"$version\"" > "$dest/version.h"
echo "fetch-headers: tcmu-runner headers $version in $dest"
