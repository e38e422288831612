#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Train the Cu-Ni example potential with train-potential and record how it was made.
#
#   examples/cuni/train.sh                                   # 2 ranks, examples/cuni/train-mace.yaml as it is
#   NP=1 examples/cuni/train.sh --max_num_epochs 2           # any train-potential flag overrides the config
#
# Environment: NP (ranks, 2), MPIRUN (mpirun), TRAIN_POTENTIAL (build/bin/train-potential),
# OMP_NUM_THREADS (1: one thread per rank).
# From the repository root (or anywhere: it changes there). Steps: split the data
# (split_dataset.py; deterministic), run `mpirun -np NP build/bin/train-potential --config
# examples/cuni/train-mace.yaml "$@"`, then write WORK_DIR/provenance.txt (WORK_DIR = the
# config's examples/cuni/run unless --work_dir is given): the exact command, git commit, SHA-256
# of the config, the data files and the exported potential, the seed, the epochs, the wall time
# and the last line of the learning curve. potentials/README.md copies that record when a
# trained file replaces potentials/cuni-mace-small.safetensors.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "${repo}"
np=${NP:-2}
mpirun=${MPIRUN:-mpirun}
exe=${TRAIN_POTENTIAL:-build/bin/train-potential}
if [[ $(id -u) == 0 ]] && "${mpirun}" --version 2>/dev/null | grep -q "Open MPI"; then
  # Open MPI refuses to start as root without these (containers and CI often run as root).
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
config=examples/cuni/train-mace.yaml

# The few options this script reads back; the last occurrence on the command line wins, as in
# train-potential itself.
work_dir=$(sed -n 's/^work_dir: *\([^ #]*\).*/\1/p' "${config}")
name=$(sed -n 's/^name: *\([^ #]*\).*/\1/p' "${config}")
seed=$(sed -n 's/^seed: *\([^ #]*\).*/\1/p' "${config}")
epochs=$(sed -n 's/^max_num_epochs: *\([^ #]*\).*/\1/p' "${config}")
args=("$@")
for ((i = 0; i < ${#args[@]}; ++i)); do
  a=${args[i]}
  next=${args[i + 1]:-}
  case "${a}" in
    --work_dir) work_dir=${next} ;; --work_dir=*) work_dir=${a#*=} ;;
    --name) name=${next} ;; --name=*) name=${a#*=} ;;
    --seed) seed=${next} ;; --seed=*) seed=${a#*=} ;;
    --max_num_epochs) epochs=${next} ;; --max_num_epochs=*) epochs=${a#*=} ;;
  esac
done

python3 examples/cuni/split_dataset.py
mkdir -p "${work_dir}"
command=("${mpirun}" -np "${np}" "${exe}" --config "${config}" "$@")
echo "+ ${command[*]}"
start=$(date +%s)
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} "${command[@]}"
seconds=$(($(date +%s) - start))

output="${work_dir}/${name}.safetensors"
csv="${work_dir}/results/${name}_train.csv"
dirty=$(git status --porcelain --untracked-files=no | head -c1)
{
  echo "command: ${command[*]}"
  echo "git commit: $(git rev-parse HEAD)${dirty:+ (with uncommitted changes)}"
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), host cores: $(nproc), OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}"
  echo "seed: ${seed}, epochs: ${epochs}, ranks: ${np}, wall time: ${seconds} s"
  for f in "${config}" examples/cuni/data/cuni-eam.xyz examples/cuni/data/train.xyz \
           examples/cuni/data/valid.xyz examples/cuni/data/test.xyz "${output}"; do
    echo "sha256 ${f}: $(sha256sum "${f}" | cut -d' ' -f1)"
  done
  echo "learning curve (eV/atom, eV/A): $(head -1 "${csv}")"
  echo "last epoch: $(tail -1 "${csv}")"
} > "${work_dir}/provenance.txt.tmp"
mv "${work_dir}/provenance.txt.tmp" "${work_dir}/provenance.txt"
cat "${work_dir}/provenance.txt"
