#!/usr/bin/env bash
# The Python client's wheel, built by setuptools' PEP 517 backend as `pip install ./python` builds it,
# in a copy of the repository's tracked python/ and .gitignore: the wheel holds the package and its
# prompts, and the copy's git status is clean afterwards (what the build writes is ignored).
set -euo pipefail
src=${1:?usage: package_test.sh SOURCE_DIR [PYTHON]}
python=${2:-/usr/bin/python3}  # Debian's, with python3-setuptools and python3-wheel (deploy/install-deps.sh)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/repo" "$work/dist"
(cd "$src" && git ls-files -z -- python .gitignore | xargs -0 cp --parents -t "$work/repo")
git -C "$work/repo" init -q
git -C "$work/repo" add -A
git -C "$work/repo" -c user.name=leap -c user.email=leap@localhost commit -qm copy
wheel=$(cd "$work/repo/python" && "$python" -c 'import sys; from setuptools import build_meta as b; print(b.build_wheel(sys.argv[1]))' "$work/dist" | tail -n 1)
contents=$("$python" -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$work/dist/$wheel")
for f in leap_client/__init__.py leap_client/prompts/; do
  grep -q "^$f" <<< "$contents" || { echo "package_test: $wheel lacks $f"; echo "$contents"; exit 1; }
done
left=$(git -C "$work/repo" status --porcelain --untracked-files=all)
[ -z "$left" ] || { echo "package_test: building the client left files in the tree:"; echo "$left"; exit 1; }
echo "package_test: $wheel; the tree is clean"
