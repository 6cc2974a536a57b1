#!/usr/bin/env bash
# The peers' own environments, outside luong's runtime dependencies: .peers/joeynmt (JoeyNMT 2.3.0)
# and .peers/opennmt (OpenNMT-py 3.5.1). torch is not installed again: a .pth file puts the project's
# .venv/ last on each peer's path, so the peer runs on the very torch (2.11.0) that luong links and
# the Python reference uses, and a side-by-side figure compares code, not torch builds. Run
# scripts/install-deps.sh first.
#
# OpenNMT-py 3.5.1 (its last release, the only one for torch 2) pins torch<2.3: it is installed
# without its dependencies, which are then installed one by one, all but torch (its RNN training and
# translation run on torch 2.11 with TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1, bench/peers/opennmt.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ -x .venv/bin/python ]] || { echo "bench/peers/install.sh: run scripts/install-deps.sh first" >&2; exit 2; }
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# A peer's environment with the project's torch on its path.
make_peer_env() {
  [[ -x .peers/$1/bin/python ]] || /usr/bin/python3 -m venv ".peers/$1"
  local peer_site
  peer_site=$(".peers/$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$site" > "$peer_site/zz-luong-torch.pth"
}
make_peer_env joeynmt
# sentencepiece 0.2 dropped SetVocabulary, which JoeyNMT 2.3.0 calls; importlib_metadata is an
# undeclared import of joeynmt.helpers.
.peers/joeynmt/bin/pip install -q joeynmt==2.3.0 sentencepiece==0.1.99 importlib_metadata==10.2.0
.peers/joeynmt/bin/python -c 'import joeynmt.training, torch; print("joeynmt 2.3.0 on torch", torch.__version__)'

make_peer_env opennmt
.peers/opennmt/bin/pip install -q --no-deps OpenNMT-py==3.5.1
# Its declared dependencies but torch (every transform module is imported at start-up: spacy,
# fasttext and pyahocorasick among them); pip's resolver then warns about the torch pin.
.peers/opennmt/bin/pip install -q configargparse==1.9.0 pyyaml==6.0.4 rapidfuzz==3.14.6 six==1.17.0 sacrebleu==2.4.3 \
  pyonmttok==1.38.1 sentencepiece==0.2.0 spacy==3.7.5 fasttext-wheel==0.9.2 pyahocorasick==2.1.0 \
  tensorboard==2.18.0 flask==3.1.3 waitress==3.0.2 "ctranslate2==3.24.0" 2>&1 | grep -v "requires torch" || true
.peers/opennmt/bin/python -c 'import onmt.bin.train, torch; print("OpenNMT-py 3.5.1 on torch", torch.__version__)'
