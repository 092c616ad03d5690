#!/usr/bin/env bash
# Install the pinned external coding agents into DEST, where they are missing. DEST is $ECDYSIS_CODING_AGENTS_DIR,
# else coding-agents/ in the user's cache ($ECDYSIS_CACHE_DIR, else ~/.cache/ecdysis: ecdysis.coders.install finds
# them there the same way), shared by every checkout:
#   OpenCode 1.18.33 : npm install --prefix DEST/opencode opencode-ai@1.18.33 (the binary is in the registry package
#                      opencode-linux-x64; npm comes from Debian's nodejs/npm if missing)
#   aider 0.86.2     : its own venv, DEST/aider (its dependencies are hard-pinned)
# A ready machine costs two file checks. An install that an older version of this script made in the checkout
# (<repo>/.coding-agents) is kept: DEST becomes a link to it rather than a second install (a venv cannot move).
# Where something cannot be installed (no npm and no root, no registry), say so and exit 0: the coding-agent tests
# then skip, naming what is missing.
#
#   bash sandbox/ensure-coding-agents.sh        # what `make setup` runs
set -uo pipefail

OPENCODE_VERSION=1.18.33
AIDER_VERSION=0.86.2
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${ECDYSIS_CODING_AGENTS_DIR:-${ECDYSIS_CACHE_DIR:-$HOME/.cache/ecdysis}/coding-agents}"
PYTHON="${PYTHON:-python3}"
[[ -L $dest && ! -e $dest ]] && rm -f "$dest"  # a link to a checkout's install that has since been deleted
if [[ ! -e $dest && -d $root/.coding-agents ]]; then
    mkdir -p "$(dirname "$dest")"
    ln -s "$root/.coding-agents" "$dest" && echo "ensure-coding-agents: $dest links to the install in $root/.coding-agents"
fi
mkdir -p "$dest"

warn() { echo "ensure-coding-agents: warning: $*" >&2; }

as_root() {
    if [[ $(id -u) == 0 ]]; then "$@"
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo -n "$@"
    else return 1
    fi
}

opencode_ready() {
    local package="$dest/opencode/node_modules/opencode-linux-x64"
    [[ -x $package/bin/opencode ]] && grep -q "\"version\": \"$OPENCODE_VERSION\"" "$package/package.json" 2>/dev/null
}

aider_ready() {
    [[ -x $dest/aider/bin/aider ]] && grep -qx "Version: $AIDER_VERSION" \
        "$dest"/aider/lib/python3*/site-packages/aider_chat-"$AIDER_VERSION".dist-info/METADATA 2>/dev/null
}

install_opencode() {
    if ! command -v npm >/dev/null 2>&1; then
        if command -v apt-get >/dev/null 2>&1 && as_root true 2>/dev/null; then
            echo "ensure-coding-agents: installing nodejs and npm (Debian)"
            as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
            as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm \
                >/dev/null || { warn "apt-get could not install nodejs npm"; return 1; }
        else
            warn "npm is missing and cannot be installed here: sudo apt-get install -y nodejs npm"; return 1
        fi
    fi
    echo "ensure-coding-agents: installing OpenCode $OPENCODE_VERSION into $dest/opencode"
    # --ignore-scripts: the postinstall only links the same binary we call directly
    npm install --prefix "$dest/opencode" --no-audit --no-fund --no-save --ignore-scripts --loglevel=error \
        "opencode-ai@$OPENCODE_VERSION" >/dev/null || { warn "npm could not install opencode-ai@$OPENCODE_VERSION"; return 1; }
}

install_aider() {
    echo "ensure-coding-agents: installing aider $AIDER_VERSION into $dest/aider"
    rm -rf "$dest/aider"
    "$PYTHON" -m venv "$dest/aider" || { warn "cannot make a venv with $PYTHON (python3-venv)"; return 1; }
    "$dest/aider/bin/python" -m pip install -q --disable-pip-version-check "aider-chat==$AIDER_VERSION" 2>&1 \
        | grep -v "^WARNING: Location" >&2
    [[ ${PIPESTATUS[0]} -eq 0 ]] || { warn "pip could not install aider-chat==$AIDER_VERSION"; rm -rf "$dest/aider"; return 1; }
}

started=$SECONDS
done_any=0
if ! opencode_ready; then install_opencode && done_any=1; fi
if ! aider_ready; then install_aider && done_any=1; fi
opencode_ready && opencode="OpenCode $OPENCODE_VERSION" || opencode="OpenCode missing"
aider_ready && aider="aider $AIDER_VERSION" || aider="aider missing"
if [[ $done_any == 1 ]]; then
    echo "ensure-coding-agents: $opencode, $aider in $dest (installed in $((SECONDS - started)) s)"
else
    echo "ensure-coding-agents: $opencode, $aider in $dest"
fi
exit 0
