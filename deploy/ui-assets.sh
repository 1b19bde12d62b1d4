#!/usr/bin/env bash
# Vendor the admin console's browser libraries (iostack/controller/ui) from the npm registry.
# Pinned versions; npm checks each tarball's integrity. The console serves these files itself:
# no CDN is contacted at run time. Idempotent: does nothing when the pinned files are in place.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest="$here/../iostack/controller/ui/static/vendor"
HTMX=2.0.8
UPLOT=1.6.32
stamp="$dest/.versions"
want="htmx.org@$HTMX uplot@$UPLOT"
[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && exit 0

if ! command -v npm >/dev/null 2>&1; then
    # Debian's nodejs has no npm (NodeSource's has): install Debian's npm where it is missing.
    sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends npm
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "htmx.org@$HTMX" "uplot@$UPLOT" >/dev/null)
mkdir -p "$dest"
tar -xzf "$work/htmx.org-$HTMX.tgz" -C "$work" package/dist/htmx.min.js package/LICENSE
cp "$work/package/dist/htmx.min.js" "$dest/htmx.min.js"
cp "$work/package/LICENSE" "$dest/htmx.LICENSE"
rm -rf "$work/package"
tar -xzf "$work/uplot-$UPLOT.tgz" -C "$work" package/dist/uPlot.iife.min.js package/dist/uPlot.min.css package/LICENSE
cp "$work/package/dist/uPlot.iife.min.js" "$work/package/dist/uPlot.min.css" "$dest/"
cp "$work/package/LICENSE" "$dest/uPlot.LICENSE"
echo "$want" > "$stamp"
echo "ui-assets: vendored $want into $dest"
