#!/usr/bin/env bash
# The peers' own environments, outside luong's runtime dependencies: .peers/joeynmt (JoeyNMT 2.3.0).
# torch is not installed again: a .pth file puts the project's .venv/ last on the peer's path, so the
# peer runs on the very torch (2.11.0) that luong links and the Python reference uses, and a
# side-by-side figure compares code, not torch builds. Run scripts/install-deps.sh first.
#
# OpenNMT-py is not installed: its last release (3.5.1, the only one for torch 2) requires
# torch<2.3, and its own pin would replace the torch that everything here is measured on.
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ -x .venv/bin/python ]] || { echo "bench/peers/install.sh: run scripts/install-deps.sh first" >&2; exit 2; }
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [[ ! -x .peers/joeynmt/bin/python ]]; then
  /usr/bin/python3 -m venv .peers/joeynmt
fi
peer_site=$(.peers/joeynmt/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$site" > "$peer_site/zz-luong-torch.pth"
# sentencepiece 0.2 dropped SetVocabulary, which JoeyNMT 2.3.0 calls; importlib_metadata is an
# undeclared import of joeynmt.helpers.
.peers/joeynmt/bin/pip install -q joeynmt==2.3.0 sentencepiece==0.1.99 importlib_metadata==10.2.0
.peers/joeynmt/bin/python -c 'import joeynmt.training, torch; print("joeynmt 2.3.0 on torch", torch.__version__)'
