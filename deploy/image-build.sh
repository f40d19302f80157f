#!/usr/bin/env bash
# The image's build steps, as a script of their own so that CI runs exactly what the Dockerfile
# runs (there is no container engine in CI): a virtual environment at DEST with the project from
# SRC and its dependencies, then a smoke test of the installed command.
# Usage: deploy/image-build.sh SRC DEST
set -euo pipefail
src=${1:?usage: image-build.sh SRC DEST}
dest=${2:?usage: image-build.sh SRC DEST}

python3 -m venv "$dest"
"$dest/bin/python" -m pip install --no-cache-dir --quiet --upgrade pip
# A wheel first, then an install of the wheel: what a user installs, not the source tree.
wheels=$(mktemp -d)
"$dest/bin/python" -m pip wheel --no-cache-dir --quiet --no-deps -w "$wheels" "$src"
"$dest/bin/python" -m pip install --no-cache-dir --quiet "$wheels"/*.whl
rm -rf "$wheels"
"$dest/bin/handback" --version
"$dest/bin/handback" run --help >/dev/null
