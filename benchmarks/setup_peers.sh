#!/usr/bin/env bash
# Install the peer loaders the benchmark compares against (nothing is installed while it runs).
#   bash benchmarks/setup_peers.sh [PYTHON]      PYTHON: the interpreter of this project's venv (default .venv/bin/python)
# - HF datasets, megatron-core, matplotlib: the [bench] extra, in that venv;
# - gperc 0.7 and litdata: in that venv without their dependency pins (gperc pins Python < 3.10 packages;
#   litdata requires torchvision, whose index build needs a CUDA torch), plus litdata's other requirements;
# - Modalities 0.5.0 without its dependency pins (wandb, omegaconf, einops... are for training): its dataloader
#   modules (PackedMemMapDatasetBase) import jq, sentencepiece and transformers, installed beside it;
# - mosaicml-streaming: its own venv benchmarks/.venvs/mosaic (it pins numpy < 2.2 and transformers < 5),
#   with torch 2.13.0 and filelock 3.29.0 (worker processes fail on a lock "inherited across fork" otherwise);
# - Daft 0.7 and pylance (Lance): one venv benchmarks/.venvs/daft (Daft pins an older pyarrow than the project's),
#   linked as benchmarks/.venvs/lance; torch and the project come from the project venv's site-packages,
#   appended after the venv's own (a .pth file), so Daft's pyarrow wins.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
py="${1:-$root/.venv/bin/python}"
"$py" -m pip install -q -e "$root[bench]" "torch==2.13.0"
"$py" -m pip install -q --no-deps "gperc==0.7" "litdata==0.2.76"
"$py" -m pip install -q lightning-utilities boto3 requests tifffile obstore filelock "torch==2.13.0"
"$py" -m pip install -q --no-deps "modalities==0.5.0"
"$py" -m pip install -q jq sentencepiece "transformers>=5" "torch==2.13.0"
venv="$here/.venvs/mosaic"
if [ ! -x "$venv/bin/python" ]; then
    python3.11 -m venv "$venv"
fi
"$venv/bin/pip" install -q "torch==2.13.0"
"$venv/bin/pip" install -q "mosaicml-streaming==0.13.0" "filelock==3.29.0" "torch==2.13.0"
"$venv/bin/pip" uninstall -y -q torchvision || true   # CUDA-only build; streaming.base does not need it
cols="$here/.venvs/daft"
if [ ! -x "$cols/bin/python" ]; then
    python3.11 -m venv "$cols"
fi
"$cols/bin/pip" install -q "daft==0.7.26" "pylance==14.0.2" numpy duckdb
site="$("$py" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")"
echo "$site" > "$("$cols/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/zz_project_site.pth"
ln -sfn daft "$here/.venvs/lance"
echo "peers installed; run: $py -m benchmarks run --quick"
